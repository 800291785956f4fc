"""The run index: registered when archives are sealed, refreshed from the folders when
stale, rebuilt when missing or broken, consistent under concurrent writers."""

import json
import multiprocessing
import shutil
import sqlite3

import pytest

from model_optimizer.archive import RunArchive, entry, index

from .fakes import make_run, tiny_recipe


@pytest.fixture
def recipe(tmp_path):
    return tiny_recipe(tmp_path)


def ids(root):
    return {row["id"] for row in index.all_rows(root)}


def test_sealing_registers_the_run_with_its_figures(tmp_path, recipe):
    runs = tmp_path / "runs"
    folder = make_run(runs, recipe, ["engine.max_num_seqs=4"])
    assert (runs / index.INDEX_NAME).is_file()
    [row] = index.all_rows(runs, refresh_first=False)
    metrics = json.loads((folder / "metrics.json").read_text())
    assert row["id"] == folder.name and row["path"] == folder.name
    assert row["kind"] == "run" and row["status"] == "ok"
    assert row["recipe_name"] == "tiny-cpu" and row["recipe_revision"] == 1
    assert row["qps"] == pytest.approx(metrics["qps"])
    assert row["ttft_p99_ms"] == pytest.approx(metrics["ttft_p99_ms"])
    assert row["vllm_version"] == "0.32.0" and row["hardware"] == "Test CPU 9000"
    assert len(row["recipe_hash"]) == 16 and row["parent"] is None


def test_config_hash_ignores_bookkeeping_only():
    base = {"name": "a", "revision": 1, "engine": {"max_num_seqs": 4}}
    assert entry.config_hash(base) == entry.config_hash(
        {**base, "name": "b", "revision": 7, "validated": {"run_id": "x"}})
    assert entry.config_hash(base) != entry.config_hash({**base, "engine": {"max_num_seqs": 8}})


def test_steps_are_indexed_under_their_sweep(tmp_path, recipe):
    runs = tmp_path / "runs"
    sweep = RunArchive.create(runs, "tiny-sweep", kind="sweep")
    step = make_run(sweep.path / "steps", recipe)
    sweep.set_status("ok")
    sweep.close()
    assert index.runs_root_of(step) == runs.resolve()
    rows = {row["id"]: row for row in index.all_rows(runs)}
    assert rows[step.name]["parent"] == sweep.id
    assert rows[step.name]["path"] == f"{sweep.id}/steps/{step.name}"
    assert rows[sweep.id]["kind"] == "sweep"


def test_refresh_follows_added_changed_and_removed_folders(tmp_path, recipe):
    runs = tmp_path / "runs"
    first, second = make_run(runs, recipe), make_run(runs, recipe, seed=1)
    copy = runs / (first.name[:-6] + "c0ffee")
    shutil.copytree(first, copy)  # appears without being registered
    assert ids(runs) == {first.name, second.name, copy.name}
    shutil.rmtree(second)
    status = json.loads((first / "status.json").read_text())
    status["status"] = "interrupted"
    (first / "status.json").write_text(json.dumps(status))
    counts = index.refresh(runs)
    assert counts == {"added": 0, "updated": 1, "removed": 1, "total": 2}
    rows = {row["id"]: row for row in index.all_rows(runs)}
    assert set(rows) == {first.name, copy.name} and rows[first.name]["status"] == "interrupted"
    assert index.refresh(runs) == {"added": 0, "updated": 0, "removed": 0, "total": 2}


def test_missing_or_corrupt_index_is_rebuilt(tmp_path, recipe):
    runs = tmp_path / "runs"
    made = {make_run(runs, recipe).name, make_run(runs, recipe, seed=1).name}
    for suffix in ("", "-wal", "-shm"):
        (runs / (index.INDEX_NAME + suffix)).unlink(missing_ok=True)
    assert ids(runs) == made
    (runs / index.INDEX_NAME).write_bytes(b"this is not a database" * 100)
    for suffix in ("-wal", "-shm"):
        (runs / (index.INDEX_NAME + suffix)).unlink(missing_ok=True)
    assert ids(runs) == made
    assert index.refresh(runs, full=True)["added"] == 2


def test_folder_without_status_is_listed_as_incomplete(tmp_path, recipe):
    runs = tmp_path / "runs"
    make_run(runs, recipe)
    (runs / "20260101T000000Z-broken-abcdef").mkdir()
    rows = {row["id"]: row for row in index.all_rows(runs)}
    assert rows["20260101T000000Z-broken-abcdef"]["status"] == "incomplete"
    assert rows["20260101T000000Z-broken-abcdef"]["created_at"] == "2026-01-01T00:00:00Z"


def test_find_by_id_prefix_and_suffix(tmp_path, recipe):
    runs = tmp_path / "runs"
    folder = make_run(runs, recipe)
    make_run(runs, recipe, seed=1)
    assert [r["id"] for r in index.find(runs, folder.name)] == [folder.name]
    assert [r["id"] for r in index.find(runs, folder.name.rsplit("-", 1)[1])] == [folder.name]
    assert len(index.find(runs, folder.name[:8])) == 2
    assert index.find(runs, "nothing-like-it") == []


def _writer(runs: str, recipe: str, count: int) -> None:
    for seed in range(count):
        make_run(runs, recipe, seed=seed, count=12)


def test_concurrent_writers_lose_nothing(tmp_path, recipe):
    runs = tmp_path / "runs"
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_writer, args=(str(runs), str(recipe), 5))
               for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    folders = {p.name for p in runs.iterdir() if p.is_dir()}
    assert len(folders) == 20
    conn = sqlite3.connect(runs / index.INDEX_NAME)
    registered = {row[0] for row in conn.execute("SELECT id FROM runs")}
    conn.close()
    assert registered == folders  # every seal registered, before any refresh
    assert conn is not None and index.refresh(runs)["updated"] == 0


def _finished_archives(runs, count: int) -> set[str]:
    made = set()
    for number in range(count):
        archive = RunArchive.create(runs, f"recipe-with-a-long-name-{number:03d}" + "x" * 30)
        archive.set_status("ok", phase="finished", note="y" * 200)
        archive.close()
        made.add(archive.id)
    return made


def test_an_index_with_corrupt_pages_is_rebuilt(tmp_path):
    runs = tmp_path / "runs"
    made = _finished_archives(runs, 40)
    with sqlite3.connect(runs / index.INDEX_NAME) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray((runs / index.INDEX_NAME).read_bytes())
    assert len(data) >= 4 * 4096  # several pages: the header page stays readable
    data[4096:] = b"\xa5" * (len(data) - 4096)  # every page but the first is garbage
    (runs / index.INDEX_NAME).write_bytes(bytes(data))
    conn = sqlite3.connect(runs / index.INDEX_NAME)
    with pytest.raises(sqlite3.DatabaseError, match="malformed"):
        conn.execute("SELECT * FROM runs").fetchall()
    conn.close()
    assert index.refresh(runs, full=True)["total"] == 40  # mopt runs --reindex
    assert ids(runs) == made
    data = bytearray((runs / index.INDEX_NAME).read_bytes())
    data[4096:] = b"\xa5" * (len(data) - 4096)
    (runs / index.INDEX_NAME).write_bytes(bytes(data))
    assert ids(runs) == made  # a plain listing rebuilds it too
    extra = RunArchive.create(runs, "late")
    data = bytearray((runs / index.INDEX_NAME).read_bytes())
    data[4096:] = b"\xa5" * (len(data) - 4096)
    (runs / index.INDEX_NAME).write_bytes(bytes(data))
    extra.set_status("ok")
    extra.close()  # sealing registers it in a damaged index: rebuilt
    assert ids(runs) == made | {extra.id}
    assert {r["id"] for r in index.all_rows(runs, refresh_first=False)} == made | {extra.id}

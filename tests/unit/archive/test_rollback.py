"""`mopt rollback` on hand-made archives: a new revision, history kept, broken archives refused."""

import json

import pytest
import yaml

from model_optimizer.archive import index
from model_optimizer.archive.manifest import MANIFEST_NAME, ArchiveError, verify_archive
from model_optimizer.errors import UsageError
from model_optimizer.history.rollback import rollback
from model_optimizer.recipe import load_recipe
from model_optimizer.search.measure import Measurement
from model_optimizer.search.sweep.flags import SweepFlags
from model_optimizer.search.sweep.loop import start_sweep

from .fakes import FakeOutcome, make_run, read_json, tiny_recipe, tree_state


@pytest.fixture
def recipe(tmp_path):
    return tiny_recipe(tmp_path)


def fake_measure(step, value):
    qps = {1: 4.0, 2: 7.5, 4: 13.0}.get(value, 13.5)
    return Measurement("ok", samples=[qps], slo_met=True, preemptions=0,
                       run_ids=[f"run-{value}"],
                       figures={"qps": qps, "goodput_qps": qps, "ttft_p50_ms": 40.0,
                                "status": "ok"})


def sweep_to_revision_2(recipe, runs):
    loaded = load_recipe(recipe, ["sweep.confirm_duration_s=0", "sweep.max=4"])
    outcome = start_sweep(loaded, runs, flags=SweepFlags(start=1), measure=fake_measure)
    assert outcome.written == recipe and load_recipe(recipe).resolved["revision"] == 2
    return outcome


def comparable(resolved):
    """The configuration, without bookkeeping and the pins a validated revision adds."""
    out = {k: v for k, v in resolved.items() if k not in ("revision", "validated")}
    out["model"] = {k: v for k, v in out["model"].items() if k != "pins"}
    return out


def test_rollback_of_a_run_restores_what_it_ran_as_a_new_revision(tmp_path, recipe):
    runs = tmp_path / "runs"
    first = make_run(runs, recipe, ["engine.max_num_seqs=4", "workload.num_requests=30"])
    sweep = sweep_to_revision_2(recipe, runs)
    result = rollback(first.name, runs)
    assert (result.previous_revision, result.revision) == (2, 3)
    restored = load_recipe(recipe).resolved
    ran = yaml.safe_load((first / "recipe.resolved.yaml").read_text())
    assert comparable(restored) == comparable(ran)
    assert restored["revision"] == 3
    validated = restored["validated"]
    assert validated["by"] == "rollback"
    assert validated["rollback_of"] == validated["run_id"] == first.name
    assert validated["metrics"]["qps"] == read_json(first / "metrics.json")["qps"]
    assert validated["vllm_version"] == "0.32.0" and validated["hardware"] == "Test CPU 9000"
    assert "# the CPU attention backend needs a multiple of 32" in recipe.read_text()

    # history is appended: every revision is still in some archive
    texts = {1: (first / "recipe.given.yaml").read_text(),
             2: (sweep.archive / "recipe.written.yaml").read_text()}
    assert (result.archive / "recipe.replaced.yaml").read_text() == texts[2]
    assert (result.archive / "recipe.written.yaml").read_text() == recipe.read_text()
    for revision, text in texts.items():
        assert yaml.safe_load(text)["revision"] == revision
    assert verify_archive(result.archive) == []
    row = next(r for r in index.all_rows(runs) if r["id"] == result.archive.name)
    assert row["kind"] == "rollback" and row["recipe_revision"] == 3


def test_rollback_of_a_sweep_restores_what_it_wrote(tmp_path, recipe):
    runs = tmp_path / "runs"
    sweep = sweep_to_revision_2(recipe, runs)
    written = load_recipe(recipe).resolved
    recipe.write_text(recipe.read_text().replace("max_num_seqs: 4", "max_num_seqs: 2"))
    result = rollback(str(sweep.archive), runs)
    restored = load_recipe(recipe).resolved
    assert result.revision == 3 and comparable(restored) == comparable(written)
    assert restored["validated"]["rollback_of"] == sweep.sweep_id
    assert restored["validated"]["metrics"] == written["validated"]["metrics"]
    assert result.reference is None  # the fake sweep has no step archives


def test_rollback_into_another_file(tmp_path, recipe):
    runs = tmp_path / "runs"
    first = make_run(runs, recipe)
    target = tmp_path / "restored.yaml"
    result = rollback(str(first), runs, recipe_file=target)
    assert result.previous_revision is None and result.revision == 2
    assert load_recipe(target).resolved["validated"]["run_id"] == first.name
    assert not (result.archive / "recipe.replaced.yaml").exists()


def test_failed_runs_and_bench_archives_are_refused(tmp_path, recipe):
    runs = tmp_path / "runs"
    failed = make_run(runs, recipe, status="failed:oom")
    before = recipe.read_text()
    with pytest.raises(UsageError, match="never validated"):
        rollback(str(failed), runs)
    assert recipe.read_text() == before


def test_missing_recorded_recipe_file_needs_recipe_option(tmp_path, recipe):
    runs = tmp_path / "runs"
    first = make_run(runs, recipe)
    recipe.unlink()
    with pytest.raises(UsageError, match="--recipe FILE"):
        rollback(str(first), runs)


def break_by_tampering(folder):
    (folder / "recipe.given.yaml").write_text("recipe_version: 1\nname: evil\n")
    return "recipe.given.yaml: tampered"


def break_by_removing_manifest(folder):
    (folder / MANIFEST_NAME).unlink()
    return "manifest.json: missing manifest"


def break_by_half_writing(folder):
    status = json.loads((folder / "status.json").read_text())
    status.update({"status": "running", "pid": 2 ** 22 + 12345})  # no such process
    (folder / "status.json").write_text(json.dumps(status))
    return "status.json: half written"


@pytest.mark.parametrize("damage", [break_by_tampering, break_by_removing_manifest,
                                    break_by_half_writing])
def test_broken_archives_are_refused_and_nothing_is_modified(tmp_path, recipe, damage):
    runs = tmp_path / "runs"
    first = make_run(runs, recipe)
    expected = damage(first)
    before = tree_state(tmp_path)
    with pytest.raises(ArchiveError) as caught:
        rollback(first.name, runs)
    assert expected in str(caught.value)
    assert tree_state(tmp_path) == before


@pytest.mark.parametrize(("tpot_ms", "holds"), [(10.0, True), (20.0, False)])
def test_apply_reverifies_the_restored_revision_with_the_same_workload(tmp_path, recipe,
                                                                      monkeypatch, tpot_ms,
                                                                      holds):
    from model_optimizer.verify import verify

    runs = tmp_path / "runs"
    first = make_run(runs, recipe, ["workload.num_requests=30"])
    calls = []

    def fake_run_recipe(loaded, runs_base, **kwargs):
        calls.append((loaded, kwargs))
        return FakeOutcome(make_run(runs_base, loaded.path, seed=9, tpot_ms=tpot_ms))

    monkeypatch.setattr("model_optimizer.verify.run_recipe", fake_run_recipe)
    result = rollback(first.name, runs)
    check = verify(load_recipe(result.recipe_file), runs,
                   archive_extra={"rollback_of": result.source})
    [(loaded, kwargs)] = calls
    assert loaded.resolved["revision"] == 2 and loaded.path == recipe
    assert kwargs["workload_override"] == read_json(first / "run.json")["workload"]
    assert kwargs["archive_extra"]["rollback_of"] == first.name
    assert check.holds is holds and check.exit_code == (0 if holds else 4)
    by_metric = {c.metric: c for c in check.verdict.checks}
    assert by_metric["qps"].verdict == ("holds" if holds else "regressed")
    assert by_metric["tpot_p50_ms"].verdict == ("holds" if holds else "regressed")


def test_apply_does_not_judge_a_client_bound_window(tmp_path, recipe, monkeypatch):
    """The same rule in rollback --apply: a window whose pace was the client's (the recorded
    real window's cross-check) is not judged, even with figures that would read regressed."""
    from model_optimizer.verify import report_lines, verify

    from .test_verify_rule import recorded_feed

    runs = tmp_path / "runs"
    first = make_run(runs, recipe, ["workload.num_requests=30"])
    monkeypatch.setattr("model_optimizer.verify.run_recipe", lambda loaded, runs_base, **kw:
                        FakeOutcome(make_run(runs_base, loaded.path, seed=9, tpot_ms=20.0,
                                             feed=recorded_feed())))
    result = rollback(first.name, runs)
    check = verify(load_recipe(result.recipe_file), runs,
                   archive_extra={"rollback_of": result.source})
    assert check.exit_code == 2 and not check.holds and check.client_bound
    assert check.word.startswith("not judged: client-bound (the engine held the requests")
    assert check.verdict.regressed == [] and check.next[0]["command"].startswith(
        f"mopt verify {recipe} --url ")
    data = check.to_dict()
    assert data["verdict"] == check.word and data["client_bound"]["client_bound"] is True
    status = read_json(check.archive / "status.json")
    assert status["status"] == "failed:client_bound" and status["verdict"] == check.word
    lines = report_lines(check)
    assert lines[-4].startswith("NOT JUDGED: client-bound (the engine held the requests for ")
    assert "no evidence of a regression or of a hold" in lines[-4]
    assert lines[-3].startswith("next: mopt verify ") and "--url" in lines[-3]
    assert any("not judged (client-bound window: would read regressed)" in line
               for line in lines)


def test_rollback_of_a_tune_compares_with_its_validated_figures(tmp_path, recipe,
                                                                monkeypatch):
    from model_optimizer.archive import RunArchive
    from model_optimizer.archive.entry import revision_fields
    from model_optimizer.verify import verify

    runs = tmp_path / "runs"
    probe = make_run(tmp_path / "probe", recipe, ["engine.max_num_seqs=2"])
    figures = {k: v for k, v in read_json(probe / "metrics.json").items()
               if k in ("qps", "ttft_p50_ms", "tpot_p50_ms", "e2e_p50_ms")}
    written = recipe.read_text().replace("max_num_seqs: 8", "max_num_seqs: 2").replace(
        "revision: 1", "revision: 2") + (
        "validated:\n  at: '2026-01-01T00:00:00Z'\n  run_id: t\n  by: tune\n  metrics:\n"
        + "".join(f"    {k}: {v}\n" for k, v in figures.items()))
    tune = RunArchive.create(runs, "tiny-cpu-tune", kind="tune")
    tune.write_text("recipe.given.yaml", recipe.read_text())
    tune.write_text("recipe.written.yaml", written)
    tune.write_json("state.json", {"output": str(recipe), "recipe_file": str(recipe),
                                   "started_at": "2026-01-01T00:00:00Z"})
    tune.write_entry(**revision_fields(written))  # what a tune's session does when sealed
    tune.set_status("ok")
    tune.close()
    row = next(r for r in index.all_rows(runs) if r["id"] == tune.id)
    assert row["kind"] == "tune" and row["recipe_revision"] == 2
    assert row["qps"] == pytest.approx(figures["qps"])

    result = rollback(tune.id, runs)
    assert result.reference is None and result.revision == 2
    assert load_recipe(recipe).resolved["engine"]["max_num_seqs"] == 2
    monkeypatch.setattr("model_optimizer.verify.run_recipe",
                        lambda loaded, base, **kw: FakeOutcome(
                            make_run(base, loaded.path, ["engine.max_num_seqs=2"])))
    check = verify(load_recipe(recipe), runs)
    assert check.validation.reference is None  # no run measured the tune's choice here
    assert "validated block's figures" in check.validation.note
    assert check.holds and {c.metric for c in check.verdict.judged} == set(figures)

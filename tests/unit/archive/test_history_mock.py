"""Run history end to end on the command line, served by the mock engine
(``tests/unit/mock_mopt.py``: real servers, HTTP and archives, no vLLM; the commands run in
this process but the two concurrent applies, which are two processes): rollback round trip
(with and without --apply), diff verdicts, and two `mopt apply` processes writing into one
runs/ at once.

One module-scoped history is shared: runs A and B of one configuration back to back
(max_num_seqs=4: the same-recipe comparison), a two-step sweep (max_num_seqs 1 and 4: its
steps are the 4x comparison), a rollback to A and `rollback --apply`. Nothing here depends
on vLLM: every launch goes through the same runner as vLLM's (tests/integration/test_apply.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest
import yaml

from model_optimizer.archive import index
from model_optimizer.archive.manifest import verify_archive
from model_optimizer.recipe import load_recipe
from tests.unit.mock_mopt import MOCK_MOPT, ROOT, mock_env
from tests.unit.mock_mopt import invoke_mock_mopt as run_mopt

# several seconds a test: real mopt processes on the mock engine (quick tier: not slow)
pytestmark = pytest.mark.slow

TINY_RECIPE = ROOT / "recipes" / "tiny-cpu.yaml"
WORKLOAD = ["--set", "workload.num_requests=48", "--set", "workload.duration_s=null",
            "--set", "workload.output_tokens=8", "--set", "workload.concurrency=4",
            "--set", "workload.warmup_steady_max_s=null"]
RUN_A = ["--set", "engine.max_num_seqs=4", *WORKLOAD]
SWEEP = ["--set", "sweep.start=1", "--set", "sweep.growth=4", "--set", "sweep.max=4",
         "--set", "sweep.resolution=4", "--set", "sweep.confirm_duration_s=0",
         "--set", "sweep.remeasure_rounds=0",
         *WORKLOAD]


QUIET_LIMIT = 0.25  # share of the machine's CPU other work may use for the pair to count


class ForeignLoad:
    """CPU used by processes outside this test's process tree while the block runs, as a
    share of the machine (sampled every 0.5 s with each process's ancestry)."""

    def __init__(self) -> None:
        self.cpu: dict[int, tuple[bool, float, float]] = {}  # pid -> (ours, first, last)
        self.stop = threading.Event()
        self.share = 0.0

    def _sample(self) -> None:
        for proc in psutil.process_iter():
            try:
                times = proc.cpu_times()
                used = times.user + times.system
                ours, first, _ = self.cpu.get(proc.pid) or (
                    proc.pid == os.getpid() or any(p.pid == os.getpid()
                                                   for p in proc.parents()), used, used)
                self.cpu[proc.pid] = (ours, first, used)
            except psutil.Error:
                continue

    def _loop(self) -> None:
        while not self.stop.wait(0.5):
            self._sample()

    def __enter__(self) -> ForeignLoad:
        self._sample()
        self.started = time.monotonic()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop.set()
        self.thread.join()
        wall = time.monotonic() - self.started
        foreign = sum(last - first for ours, first, last in self.cpu.values() if not ours)
        self.share = foreign / (wall * (psutil.cpu_count() or 1))


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def bookkeeping_free(resolved: dict) -> dict:
    """The configuration, without bookkeeping and the pins a validated revision adds."""
    out = {k: v for k, v in resolved.items() if k not in ("revision", "validated")}
    out["model"] = {k: v for k, v in out["model"].items() if k != "pins"}
    return out


@pytest.fixture(scope="module")
def history(tiny_model_dir, tmp_path_factory) -> SimpleNamespace:
    """Run A of a scratch recipe, then a sweep that writes revision 2 of it."""
    base = tmp_path_factory.mktemp("history")
    recipe = base / "tiny-cpu.yaml"
    recipe.write_text(TINY_RECIPE.read_text().replace("../models/tiny-llama", str(tiny_model_dir)))
    original = recipe.read_text()
    runs = base / "runs"
    with ForeignLoad() as load:
        first, second = (json.loads(ok(run_mopt("apply", str(recipe), "--runs-dir", str(runs),
                                                *RUN_A, "--json")).stdout) for _ in range(2))
    sweep = json.loads(ok(run_mopt("sweep", str(recipe), "--runs-dir", str(runs), *SWEEP,
                                   "--json")).stdout)
    assert load_recipe(recipe).resolved["revision"] == 2
    steps = {json.loads((p / "run.json").read_text())["value"]: p
             for p in (Path(sweep["archive"]) / "steps").iterdir()}
    return SimpleNamespace(recipe=recipe, original=original, runs=runs, foreign=load.share,
                           first=Path(first["archive"]), second=Path(second["archive"]),
                           sweep=Path(sweep["archive"]),
                           steps=steps)


@pytest.fixture(scope="module")
def rolled_back(history) -> SimpleNamespace:
    """`mopt rollback` to run A (no launch): revision 3."""
    result = json.loads(ok(run_mopt("rollback", str(history.first), "--runs-dir",
                                    str(history.runs), "--json")).stdout)
    return SimpleNamespace(**vars(history), rollback=result, text=history.recipe.read_text())


@pytest.fixture(scope="module")
def reapplied(rolled_back) -> SimpleNamespace:
    """`mopt rollback --apply` to run A: revision 4, relaunched and judged by `mopt
    verify`'s rule (the noise of both runs, not a fixed tolerance)."""
    result = run_mopt("rollback", rolled_back.first.name, "--runs-dir", str(rolled_back.runs),
                      "--apply", "--json")
    return SimpleNamespace(**vars(rolled_back), apply=result)


def test_rollback_round_trip(rolled_back):
    h = rolled_back
    assert (h.rollback["previous_revision"], h.rollback["revision"]) == (2, 3)
    restored = load_recipe(h.recipe).resolved
    ran = yaml.safe_load((h.first / "recipe.resolved.yaml").read_text())
    assert bookkeeping_free(restored) == bookkeeping_free(ran)
    assert restored["revision"] == 3
    assert restored["validated"]["by"] == "rollback"
    assert restored["validated"]["rollback_of"] == h.first.name
    assert restored["validated"]["metrics"]["qps"] == pytest.approx(
        json.loads((h.first / "metrics.json").read_text())["qps"])
    assert "# the CPU attention backend needs a multiple of 32" in h.text  # comments kept

    # every earlier revision is still in the archives, and every archive verifies
    archived = {}
    for path in h.runs.rglob("recipe.*.yaml"):
        document = yaml.safe_load(path.read_text())
        archived.setdefault(document.get("revision", 1), path.read_text())
    assert {1, 2, 3} <= set(archived)
    assert h.original in (p.read_text() for p in h.runs.rglob("recipe.given.yaml"))
    for row in index.all_rows(h.runs):
        assert verify_archive(h.runs / row["path"]) == [], row["path"]


def test_runs_lists_runs_sweeps_and_rollbacks(rolled_back):
    rows = json.loads(ok(run_mopt("runs", "--runs-dir", str(rolled_back.runs), "--steps",
                                  "--json")).stdout)
    kinds = [row["kind"] for row in rows]
    assert kinds.count("run") >= 4 and kinds.count("sweep") == 1 and "rollback" in kinds
    stamps = [row["created_at"] for row in rows]
    assert stamps == sorted(stamps, reverse=True)  # newest first
    shown = ok(run_mopt("runs", "show", rolled_back.first.name.rsplit("-", 1)[1],
                        "--runs-dir", str(rolled_back.runs)))
    assert "overrides: engine.max_num_seqs=4" in shown.stdout and "## Figures" in shown.stdout


def test_rollback_apply_reverifies(reapplied):
    assert reapplied.apply.returncode == 0, reapplied.apply.stdout + reapplied.apply.stderr
    data = json.loads(reapplied.apply.stdout)
    assert data["rollback"]["revision"] == 4 and data["verification"]["holds"] is True
    assert {c["metric"] for c in data["verification"]["checks"]} >= {"qps", "ttft_p50_ms"}
    rerun = Path(data["verification"]["run"]["archive"])
    assert verify_archive(rerun) == []
    assert json.loads((rerun / "run.json").read_text())["recipe_revision"] == 4


def test_rollback_apply_that_does_not_reproduce_exits_4_not_1(history):
    """Exit 1 is `plan`'s "does not fit"; figures that differ are a missed target (4)."""
    copy = history.recipe.parent / "copy.yaml"
    copy.write_text(history.recipe.read_text())
    result = run_mopt("rollback", str(history.second), "--recipe", str(copy), "--runs-dir",
                      str(history.runs), "--apply", "--json",
                      engine={"ttft_ms": 100, "itl_ms": 10, "capacity": 1})  # a slower server
    assert result.returncode == 4, result.stdout + result.stderr
    verification = json.loads(result.stdout)["verification"]
    assert verification["holds"] is False and "qps" in verification["regressed"]


def test_diff_same_recipe_shows_no_significant_change(history):
    data = json.loads(ok(run_mopt("diff", str(history.first), str(history.second),
                                  "--runs-dir", str(history.runs), "--json")).stdout)
    assert data["fields"] == [] and data["variables"] == [] and data["warning"] is None
    judged = [m["metric"] for m in data["metrics"] if m["verdict"] != "not judged"]
    assert {"qps", "ttft_p50_ms", "e2e_p50_ms"} <= set(judged)
    # CI runs alone on its machine: there the assertion always applies, never the skip
    if history.foreign > QUIET_LIMIT and data["significant"] and not os.environ.get("CI"):
        pytest.skip(f"other processes used {history.foreign:.0%} of the CPU while the pair "
                    f"ran (more than {QUIET_LIMIT:.0%}), and the runs differ for real in "
                    f"{data['significant']}: two runs of one recipe agree only on a machine "
                    "not shared with other work")
    assert data["significant"] == [], json.dumps(data["metrics"], indent=1)


def test_diff_four_times_max_num_seqs_is_significant(history):
    fast, slow = history.steps[4], history.steps[1]  # same workload, concurrency 4
    result = ok(run_mopt("diff", str(fast), str(slow), "--runs-dir",
                         str(history.runs), "--json"))
    data = json.loads(result.stdout)
    assert data["variables"] == ["engine.max_num_seqs"] and data["warning"] is None
    qps = next(m for m in data["metrics"] if m["metric"] == "qps")
    assert qps["significant"] and qps["relative_change"] < -0.3, qps
    text = ok(run_mopt("diff", str(fast), str(slow), "--runs-dir",
                       str(history.runs))).stdout
    assert "Significant changes: " in text and "qps" in text.split("Significant changes:")[1]


def test_diff_warns_when_two_fields_changed(history):
    variant = history.recipe.parent / "variant.yaml"
    document = yaml.safe_load((history.first / "recipe.resolved.yaml").read_text())
    document["engine"]["max_num_seqs"] = 1
    document["workload"]["concurrency"] = 1
    variant.write_text(yaml.safe_dump(document, sort_keys=False))
    result = ok(run_mopt("diff", str(history.first), str(variant), "--runs-dir",
                         str(history.runs)))
    assert "warning: 2 recipe fields changed at once (engine.max_num_seqs, " \
        "workload.concurrency)" in result.stdout
    assert "cannot say which one mattered" in result.stdout


def test_two_applies_at_once_into_one_runs_dir(tiny_model_dir, tmp_path):
    recipe = tmp_path / "tiny-cpu.yaml"
    recipe.write_text(TINY_RECIPE.read_text().replace("../models/tiny-llama", str(tiny_model_dir)))
    runs = tmp_path / "runs"
    args = [*MOCK_MOPT, "apply", str(recipe), "--runs-dir", str(runs), "--json",
            "--set", "workload.num_requests=20", "--set", "workload.duration_s=null",
            "--set", "workload.concurrency=2",
            # both start at once either way; the steady warm-up (at least 9 s of 3 s rounds
            # in each) is not what two applies into one runs dir test
            "--set", "workload.warmup_steady_max_s=null"]
    env = mock_env()
    procs = [subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        outputs = [proc.communicate(timeout=600) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(60)
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, out + err
    folders = sorted(p for p in runs.iterdir() if p.is_dir())
    assert len(folders) == 2
    for folder in folders:
        assert verify_archive(folder) == []
        assert json.loads((folder / "status.json").read_text())["status"] == "ok"
    rows = index.all_rows(runs, refresh_first=False)  # as the two processes left it
    assert sorted(row["id"] for row in rows) == [f.name for f in folders]
    assert all(row["status"] == "ok" and row["qps"] for row in rows)

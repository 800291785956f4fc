"""`mopt runs`, `mopt runs show`, `mopt diff`, `mopt rollback` through typer's runner."""

import json
from datetime import UTC, datetime

import pytest
from typer.testing import CliRunner

from model_optimizer.archive.manifest import MANIFEST_NAME
from model_optimizer.cli.main import app
from model_optimizer.cli.runs import parse_since
from model_optimizer.errors import UsageError

from .fakes import make_run, tiny_recipe, tree_state
from .test_drift import VALIDATED

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture
def recipe(tmp_path):
    return tiny_recipe(tmp_path)


@pytest.fixture
def two_runs(tmp_path, recipe):
    runs = tmp_path / "runs"
    ok = make_run(runs, recipe, ["engine.max_num_seqs=4"])
    failed = make_run(runs, recipe, status="failed:oom", seed=1)
    return runs, ok, failed


def test_help_of_every_history_command():
    for command in (["runs"], ["runs", "show"], ["diff"], ["rollback"]):
        result = invoke(*command, "--help")
        assert result.exit_code == 0 and "Usage: " in result.output


def test_runs_table_newest_first_and_filters(two_runs):
    runs, ok, failed = two_runs
    result = invoke("runs", "--runs-dir", runs)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split()[:3] == ["id", "time", "(UTC)"]
    assert lines[1].startswith(failed.name) and lines[2].startswith(ok.name)
    assert "failed:oom" in lines[1] and "Test CPU 9000" in lines[2]
    only_failed = invoke("runs", "--runs-dir", runs, "--status", "failed", "--json")
    assert [r["id"] for r in json.loads(only_failed.output)] == [failed.name]
    assert json.loads(invoke("runs", "--runs-dir", runs, "--recipe", "other", "--json")
                      .output) == []
    assert len(json.loads(invoke("runs", "--runs-dir", runs, "--since", "1h", "--json")
                          .output)) == 2
    assert "no runs" in invoke("runs", "--runs-dir", runs, "--since", "2999-01-01").output
    assert invoke("runs", "--runs-dir", runs, "--since", "yesterday").exit_code == 2


def test_parse_since():
    now = datetime(2026, 1, 10, 12, tzinfo=UTC)
    assert parse_since("2h", now) == datetime(2026, 1, 10, 10, tzinfo=UTC)
    assert parse_since("3d", now) == datetime(2026, 1, 7, 12, tzinfo=UTC)
    assert parse_since("2026-01-01", now) == datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(UsageError):
        parse_since("soon", now)


def test_runs_on_an_empty_or_missing_dir(tmp_path):
    result = invoke("runs", "--runs-dir", tmp_path / "none")
    assert result.exit_code == 0 and "no runs under" in result.output
    assert not (tmp_path / "none").exists()


def test_reindex(two_runs):
    runs, _, _ = two_runs
    (runs / "index.sqlite").unlink()
    result = invoke("runs", "--runs-dir", runs, "--reindex")
    assert result.exit_code == 0 and "reindexed" in result.output and "2 archives" in result.output


def test_runs_show_by_prefix_suffix_and_path(two_runs):
    runs, ok, _ = two_runs
    suffix = ok.name.rsplit("-", 1)[1]
    for ref in (ok.name, suffix, str(ok)):
        result = invoke("runs", "show", ref, "--runs-dir", runs)
        assert result.exit_code == 0, result.output
        assert f"# run {ok.name}" in result.output
        assert "overrides: engine.max_num_seqs=4" in result.output
        assert "recipe_version: 1" in result.output and "qps" in result.output
    data = json.loads(invoke("runs", "show", suffix, "--runs-dir", runs, "--json").output)
    assert data["id"] == ok.name and data["metrics"]["qps"] > 0


def test_runs_show_unknown_and_ambiguous(two_runs):
    runs, ok, _ = two_runs
    unknown = invoke("runs", "show", "zzzz", "--runs-dir", runs)
    assert unknown.exit_code == 2 and "no run or sweep with this id" in unknown.output
    ambiguous = invoke("runs", "show", ok.name[:6], "--runs-dir", runs)
    assert ambiguous.exit_code == 2 and "ambiguous" in ambiguous.output


@pytest.mark.parametrize(("damage", "message"), [
    (lambda f: (f / "report.md").write_text("rewritten"), "report.md: tampered"),
    (lambda f: (f / MANIFEST_NAME).unlink(), "manifest.json: missing manifest"),
    (lambda f: (f / "status.json").unlink(), "status.json: no status"),
])
@pytest.mark.parametrize("command", ["show", "diff", "rollback"])
def test_broken_archives_are_refused_by_every_reader(two_runs, tmp_path, damage, message,
                                                      command):
    runs, ok, failed = two_runs
    damage(ok)
    before = tree_state(tmp_path)
    args = {"show": ["runs", "show", ok], "diff": ["diff", failed, ok],
            "rollback": ["rollback", ok]}[command]
    result = invoke(*args, "--runs-dir", runs)
    assert result.exit_code == 2, result.output
    assert message in result.output and "nothing was modified" in result.output
    assert "Traceback" not in result.output
    assert tree_state(tmp_path) == before


def test_diff_json(two_runs, recipe, tmp_path):
    runs, ok, _ = two_runs
    other = make_run(runs, recipe, ["engine.max_num_seqs=4"], seed=5)
    data = json.loads(invoke("diff", ok, other, "--runs-dir", runs, "--json").output)
    assert data["fields"] == [] and data["significant"] == [] and data["warning"] is None
    assert {m["metric"] for m in data["metrics"]} >= {"qps", "ttft_p50_ms", "e2e_p99_ms"}
    assert data["method"]["alpha"] == 0.01


def test_rollback_cli(two_runs, recipe):
    runs, ok, _ = two_runs
    result = invoke("rollback", ok, "--runs-dir", runs)
    assert result.exit_code == 0, result.output
    assert "revision 1 -> 2" in result.output and "rollback" in result.output
    data = json.loads(invoke("rollback", ok.name, "--runs-dir", runs, "--json").output)
    assert data["previous_revision"] == 2 and data["revision"] == 3


def test_apply_warns_about_drift_without_strict(tmp_path, recipe):
    recipe.write_text(recipe.read_text() + VALIDATED)
    result = invoke("apply", recipe, "--set", "model.path=./no-such-model", "--runs-dir",
                    tmp_path / "runs")
    assert result.exit_code == 2  # the missing model stops it, after the warning
    assert "drift:" in result.output and "vLLM 0.31.0" in result.output

"""Shell completion: the completers as functions, and through typer's own completion protocol
(`_MOPT_COMPLETE=complete_bash`) in a real `mopt` process, as the installed script calls it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from model_optimizer.cli.completion import recipe_files, run_refs

from .fakes import make_run, tiny_recipe

ROOT = Path(__file__).resolve().parents[3]
MOPT = [sys.executable, "-c", "from model_optimizer.cli.main import app; app(prog_name='mopt')"]


def three_archives(tmp_path):
    recipe = tiny_recipe(tmp_path, "tiny.yaml")
    runs = tmp_path / "runs"
    return runs, [make_run(runs, recipe).name for _ in range(3)]


def test_recipe_files_lists_yaml_and_folders(tmp_path):
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "a.yaml").write_text("x")
    (tmp_path / "recipes" / "b.yml").write_text("x")
    (tmp_path / "recipes" / "notes.txt").write_text("x")
    (tmp_path / ".hidden.yaml").write_text("x")
    assert recipe_files("", tmp_path) == ["recipes/"]
    assert recipe_files("recipes/", tmp_path) == ["recipes/a.yaml", "recipes/b.yml"]
    assert recipe_files("recipes/b", tmp_path) == ["recipes/b.yml"]
    assert recipe_files(".h", tmp_path) == [".hidden.yaml"]
    assert recipe_files(f"{tmp_path}/rec", Path("/")) == [f"{tmp_path}/recipes/"]
    assert recipe_files("nowhere/", tmp_path) == []


def test_run_refs_newest_first_as_paths_or_ids(tmp_path):
    runs, ids = three_archives(tmp_path)
    newest_first = ids[::-1]
    assert [value for value, _ in run_refs("runs/", runs)] == [f"runs/{i}" for i in newest_first]
    assert [value for value, _ in run_refs("", runs)] == [f"{runs}/{i}" for i in newest_first]
    assert [value for value, _ in run_refs(ids[0][:-2], runs)] == [ids[0]]
    assert [value for value, _ in run_refs(ids[1][-6:], runs)] == [ids[1]]  # short suffix
    assert run_refs("runs/", runs)[0][1] == "run tiny-cpu rev 1 ok"
    assert run_refs("runs/", runs, kinds=("sweep",)) == []
    assert run_refs("runs/", tmp_path / "missing") == []


def complete(words: str, cwd: Path) -> list[str]:
    """What bash gets back from the completion function typer installs."""
    env = {**os.environ, "_MOPT_COMPLETE": "complete_bash", "COMP_WORDS": words,
           "COMP_CWORD": str(len(words.split(" ")) - 1), "PYTHONPATH": str(ROOT)}
    env.pop("MOPT_RUNS_DIR", None)
    done = subprocess.run(MOPT, capture_output=True, text=True, env=env, cwd=cwd, timeout=60)
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line]


@pytest.mark.slow  # several seconds: real processes (quick tier: not slow)
def test_bash_completion_of_commands_recipes_and_runs(tmp_path):
    runs, ids = three_archives(tmp_path)
    assert complete("mopt sta", tmp_path) == ["status"]
    assert {"apply", "sweep", "rollback", "status"} <= set(complete("mopt ", tmp_path))
    assert complete("mopt apply ti", tmp_path) == ["tiny.yaml"]
    assert complete("mopt rollback runs/", tmp_path) == [f"runs/{i}" for i in ids[::-1]]
    assert complete("mopt runs show runs/", tmp_path)[0] == f"runs/{ids[-1]}"
    assert complete("mopt sweep --resume runs/", tmp_path) == []  # no sweep archived
    other = tmp_path / "elsewhere"
    other.mkdir()
    assert complete(f"mopt rollback --runs-dir {runs} {runs}/", other)[0] == f"{runs}/{ids[-1]}"


def test_completion_script_is_typers(tmp_path):
    # typer detects the shell from the parent processes unless told not to (its own test
    # switch): then --show-completion takes the shell as a value, whatever started pytest.
    env = {**os.environ, "PYTHONPATH": str(ROOT),
           "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    done = subprocess.run([*MOPT, "--show-completion", "bash"], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "_MOPT_COMPLETE=complete_bash" in done.stdout
    assert "complete -o default -F _mopt_completion mopt" in done.stdout

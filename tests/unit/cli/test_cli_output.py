"""What the real ``mopt`` process prints into a pipe: recipe warnings as mopt's own one-line
``warning:`` (no Python source line), in ``validate --json`` too, and lines never wrapped at
80 columns when no terminal is attached."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from model_optimizer.recipe.flags import installed_vllm_version
from model_optimizer.recipe.vllm_flags import KNOWN_FLAGS

ROOT = Path(__file__).resolve().parents[3]


def mopt(*args: str, cache: Path) -> subprocess.CompletedProcess:
    """``mopt ARGS`` into pipes, without $COLUMNS, with vLLM's flags read from ``cache``."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    version = installed_vllm_version() or "none"
    cache.mkdir(parents=True, exist_ok=True)
    (cache / f"vllm-flags-{version}.json").write_text(json.dumps(sorted(KNOWN_FLAGS)))
    return subprocess.run([sys.executable, "-m", "model_optimizer", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={**env, "MOPT_CACHE_DIR": str(cache)})


def recipe_with_unknown_flag(folder: Path) -> Path:
    text = (ROOT / "recipes" / "tiny-cpu.yaml").read_text()
    text = text.replace("\nengine:\n", "\nengine:\n  extra_args: {swap-spac: 4}\n", 1)
    path = folder / "flagged.yaml"
    path.write_text(text)
    return path


def test_warnings_are_one_line_of_mopt_and_a_pipe_gets_whole_lines(tmp_path):
    folder = tmp_path / ("a-folder-with-a-long-name-" * 4)  # lines far over 80 columns
    folder.mkdir()
    recipe = recipe_with_unknown_flag(folder)
    (tmp_path / "models" / "tiny-llama").mkdir(parents=True)  # no missing-model warning
    result = mopt("validate", str(recipe), cache=tmp_path / "cache")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr  # one line: not Python's two, not wrapped
    assert lines[0].startswith(f"warning: {recipe}:") and "'swap-spac'" in lines[0]
    assert "RecipeWarning" not in result.stderr and ".py:" not in result.stderr
    [line] = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(str(recipe)) > 100 and line.startswith(f"ok  {recipe}  (")

    as_json = mopt("validate", str(recipe), "--json", cache=tmp_path / "cache")
    [entry] = json.loads(as_json.stdout)["recipes"]
    [warning] = entry["warnings"]
    assert warning["path"] == "engine.extra_args.swap-spac" and warning["line"]

"""`mopt optimize` through typer's runner: the usage errors its use case raises before
anything is written or launched (exit 2, no archive)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from model_optimizer.cli.main import app

ROOT = Path(__file__).resolve().parents[4]
TINY = str(ROOT / "recipes" / "tiny-cpu.yaml")


def test_usage_errors_exit_2_before_anything_starts(tmp_path, tiny_model_dir):
    runs = tmp_path / "runs"
    taken = tmp_path / "taken.yaml"
    taken.write_text("recipe_version: 1\n")
    cases = [
        (("optimize", TINY, "--resume", str(runs)), "give no MODEL_DIR|RECIPE or --set"),
        (("optimize", "--set", "engine.max_num_seqs=8", "--resume", str(runs)),
         "give no MODEL_DIR|RECIPE or --set"),
        (("optimize",), "give a MODEL_DIR or RECIPE to optimize, or --resume runs/<id>"),
        (("optimize", str(tiny_model_dir), "--output", str(taken)),
         f"{taken}: exists; optimize it with `mopt optimize {taken}`"),
    ]
    for args, message in cases:
        result = CliRunner().invoke(app, [*args, "--runs-dir", str(runs)])
        assert result.exit_code == 2, (args, result.output)
        assert message in " ".join(result.output.split()), (args, result.output)
    assert not runs.exists()
    assert taken.read_text() == "recipe_version: 1\n"

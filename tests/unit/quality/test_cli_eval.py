"""`mopt eval` input errors: exit 2, the file and line named, no archive written."""

from pathlib import Path

from typer.testing import CliRunner

from model_optimizer.cli.main import app

ROOT = Path(__file__).resolve().parents[3]
RECIPE = str(ROOT / "recipes" / "tiny-trained-cpu.yaml")


def run(*args):
    return CliRunner().invoke(app, list(args))


def test_a_broken_eval_set_is_a_usage_error_with_file_and_line(tmp_path):
    bad = tmp_path / "set.jsonl"
    bad.write_text('{"prompt": "ok"}\n{"prompt": "p", "scorer": "fuzzy", "reference": "r"}\n')
    runs = tmp_path / "runs"
    result = run("eval", RECIPE, "--url", "http://127.0.0.1:9", "--eval-set", str(bad),
                 "--runs-dir", str(runs))
    assert result.exit_code == 2
    assert f"{bad}:2: unknown scorer 'fuzzy'" in result.output
    assert not runs.exists()


def test_nothing_to_evaluate_is_a_usage_error(tmp_path):
    result = run("eval", str(ROOT / "recipes" / "tiny-cpu.yaml"), "--url",
                 "http://127.0.0.1:9", "--runs-dir", str(tmp_path / "runs"))
    assert result.exit_code == 2 and "nothing to evaluate" in result.output


def test_thresholds_without_an_eval_set_fail_validation(tmp_path):
    result = run("validate", RECIPE, "--set", "quality.eval_set=null")
    line = next(n for n, text in enumerate(Path(RECIPE).read_text().splitlines(), start=1)
                if "min_top1_agreement" in text)
    assert result.exit_code == 2
    assert f"tiny-trained-cpu.yaml:{line}:" in result.output
    assert "nothing is evaluated" in result.output

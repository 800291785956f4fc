"""Workload forms through the CLI: bad prompt files exit 2 before any server starts."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from model_optimizer.cli.main import app

ROOT = Path(__file__).resolve().parents[3]
TINY = str(ROOT / "recipes" / "tiny-cpu.yaml")
BAD = ROOT / "tests" / "data" / "datasets"
runner = CliRunner()


@pytest.mark.parametrize(("name", "where"), [("malformed.jsonl", ":2: not valid JSON"),
                                             ("empty.jsonl", ": the dataset holds no prompts"),
                                             ("extra_field.csv", ":3: more fields")])
def test_apply_with_a_bad_prompt_file_exits_2_naming_file_and_line(tmp_path, name, where):
    result = runner.invoke(app, ["apply", TINY, "--set", f"workload.dataset.path={BAD / name}",
                                 "--runs-dir", str(tmp_path / "runs")])
    assert result.exit_code == 2, result.output
    assert f"{BAD / name}{where}" in result.output
    assert not (tmp_path / "runs").exists()  # refused before any launch or archive


def test_apply_with_an_unknown_class_slo_exits_2(tmp_path):
    data = ROOT / "examples" / "datasets" / "prompts.csv"
    result = runner.invoke(app, ["apply", TINY, "--set", f"workload.dataset.path={data}",
                                 "--set", "slo.classes.batch.ttft_p99_ms=100",
                                 "--runs-dir", str(tmp_path / "runs")])
    assert result.exit_code == 2, result.output
    assert "slo.classes names batch" in result.output
    assert not (tmp_path / "runs").exists()


def test_validate_reports_a_misnamed_class(tmp_path):
    recipe = tmp_path / "mix.yaml"
    recipe.write_text(Path(TINY).read_text().replace("\nslo:\n", (
        "\n  mix:\n    short: {prompt_tokens: 16, output_tokens: 8}\n"
        "    long: {weight: 0.1, prompt_tokens: 400, output_tokens: 64}\n"
        "slo:\n  classes:\n    shorts: {ttft_p99_ms: 300}\n")))
    result = runner.invoke(app, ["validate", str(recipe)])
    assert result.exit_code == 2, result.output
    assert f"{recipe}:" in result.output and "no class 'shorts' in workload.mix" in result.output
    assert "did you mean" in result.output.lower() and "short" in result.output

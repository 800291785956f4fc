"""``mopt bench --url`` without --tokenizer or --recipe counts tokens with the server's endpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from model_optimizer.cli.main import app
from model_optimizer.load.mock_server import MockServer

KEY = "sk-mopt-unit-0123456789"


def bench(url: str, runs: Path, *flags: str):
    result = CliRunner().invoke(app, ["bench", "--url", url, "--num-requests", "6",
                                      "--warmup", "1", "--concurrency", "2",
                                      "--output-tokens", "4", "--runs-dir", str(runs),
                                      "--json", *flags])
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        repr(result.exception))
    return result


def measured(runs: Path) -> list[dict]:
    [archive] = [p for p in runs.iterdir() if p.is_dir()]
    lines = (archive / "requests.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if not r["warmup"]]


@pytest.mark.parametrize(("endpoint", "bos"), [("completions", True), ("completions", False),
                                               ("chat", False)])
def test_exact_lengths_from_the_servers_tokenizer(tmp_path, monkeypatch, endpoint, bos):
    monkeypatch.setenv("MOPT_UNIT_KEY", KEY)
    with MockServer(api_key=KEY, bos_token=bos) as server:  # the key guards /tokenize too
        result = bench(server.url, tmp_path / "runs", "--prompt-tokens", "23",
                       "--endpoint", endpoint, "--api-key-env", "MOPT_UNIT_KEY")
        assert server.counters.tokenize_calls > 0
    assert result.exit_code == 0, result.output
    records = measured(tmp_path / "runs")
    assert len(records) == 6
    assert {r["prompt_tokens"] for r in records} == {23}  # usage.prompt_tokens, the server's
    [archive] = (tmp_path / "runs").glob("*/run.json")
    assert json.loads(archive.read_text())["tokenizer"] == f"{server.url}/tokenize"
    assert "counted by" in result.stderr
    for path in (tmp_path / "runs").rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path


def test_a_server_without_a_tokenize_endpoint_is_told_which_flag_to_pass(tmp_path):
    with MockServer(tokenize_endpoint=False) as server:
        result = bench(server.url, tmp_path / "runs", "--prompt-tokens", "8")
    assert result.exit_code == 2, result.output
    assert "no tokenize endpoint" in result.output and "--tokenizer DIR" in result.output
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_help_names_the_tokenizer_sources():
    result = CliRunner().invoke(app, ["bench", "--help"], env={"COLUMNS": "200"})
    assert "/tokenize" in result.output and "--recipe" in result.output

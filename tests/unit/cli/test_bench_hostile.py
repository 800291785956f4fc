"""``mopt bench --url`` against hostile servers (issue 24): what reaches the archive and the
terminal, and how a run that broke is classified."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from model_optimizer import window
from model_optimizer.archive.report import fenced
from model_optimizer.cli.main import app
from model_optimizer.load.mock_server import MockServer
from model_optimizer.shown import printable
from model_optimizer.usecase.endpoint import listed

KEY = "plainkey-42"  # not token-shaped: only knowing what mopt sent can hide it


def bench(url: str, runs: Path, *flags: str):
    result = CliRunner().invoke(app, ["bench", "--url", url, "--num-requests", "4",
                                      "--concurrency", "2", "--output-tokens", "4",
                                      "--prompt-tokens", "8", "--runs-dir", str(runs),
                                      *flags])
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        repr(result.exception))
    return result


def archive_of(runs: Path) -> Path:
    [archive] = [p for p in runs.iterdir() if p.is_dir()]
    return archive


def everything(runs: Path, result) -> str:
    files = [p.read_text(errors="replace") for p in runs.rglob("*") if p.is_file()
             and p.suffix != ".sqlite"]
    return "\n".join([*files, result.output, result.stderr])


def status(runs: Path) -> dict:
    return json.loads((archive_of(runs) / "status.json").read_text())


def test_url_credentials_never_reach_the_archive_or_the_terminal(tmp_path):
    with MockServer() as server:
        host = server.url.removeprefix("http://")
        url = f"http://alice:pw-{KEY}@{host}/v1?api_key=q-{KEY}"
        result = bench(url, tmp_path / "runs")
    assert result.exit_code == 0, result.output
    run = json.loads((archive_of(tmp_path / "runs") / "run.json").read_text())
    assert run["url"].startswith("http://alice:***redacted***@")
    assert KEY not in everything(tmp_path / "runs", result)


def test_a_key_the_server_echoes_is_scrubbed_everywhere(tmp_path, monkeypatch):
    monkeypatch.setenv("MOPT_UNIT_KEY", KEY)
    with MockServer(hostile="echo_key") as server:
        result = bench(server.url, tmp_path / "runs", "--api-key-env", "MOPT_UNIT_KEY")
    assert result.exit_code == 5, result.output
    archive = archive_of(tmp_path / "runs")
    assert "you sent Authorization" in (archive / "requests.jsonl").read_text()
    assert {"failure.json", "report.md"} <= {p.name for p in archive.iterdir()}
    assert KEY not in everything(tmp_path / "runs", result)


@pytest.mark.parametrize("fault", ["tokens_1e18", "tokens_1e400", "done_first"])
def test_a_lying_server_fails_the_run_classified_with_nothing_counted(tmp_path, fault):
    with MockServer(hostile=fault) as server:
        result = bench(server.url, tmp_path / "runs")
    assert result.exit_code == 5, result.output
    assert status(tmp_path / "runs")["status"] == "failed:no_request_completed"
    metrics = json.loads((archive_of(tmp_path / "runs") / "metrics.json").read_text())
    assert metrics["completed"] == 0


def test_any_exception_in_a_bench_is_a_classified_failure_not_interrupted(tmp_path,
                                                                          monkeypatch):
    def broken(*args, **kwargs):
        raise OverflowError("int too large to convert to float")

    monkeypatch.setattr(window, "summarize_steady", broken)
    with MockServer() as server:
        result = bench(server.url, tmp_path / "runs")
    assert result.exit_code == 5, result.output
    assert status(tmp_path / "runs")["status"] == "failed:internal_error"
    failure = json.loads((archive_of(tmp_path / "runs") / "failure.json").read_text())
    assert failure["class"] == "internal_error" and "OverflowError" in failure["hint"]


# ----- issue 37: what a server's text may do on a terminal and in a report -----------------


def test_a_server_error_can_neither_drive_the_terminal_nor_break_the_report(tmp_path):
    with MockServer(hostile="escape_error") as server:
        result = bench(server.url, tmp_path / "runs")
    assert result.exit_code == 5, result.output
    archive = archive_of(tmp_path / "runs")
    shown = CliRunner().invoke(app, ["runs", "show", archive.name,
                                     "--runs-dir", str(tmp_path / "runs")])
    assert shown.exit_code == 0, shown.output
    for text in (result.output, result.stderr, shown.output):
        assert not set(text) & {"\x1b", "\x07", "\r", "\u202e"}
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in result.stderr + shown.output  # shown, harmless
    lines = (archive / "report.md").read_text().splitlines()
    opened = lines.index("## Failure") + 4
    fence = lines[opened]
    assert set(fence) == {"`"} and len(fence) > 3
    inside = lines[opened + 1:lines.index(fence, opened + 1)]
    assert any("```" in line for line in inside)  # the server's fence, inside ours
    assert not any(line.startswith(("#", fence)) for line in inside)


def test_fenced_takes_a_fence_longer_than_any_backtick_run():
    assert fenced(["a"]) == ["```", "a", "```"]
    assert fenced(["x ````` y", "``"]) == ["``````", "x ````` y", "``", "``````"]


def test_printable_escapes_every_control_character_but_tabs_and_newlines():
    assert printable("a\x1b[2Jb\x07\x9b\u202e\td\r\ne") == "a\\x1b[2Jb\\x07\\x9b\\u202e\td\\r\ne"
    assert printable("one\ntwo", lines=False) == "one\\ntwo"
    assert printable("plain text, ünïcode ✓") == "plain text, ünïcode ✓"


def test_a_server_listing_30000_models_gets_a_short_error(tmp_path):
    with MockServer(hostile="many_models") as server:
        result = bench(server.url, tmp_path / "runs")
    assert result.exit_code == 2
    message = result.output + result.stderr
    assert "serves 30,000 models (model-00000-" in message
    assert "and 29,995 more); choose one with --model" in message
    assert len(message) < 2000  # the listing is 3 MB


def test_listed_shows_a_few_names_each_cut():
    assert listed(["a", "b"]) == "a, b"
    assert listed([f"m{i}" for i in range(7)]) == "m0, m1, m2, m3, m4 and 2 more"
    assert listed(["x" * 500]) == "x" * 80 + "..."

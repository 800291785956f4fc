"""Hostile input at the command line: exit 2 with a message, no traceback, bounded."""

from __future__ import annotations

import fcntl
import json
import os
import time

import pytest
from typer.testing import CliRunner

from model_optimizer.archive import index
from model_optimizer.cli.main import app


def invoke(*args):
    result = CliRunner().invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        repr(result.exception))
    return result


def test_markup_in_a_path_is_printed_as_written(tmp_path):
    path = tmp_path / "d[" / "][bold]x.yaml"
    result = invoke("show", str(path))
    assert result.exit_code == 2
    assert "d[/][bold]x.yaml: file not found" in result.output


def test_validate_dev_zero_is_bounded():
    started = time.monotonic()
    result = invoke("validate", "/dev/zero")
    assert result.exit_code == 2 and "is a device, not a regular recipe file" in result.output
    assert time.monotonic() - started < 10


def test_validate_a_fifo_without_a_writer_does_not_hang(tmp_path):
    fifo = tmp_path / "recipe.yaml"
    os.mkfifo(fifo)
    started = time.monotonic()
    result = invoke("validate", str(fifo))
    assert result.exit_code == 2 and "is a FIFO (named pipe)" in result.output
    assert time.monotonic() - started < 5


def test_a_megabyte_flow_list_is_refused_fast(tmp_path):
    recipe = tmp_path / "r.yaml"
    items = ",".join(["1"] * 340_000)
    recipe.write_text("recipe_version: 1\nname: x\nmodel: {path: m}\nflow: [" + items + "]\n")
    assert recipe.stat().st_size < 1 << 20
    started = time.monotonic()
    result = invoke("validate", str(recipe))
    assert result.exit_code == 2 and "YAML tokens" in result.output
    assert time.monotonic() - started < 5


def test_runs_since_an_absurd_duration_lists_everything(tmp_path):
    result = invoke("runs", "--since", "99999999999w", "--runs-dir", str(tmp_path))
    assert result.exit_code == 0


@pytest.mark.parametrize("alpha", ["nan", "0", "1.5"])
def test_diff_alpha_outside_0_1_is_refused(tmp_path, alpha):
    result = invoke("diff", "a", "b", "--alpha", alpha, "--runs-dir", str(tmp_path))
    assert result.exit_code == 2 and "--alpha" in result.output


def test_an_unusable_index_falls_back_to_reading_the_folders(tmp_path):
    (tmp_path / "index.sqlite").mkdir()  # or a read-only runs dir, or a full disk
    (tmp_path / "20261130T000000Z-demo-abcdef").mkdir()
    result = invoke("runs", "--runs-dir", str(tmp_path), "--json")
    assert result.exit_code == 0
    assert [row["id"] for row in json.loads(result.stdout)] == ["20261130T000000Z-demo-abcdef"]
    reindex = invoke("runs", "--reindex", "--runs-dir", str(tmp_path))
    assert reindex.exit_code == 2 and "index.sqlite" in reindex.output


def test_wrong_typed_status_json_is_listed_not_a_crash(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "status.json").write_text(json.dumps({"status": 5, "pid": "no"}))
    (tmp_path / "y").mkdir()
    (tmp_path / "y" / "status.json").write_bytes(b"\xff\xfe not utf-8")
    result = invoke("runs", "--runs-dir", str(tmp_path))
    assert result.exit_code in (0, 2)


def test_a_hung_lock_holder_does_not_block_writers_forever(tmp_path):
    with open(tmp_path / index.LOCK_NAME, "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)  # another process hangs with the lock
        started = time.monotonic()
        with (pytest.raises(TimeoutError, match="held by another mopt process"),
              index.locked(tmp_path, timeout_s=0.5)):
            pass
        assert time.monotonic() - started < 5


def test_bench_url_that_redirects_is_refused_not_followed(tmp_path):
    from model_optimizer.load.mock_server import MockServer
    with MockServer() as target, MockServer(redirect_to=target.url + "/v1/models") as server:
        result = invoke("bench", "--url", server.url, "--tokenizer", str(tmp_path),
                        "--runs-dir", str(tmp_path / "runs"))
        assert target.counters.requests == 0
    assert result.exit_code == 2 and "does not follow redirects" in result.output

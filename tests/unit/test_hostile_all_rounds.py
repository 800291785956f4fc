"""Issue 37 item 3: the hostile inputs of the three hardening rounds, fed to each command in
one fast module: hostile recipes (validate, show, export, init), hostile servers (bench
--url on ``load/mock_hostile.py``'s faults), hostile archives (runs, status, rollback,
export); signals: tests/unit/cli/test_ctrl_c_any_moment.py. Each ends in bounded time and
memory (tracemalloc's peak, in-process), with a classified exit code (docs/commands.md: 2
bad input, 4 SLOs missed, 5 run failed, 130 interrupted) and no traceback, and loses
nothing: every archive still verifies. The detail of each fault is held by its own test
(docs/security.md, docs/reliability.md)."""

from __future__ import annotations

import json
import resource
import time
import tracemalloc
from pathlib import Path

import pytest
from typer.testing import CliRunner

from model_optimizer.archive.manifest import verify_archive
from model_optimizer.cli.main import app
from model_optimizer.load.mock_server import MockServer
from tests.unit.archive.fakes import make_run, tiny_recipe
from tests.unit.archive.test_current import forge

TIME_S = 20.0           # each command; expected: a few seconds at most
MEMORY = 256 << 20      # Python allocations of one command; the floods were 737 MB to 2 GiB
RSS_GROWTH = 1 << 30    # bench: the in-process mock server's own flood counts here too
CLASSIFIED = {0, 2, 4, 5, 130}
DEEP = 5000

HOSTILE_RECIPES = {
    "control_characters": 'model: {path: m, revision: "main\\n[Service]\\nExecStartPre=/evil"}\n',
    "huge_number": "engine: {max_num_seqs: 1000000000000000000000000000000}\n",
    "billion_laughs": "a: &a [1, 2]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(20)),
    "deep_nesting": "deep: " + "[" * DEEP + "]" * DEEP + "\n",
}
HEADER = "recipe_version: 1\nname: hostile\nhardware: {accelerator: cpu, memory_gib: 2}\n"


def _max_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10  # KiB on Linux


def guarded(*args: str, allowed: set[int] = CLASSIFIED, traced: bool = True):
    """``mopt ARGS`` in this process, bounded in time and memory (tracemalloc's peak, or
    with ``traced=False``, where tracing a flood would take minutes, the growth of the
    process's peak RSS), classified, no traceback."""
    rss_before = _max_rss()
    if traced:
        tracemalloc.start()
    started = time.monotonic()
    try:
        result = CliRunner().invoke(app, list(args))
        took_s = time.monotonic() - started
        peak = tracemalloc.get_traced_memory()[1] if traced else _max_rss() - rss_before
        bound = MEMORY if traced else RSS_GROWTH
    finally:
        tracemalloc.stop()
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        repr(result.exception))
    assert result.exit_code in allowed, (result.exit_code, result.output[-2000:])
    assert "Traceback" not in result.output + result.stderr
    assert took_s < TIME_S and peak < bound, (took_s, peak)
    return result


def intact(runs: Path) -> None:
    for archive in (p for p in runs.iterdir() if p.is_dir()):
        assert verify_archive(archive) == [], archive


@pytest.mark.parametrize("recipe", sorted(HOSTILE_RECIPES))
@pytest.mark.parametrize("command", ["validate", "show", "export"])
def test_a_hostile_recipe_is_refused_by_each_command(tmp_path, recipe, command):
    path = tmp_path / "r.yaml"
    body = HOSTILE_RECIPES[recipe]
    path.write_text(HEADER + ("" if "model:" in body else "model: {path: m}\n") + body)
    extra = ["--to", str(tmp_path / "out"), "--runs-dir", str(tmp_path / "runs")] \
        if command == "export" else []
    guarded(command, str(path), *extra, allowed={2})
    assert not (tmp_path / "out").exists()


def test_init_on_a_config_with_a_billion_layers_is_refused(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
        "num_hidden_layers": 1e9, "num_attention_heads": 4, "vocab_size": 1000,
        "intermediate_size": 128}))
    guarded("init", str(model), "--output", str(tmp_path / "r.yaml"), allowed={2})


@pytest.mark.parametrize("fault", ["chunk_flood", "gzip_newlines", "stall_mid_chunk",
                                   "retry_after", "escape_error", "many_models",
                                   "tokenize_mismatch"])
def test_bench_against_a_hostile_server_ends_bounded_and_classified(tmp_path, fault,
                                                                    tiny_model_dir):
    runs = tmp_path / "runs"
    # tokenize_mismatch: the server's tokenizer is the fault (bounded, then a fallback)
    tokenizer = [] if fault == "tokenize_mismatch" else ["--tokenizer", str(tiny_model_dir)]
    with MockServer(hostile=fault) as server:
        guarded("bench", "--url", server.url, "--num-requests", "4", "--concurrency", "2",
                "--output-tokens", "4", "--prompt-tokens", "8", "--warmup", "0", *tokenizer,
                "--set", "workload.idle_timeout_s=2", "--set",
                "workload.request_timeout_s=15", "--runs-dir", str(runs),
                allowed={2, 4, 5},
                traced=False)
    if runs.is_dir():
        intact(runs)


def test_hostile_archives_leave_every_command_classified_and_nothing_lost(tmp_path,
                                                                        monkeypatch):
    good = tiny_recipe(tmp_path, "a.yaml")
    evil = tiny_recipe(tmp_path, "evil.yaml")
    runs = tmp_path / "runs"
    kept = make_run(runs, good)
    forge(runs, evil, "2099-01-01T00:00:00Z", seal=False)  # forged, unsealed, future-dated
    make_run(runs, good, seal=False)                          # never sealed
    (runs / "escape").symlink_to(tmp_path.parent, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    for args in (["runs", "--runs-dir", str(runs)], ["runs", "show", "escape", "--runs-dir",
                                                    str(runs)],
                 ["status", "--runs-dir", str(runs)],
                 ["rollback", "escape", "--runs-dir", str(runs)],
                 ["export", "--runs-dir", str(runs), "--to", "out", "-f", "vllm", "--force"]):
        result = guarded(*args)
        assert "evil" not in result.output or "untrusted" in result.output or \
            "ignored" in result.output, result.output
    assert verify_archive(kept) == []
    assert "evil" not in (tmp_path / "out" / "vllm.yaml").read_text()

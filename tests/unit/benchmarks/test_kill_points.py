"""``benchmarks/kill_points.py``: the points it kills at are recognised from a real vLLM 0.32
log in order (lines copied from a tiny-cpu start-up), and its table counts what was left."""

from __future__ import annotations

import json

from benchmarks.kill_points import POINTS, reached, summary

#: one line per log-recognised point, in the order a start-up writes them
LINES = {
    "api_up": "(APIServer pid=27240) INFO [api_utils.py:286] non-default args: {'host': ...}",
    "core_init": "(EngineCore pid=27472) INFO [core.py:133] Initializing a V1 LLM engine",
    "loading": "(Worker pid=27594) INFO [cpu_model_runner.py:68] Starting to load model m...",
    "kv_cache": "(EngineCore pid=27472) INFO [kv_cache_utils.py:2327] CPU KV cache size: 524,288",
    "healthy": "INFO:     Application startup complete.",
    "shutdown": "(EngineCore pid=27472) INFO [core.py:1454] [shutdown] EngineCore: trigger",
}


def test_each_log_point_is_reached_only_once_its_line_is_written(tmp_path):
    log = tmp_path / "engine.log"
    log.write_text("")
    written = []
    for point, line in LINES.items():
        assert not reached(point, tmp_path, [], None), point
        written.append(line)
        log.write_text("\n".join(written))
        assert all(reached(p, tmp_path, [], None) for p in LINES if LINES[p] in written)
    assert set(LINES) < set(POINTS)


def test_load_points_follow_the_measured_requests(tmp_path):
    (tmp_path / "engine.log").write_text("")
    rows = [{"warmup": True}] * 4 + [{"warmup": False}] * 2
    (tmp_path / "requests.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    assert not reached("load_early", tmp_path, [], None)
    with (tmp_path / "requests.jsonl").open("a") as out:
        out.write("\n" + json.dumps({"warmup": False}))
    assert reached("load_early", tmp_path, [], None)


def test_the_table_counts_trials_with_a_process_left_and_an_error_as_one():
    rows = [{"point": "healthy", "signal": "SIGKILL", "alive_after_15s": 0, "gone_after_s": 3.1},
            {"point": "healthy", "signal": "SIGKILL", "alive_after_15s": 2, "gone_after_s": 21.0},
            {"point": "healthy", "signal": "SIGKILL", "alive_after_15s": 0, "gone_after_s": 2.0}]
    table = summary(rows)
    assert "| healthy | 1 of 3 (2 processes); 3.1 (2.0-21.0) s | - |" in table
    assert "api_up" not in table
    error = [{"point": "api_up", "signal": "SIGTERM", "error": "mopt ended first"}]
    assert "| api_up | - | 1 of 1 (1 processes); never s |" in summary(error)

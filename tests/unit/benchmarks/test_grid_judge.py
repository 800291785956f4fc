"""The honest judge (``benchmarks/grid_judge.py``) on the grid recorded in issue 20.

Issue 20's new-user workload, judged by a grid of 14 launches (up then down): medians 10.0,
16.4, 22.3, 32.8, 42.3, 54.8, 50.1 req/s at 1..64, the two passes at 32 reading 46.7 and
62.8. Its default sweep chose 57 (0.93 of the best) and said "not resolved".
"""

from __future__ import annotations

import math

import pytest

from benchmarks.grid_judge import (
    best_of,
    grid_noise,
    grid_table,
    interpolate,
    judge,
    load_grid,
    save_grid,
    summarize,
    sweep_unresolved,
)

MEDIANS = {1: 10.0, 2: 16.4, 4: 22.3, 8: 32.8, 16: 42.3, 48: 54.8, 64: 50.1}


def issue_grid(changes: dict | None = None) -> dict:
    rows = []
    for value, median in MEDIANS.items():
        for name, factor in (("up", 0.95), ("down", 1.05)):
            rows.append({"value": value, "pass": name, "ok": True, "qps": median * factor,
                         "slo_met": True, "preemptions": 0})
    rows += [{"value": 32, "pass": "up", "ok": True, "qps": 46.7, "slo_met": True},
             {"value": 32, "pass": "down", "ok": True, "qps": 62.8, "slo_met": True}]
    for row in rows:
        row.update((changes or {}).get(row["value"], {}))
    return {"measurements": rows}


def test_medians_ranges_and_the_best_valid_value():
    values = summarize(issue_grid())
    assert values[32].median == pytest.approx(54.75) and values[32].passes == 2
    assert (values[32].low, values[32].high) == (46.7, 62.8)
    assert best_of(values).value == 48  # 54.8 beats 32's 54.75
    preempting = summarize(issue_grid({48: {"preemptions": 3}}))
    assert not preempting[48].valid and best_of(preempting).value == 32


def test_a_value_the_grid_lacks_is_interpolated_on_log2_without_a_launch():
    values = summarize(issue_grid())
    median, how = interpolate(values, 57)
    share = (math.log2(57) - math.log2(48)) / (math.log2(64) - math.log2(48))
    assert how == "interpolated" and median == pytest.approx(54.8 + share * (50.1 - 54.8))
    assert interpolate(values, 128) == (None, "128 lies outside the grid")
    failed = summarize(issue_grid({64: {"slo_met": False}}))
    assert interpolate(failed, 57)[0] is None


def test_verdicts_met_not_resolved_and_a_confident_miss():
    grid = issue_grid()
    assert judge(grid, 32, sweep_unresolved=False).verdict == "MET"  # 0.999 of 54.8
    assert judge(grid, 16, sweep_unresolved=False).verdict == "MISS"  # 0.77, said nothing
    unresolved = judge(grid, 16, sweep_unresolved=True)
    assert unresolved.verdict == "NOT RESOLVED" and unresolved.ratio == pytest.approx(
        42.3 / 54.8)
    assert judge(grid, 40, sweep_unresolved=False).verdict == "MET"  # between 32 and 48
    issue_choice = judge(grid, 57, sweep_unresolved=True)  # the issue's sweep: 57, "not
    assert issue_choice.verdict == "NOT RESOLVED"  # resolved"; interpolated 0.949 of best
    assert issue_choice.how == "interpolated" and issue_choice.ratio == pytest.approx(
        0.949, abs=0.001)
    assert judge(grid, 57, sweep_unresolved=False).verdict == "MISS"
    outside = judge(grid, 128, sweep_unresolved=False)
    assert outside.verdict == "NOT RESOLVED" and "outside" in outside.line()
    assert judge({"measurements": []}, 8, sweep_unresolved=False) is None


def test_the_sweeps_own_flag_wins_over_the_noise_rule():
    assert sweep_unresolved({"noise": {"cv": 0.36}}, 0.05)
    assert not sweep_unresolved({"noise": {"cv": 0.03}}, 0.05)
    assert not sweep_unresolved({"noise": {}}, 0.05)
    assert not sweep_unresolved({"resolved": True, "noise": {"cv": 0.36}}, 0.05)


def test_the_grid_file_round_trips_and_prints_every_pass(tmp_path):
    path = tmp_path / "grids" / "g.json"
    assert load_grid(path) == {"measurements": []}
    grid = issue_grid({1: {"ok": False, "qps": None}})
    save_grid(path, grid)
    assert load_grid(path) == grid
    table = grid_table(load_grid(path))
    assert "| 32 | 46.7, 62.8 | 54.8 | yes |" in table and "| 1 |" not in table


def test_the_grid_says_how_much_noise_its_own_passes_show():
    grid = issue_grid()
    # every value read 0.95x and 1.05x its median, but 32 read 46.7 and 62.8
    cvs = [0.1 / math.sqrt(2)] * 7 + [math.sqrt(2) * (62.8 - 46.7) / 2 / ((62.8 + 46.7) / 2)]
    assert grid_noise(grid) == pytest.approx(math.sqrt(sum(c * c for c in cvs) / 8))
    quiet = judge(grid, 16, sweep_unresolved=False)       # 0.77 of the best: a real miss
    assert quiet.margin == pytest.approx(1.96 * grid_noise(grid))  # two passes each
    assert "is outside it" in quiet.line()
    assert "is inside it" in judge(grid, 57, sweep_unresolved=True).line()  # 0.949
    assert grid_noise({"measurements": grid["measurements"][:1]}) is None

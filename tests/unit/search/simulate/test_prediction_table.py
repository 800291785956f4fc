"""The prediction table of the simulator (issue 35 item 4): known answers, seeds, goals."""

import importlib.util
from pathlib import Path

import pytest

from model_optimizer.search.simulate.bench import REGIMES, Bench
from model_optimizer.search.simulate.predtable import (
    REFERENCE_WINDOWS,
    PredictionRow,
    held_out_errors,
    read_window,
    scan,
    simulate_prediction,
)
from model_optimizer.search.simulate.truth import curves


def search_sim():
    path = Path(__file__).resolve().parents[4] / "benchmarks" / "search_sim.py"
    spec = importlib.util.spec_from_file_location("search_sim", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_true_ttft_grows_with_the_queue_beyond_the_kv_cap():
    flat, plain = curves()["knee-flat"], curves()["monotone"]
    assert flat.ttft_ms(10, 0.5) == pytest.approx(plain.ttft_ms(10, 0.5))  # under the cap
    # beyond it, every extra request in flight waits one completion's worth more: 1 / X
    extra = flat.ttft_ms(41, 0.5) - flat.ttft_ms(40, 0.5)
    assert extra == pytest.approx(1000.0 / flat.throughput(40))
    assert plain.ttft_ms(10, 0.99) > plain.ttft_ms(10, 0.5) > 5.0


def test_a_quiet_window_reads_the_truth_and_a_slow_one_slows_its_latency_too():
    curve = curves()["monotone"]
    window = read_window(Bench(curve, REGIMES["cv0"], 0).launch(64), 12)
    assert window.qps == pytest.approx(curve.throughput(12))
    assert window.ttft_p50_ms == pytest.approx(curve.ttft_ms(12, 0.5))
    bench = Bench(curve, REGIMES["cv30+collapse"], 4)
    windows = [read_window(bench.launch(64), 12) for _ in range(200)]
    slower = [w for w in windows if w.qps < 0.5 * curve.throughput(12)]
    assert slower and all(w.ttft_p50_ms > curve.ttft_ms(12, 0.5) for w in slower)


def test_zero_noise_reproduces_the_known_answer_exactly_where_the_model_holds():
    for name in ("monotone", "monotone-gpu", "rise-fall", "oom-ceiling"):
        for row in held_out_errors(curves()[name], REGIMES["cv0"], seed=0):
            assert max(row.values()) < 1e-6, name


def test_the_kv_cap_broke_the_first_ttft_model_and_the_queue_term_follows_it():
    """knee-flat's queue beyond 20 is a slope Little's law with one alpha cannot follow: its
    TTFT error at zero noise was the first model's, not the noise's (a recorded miss); the
    queue term of the second follows it."""
    from model_optimizer.search.sweep.predict import FIRST, Model

    first = simulate_prediction(curves()["knee-flat"], REGIMES["cv0"], 1, model=FIRST)
    assert first.mape["qps"] < 0.02 and first.mape["ttft_p50_ms"] > 0.15
    assert first.predictions == 10  # the interior coarse levels of 1..64
    queue = simulate_prediction(curves()["knee-flat"], REGIMES["cv0"], 1,
                                model=Model("runs", "hinge"))
    assert queue.mape["ttft_p50_ms"] < 0.05


def test_repetitions_are_seeded():
    curve, noise = curves()["rise-fall"], REGIMES["cv5"]
    assert simulate_prediction(curve, noise, 3) == simulate_prediction(curve, noise, 3)
    assert simulate_prediction(curve, noise, 3, seed0=5) != simulate_prediction(curve, noise, 3)


def test_noise_costs_accuracy_and_the_truth_column_separates_the_reference_noise():
    curve = curves()["monotone"]
    quiet = simulate_prediction(curve, REGIMES["cv5"], 4)
    loud = simulate_prediction(curve, REGIMES["cv30+collapse"], 4)
    assert quiet.mape["qps"] < loud.mape["qps"]
    # against a median of 5 noisy windows the error includes the reference's own noise
    assert loud.mape["qps_truth"] < loud.mape["qps"]


def test_the_goals_are_printed_met_or_missed_with_the_worst_cell():
    module = search_sim()
    rows = [PredictionRow("monotone", "cv5", 1, 10, {"qps": 0.03, "ttft_p50_ms": 0.02}),
            PredictionRow("knee-flat", "cv5", 1, 10, {"qps": 0.04, "ttft_p50_ms": 0.28})]
    lines = module.prediction_goals(rows)
    assert lines == ["- throughput MAPE <= 5% at cv5: **MET** (worst cell: knee-flat 4.0%)",
                     "- TTFT p50 MAPE <= 15% at cv5: **MISSED** (worst cell: knee-flat 28.0%)"]


def test_each_level_is_read_five_times_interleaved_on_one_server():
    bench = Bench(curves()["monotone"], REGIMES["cv5"], 2)
    levels = [1, 2, 4, 8]
    server, passes = scan(bench, levels, REFERENCE_WINDOWS)
    assert REFERENCE_WINDOWS == 5 and bench.launches == 1 and server.ceiling == 8
    assert [[o.value for o in p] for p in passes[:2]] == [levels, levels[::-1]]
    minutes = [o.minute for p in passes for o in p]
    assert minutes == sorted(minutes) and len(minutes) == 20


def test_held_out_levels_are_judged_against_their_own_windows_and_skip_a_missing_ttft():
    from model_optimizer.search.simulate.predtable import held_out
    from model_optimizer.search.sweep.fitscan import coarse_levels
    from model_optimizer.search.sweep.predict import Observed

    curve = curves()["monotone"]
    levels = coarse_levels(1, 64)
    _, passes = scan(Bench(curve, REGIMES["cv0"], 0), levels, REFERENCE_WINDOWS)
    found = held_out(passes, levels)
    assert [item.level for item in found] == levels[1:-1]  # the ends are never left out
    assert all(len(item.windows) == REFERENCE_WINDOWS for item in found)
    assert all(item.errors()["qps"] < 0.02 for item in found)
    # a real window may lack a TTFT: that figure is left out, not read as zero
    no_ttft = [[Observed(o.value, o.qps, None, None, o.minute) for o in window]
               for window in passes]
    errors = held_out(no_ttft, levels)[0].errors()
    assert set(errors) == {"qps"}
    # a held-out level 10% off the curve reads about 10% off
    skewed = [[Observed(o.value, o.qps * (1.1 if o.value == 8 else 1.0), o.ttft_p50_ms,
                        o.ttft_p99_ms, o.minute) for o in window] for window in passes]
    eight = next(item for item in held_out(skewed, levels) if item.level == 8)
    assert eight.errors()["qps"] == pytest.approx(1 - 1 / 1.1, abs=0.02)

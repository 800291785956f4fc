"""What a measured window (``window.py``) records of the cards, and when it waits for them:
``thermals`` in ``metrics.json`` from the window's own samples, the warm-up's samples left
out; the card watch only with a steady warm-up and a card bound."""

from __future__ import annotations

from types import SimpleNamespace

from model_optimizer.telemetry.cardwatch import NO_NVML, CardWatch
from model_optimizer.window import RunRecords, card_watch, window_checks

from .thermal_series import T0, cold_h100, steady_card


def measured(series: list[dict], opened_at: float | None) -> RunRecords:
    records = RunRecords(archive=None, items=None)  # type: ignore[arg-type]  # not archiving
    records.series, records.opened_at = series, opened_at
    return records


def warm_up_then_window() -> list[dict]:
    """20 s of a cold card warming up, then 30 s of the warm card measured."""
    return cold_h100(20) + steady_card(30, start=T0 + 20.5)


def test_the_window_records_its_cards_from_its_opening_not_the_warm_up():
    checks = window_checks(measured(warm_up_then_window(), T0 + 20.5), {}, None)
    (card,) = checks["thermals"]
    assert card["index"] == 0 and card["samples"] == 61
    assert card["temperature_c"]["min"] == 62 and card["temperature_c"]["max"] == 63
    assert card["sm_clock_mhz"]["min"] >= 1410 and card["sm_clock_mhz"]["max"] <= 1455
    everything = window_checks(measured(warm_up_then_window(), None), {}, None)["thermals"]
    assert everything[0]["temperature_c"]["min"] == 35  # the cold start, had it counted
    assert everything[0]["sm_clock_mhz"]["max"] > 1900


def test_the_steady_part_bounds_the_record_when_there_is_one():
    steady = {"start": T0 + 30, "end": T0 + 40}
    (card,) = window_checks(measured(warm_up_then_window(), T0 + 20.5), {}, steady)["thermals"]
    assert card["samples"] == 21  # 30..40 s, every 0.5 s


def test_a_cpu_window_records_no_thermals():
    cpu = [{"t": T0 + i, "rss_bytes": 1, "gpu_thermals": None} for i in range(10)]
    assert window_checks(measured(cpu, T0), {}, None)["thermals"] is None


def test_the_card_is_waited_for_only_with_a_steady_warm_up_and_a_bound():
    gpu = SimpleNamespace(gpu_available=lambda: True)
    records = measured([], None)
    watch = card_watch({"warmup_steady_max_s": 30, "warmup_card_max_s": 90}, records, gpu)
    assert isinstance(watch, CardWatch) and watch.max_s == 90 and watch.nvml
    assert card_watch({"warmup_steady_max_s": None, "warmup_card_max_s": 90}, records,
                      gpu) is None
    assert card_watch({"warmup_steady_max_s": 30, "warmup_card_max_s": None}, records,
                      gpu) is None
    cpu = card_watch({"warmup_steady_max_s": 30, "warmup_card_max_s": 90}, records,
                     SimpleNamespace(gpu_available=lambda: False))
    assert cpu is not None
    cpu.begin()
    assert cpu.done() and cpu.verdict == NO_NVML


def test_the_watch_reads_the_windows_samples_as_they_arrive():
    records = measured([], None)
    watch = card_watch({"warmup_steady_max_s": 30, "warmup_card_max_s": 90}, records,
                       SimpleNamespace(gpu_available=lambda: True))
    assert watch is not None
    watch.clock = lambda: T0  # the watch's wall clock, at the first sample
    watch.begin()
    assert not watch.done()
    records.series.extend(steady_card(12))  # the sampler appends to the window's list
    watch.clock = lambda: T0 + 12
    assert watch.done() and watch.steady is True

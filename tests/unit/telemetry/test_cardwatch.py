"""The warm-up's wait for a steady card (``telemetry/cardwatch.py``) with a fake thermals
source and a fake clock (no real sleeping): alone, inside the steady warm-up
(``load/warmup.py``), without NVML, out of time; the sampler's thermals; a window's record
and its report line."""

from __future__ import annotations

import logging

import pytest

from model_optimizer.load.warmup import NO_TOKENS, ROUND_S, STEADY_ROUNDS, SteadyWarmup
from model_optimizer.telemetry import cardwatch
from model_optimizer.telemetry.cardwatch import (
    NO_NVML,
    NO_READINGS,
    STEADY,
    CardWatch,
    card_line,
    not_steady_after,
)
from model_optimizer.telemetry.memory import NvmlProbe
from model_optimizer.telemetry.sampler import TelemetrySampler
from model_optimizer.telemetry.thermal import SPAN_S

from .test_telemetry_nvml import NoDriverNvml, ThermalNvml
from .thermal_series import STEP_S, T0, cold_h100, steady_card, throttling_card


class FakeClock:
    """Wall seconds that move only when the test says."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Arriving:
    """A recorded series handed out as the sampler would: each sample once its time came."""

    def __init__(self, recorded: list[dict], clock: FakeClock) -> None:
        self.recorded, self.clock, self.delivered = recorded, clock, []

    def __call__(self) -> list[dict]:
        while len(self.delivered) < len(self.recorded) and \
                self.recorded[len(self.delivered)]["t"] <= self.clock.now:
            self.delivered.append(self.recorded[len(self.delivered)])
        return self.delivered


def watch_over(recorded: list[dict], max_s: float, nvml: bool = True,
               start: float = T0) -> tuple[CardWatch, FakeClock]:
    clock = FakeClock(start)
    return CardWatch(Arriving(recorded, clock), max_s, nvml=nvml, clock=clock), clock


def poll_until_done(watch: CardWatch, clock: FakeClock, until: float,
                    step: float = 0.1) -> float | None:
    """Poll as the load client's monitor does (every 0.1 s); seconds until done, or None."""
    watch.begin()
    while clock.now - T0 < until:
        if watch.done():
            return clock.now - T0
        clock.now += step
    return None


def test_a_steady_card_is_done_once_the_span_is_covered():
    watch, clock = watch_over(steady_card(60), max_s=120)
    took = poll_until_done(watch, clock, 60)
    assert watch.verdict == STEADY and watch.steady is True
    assert took is not None and SPAN_S <= took <= SPAN_S + 2 * STEP_S
    summary = watch.summary()
    assert summary["seconds"] == pytest.approx(took, abs=0.01)
    assert summary["reason"].startswith("steady: GPU 0 62-63 C")


def test_a_cold_h100_keeps_the_warm_up_going_until_it_settles():
    watch, clock = watch_over(cold_h100(120), max_s=120)
    took = poll_until_done(watch, clock, 120)
    assert watch.verdict == STEADY and took is not None and took > 40
    # only samples from the warm-up's start count: a watch begun 50 s in needs its own span
    late, clock = watch_over(cold_h100(120), max_s=120)
    clock.now = T0 + 50
    late.begin()
    while not late.done():
        clock.now += 0.1
    assert clock.now - (T0 + 50) >= SPAN_S


def test_a_card_that_never_settles_is_recorded_not_steady_after_the_bound():
    flapping = throttling_card(60, drop_at=5)
    for index, sample in enumerate(flapping):  # throttles and recovers every 2 s
        sample["gpu_thermals"][0]["sm_clock_mhz"] = 1980 if (index // 4) % 2 else 1755
    watch, clock = watch_over(flapping, max_s=30)
    took = poll_until_done(watch, clock, 60)
    assert took == pytest.approx(30, abs=0.11)
    assert watch.verdict == not_steady_after(30) == "card not steady after 30 s"
    assert watch.steady is False and "SM clock" in watch.summary()["reason"]


def test_without_nvml_it_is_a_no_op_that_says_so_once(caplog):
    cardwatch._told.clear()
    caplog.set_level(logging.INFO, logger=cardwatch.__name__)
    for _ in range(3):  # three windows of one sweep
        watch, clock = watch_over([], max_s=120, nvml=False)
        assert poll_until_done(watch, clock, 1) == 0.0
        assert watch.verdict == NO_NVML and watch.steady is None
        assert watch.summary()["seconds"] == 0.0
    said = [r.getMessage() for r in caplog.records if r.name == cardwatch.__name__]
    assert said == [f"warm-up: card {NO_NVML}"]


def test_nvml_without_readings_is_not_checked_rather_than_waited_for():
    blank = [{"t": T0 + i * STEP_S, "gpu_thermals": [{"index": 0, "temperature_c": None,
                                                      "sm_clock_mhz": None}]}
             for i in range(40)]
    watch, clock = watch_over(blank, max_s=120)
    took = poll_until_done(watch, clock, 20)
    assert watch.verdict == NO_READINGS and took is not None and took < 1


def feed_tokens(warmup: SteadyWarmup, clock: FakeClock, rate: float, until: float,
                step: float = 0.05) -> float | None:
    """The warm-up loop on a fake clock: tokens at ``rate``/s, the card's wall clock moving
    with the load's; seconds until the warm-up ended, or None."""
    t = warmup.start
    while t < until:
        warmup.streamed(round(rate * step), t)
        t += step
        clock.now = T0 + t
        if warmup.done(t):
            return t - warmup.start
    return None


def test_the_warm_up_waits_for_the_card_after_throughput_is_steady():
    watch, clock = watch_over(cold_h100(120), max_s=120)
    warmup = SteadyWarmup(0.0, max_s=60, card=watch)
    ended = feed_tokens(warmup, clock, rate=400.0, until=120)
    assert warmup.verdict == "steady"
    assert warmup.steady_at == pytest.approx(STEADY_ROUNDS * ROUND_S, abs=0.1)
    assert ended is not None and ended > 40  # the card, not the throughput, decided
    summary = warmup.summary()
    assert summary["seconds"] == pytest.approx(ended, abs=0.01)
    assert summary["card"]["verdict"] == STEADY and summary["card"]["steady"] is True


def test_a_card_out_of_time_lets_the_run_go_on_flagged():
    flapping = throttling_card(90, drop_at=0)
    for index, sample in enumerate(flapping):
        sample["gpu_thermals"][0]["sm_clock_mhz"] = 1980 if (index // 4) % 2 else 1755
    watch, clock = watch_over(flapping, max_s=45)
    warmup = SteadyWarmup(0.0, max_s=60, card=watch)
    ended = feed_tokens(warmup, clock, rate=400.0, until=90)
    assert ended == pytest.approx(45, abs=0.06)
    assert warmup.verdict == "steady"  # throughput's own verdict is kept
    assert warmup.summary()["card"]["verdict"] == "card not steady after 45 s"


def test_a_server_streaming_nothing_does_not_wait_for_the_card():
    watch, clock = watch_over(cold_h100(60), max_s=120)
    warmup = SteadyWarmup(0.0, max_s=60, card=watch)
    ended = feed_tokens(warmup, clock, rate=0.0, until=60)
    assert warmup.verdict == NO_TOKENS and ended is not None and ended < 2 * ROUND_S
    assert warmup.summary()["card"]["verdict"] is None  # undecided, and said so


def test_without_a_card_gate_the_warm_up_is_the_throughput_one():
    clock = FakeClock(T0)
    warmup = SteadyWarmup(0.0, max_s=60)
    ended = feed_tokens(warmup, clock, rate=400.0, until=60)
    assert ended == pytest.approx(STEADY_ROUNDS * ROUND_S, abs=0.1)
    assert "card" not in warmup.summary()


def test_the_sampler_records_each_devices_thermals_beside_memory():
    sampler = TelemetrySampler(None, None, nvml_probe=NvmlProbe(nvml=ThermalNvml(2)))
    sample = sampler.sample_once()
    assert sampler.gpu_available()
    assert [row["index"] for row in sample["gpu_thermals"]] == [0, 1]
    assert sample["gpu_thermals"][0]["sm_clock_mhz"] == 1440
    assert sample["gpu_mem_used_bytes"] is not None


def test_the_sampler_without_nvml_records_no_thermals():
    sampler = TelemetrySampler(None, None, nvml_probe=NvmlProbe(nvml=NoDriverNvml()))
    assert sampler.sample_once()["gpu_thermals"] is None and not sampler.gpu_available()


def window_metrics(card: dict) -> dict:
    thermals = [{"index": 0, "samples": 20, "temperature_c": {"min": 62, "max": 63,
                                                              "mean": 62.6},
                 "sm_clock_mhz": {"min": 1410, "max": 1455, "mean": 1431.5}}]
    return {"thermals": thermals, "warmup": {"verdict": "steady", "card": card}}


def test_the_report_line_says_the_cards_and_flags_a_card_not_steady():
    steady = card_line(window_metrics({"verdict": STEADY, "steady": True, "seconds": 12.5}))
    assert steady == ("card: GPU 0 62-63 C, SM 1410-1455 MHz (mean 1431.5); warm-up: steady "
                      "after 12.5 s")
    flagged = card_line(window_metrics({"verdict": "card not steady after 120 s",
                                        "steady": False, "reason": "GPU 0 warming: 50 -> 53 C"}))
    assert flagged is not None and flagged.startswith(
        "CARD NOT STEADY: card not steady after 120 s (GPU 0 warming: 50 -> 53 C)")
    assert card_line({"thermals": None, "warmup": {"card": {"verdict": NO_NVML}}}) is None


def test_throughput_is_read_again_once_the_card_is_steady():
    """Steady at first, then a hiccup from 20 to 50 s (rounds alternating 400 and 250
    tokens/s) while the cold card settles (about 45 s): the warm-up ends only when the
    rounds after the hiccup are steady again, not on the early reading."""
    watch, clock = watch_over(cold_h100(120), max_s=120)
    warmup = SteadyWarmup(0.0, max_s=120, card=watch)
    t, step, ended = 0.0, 0.05, None
    while t < 120 and ended is None:
        hiccup = 20 <= t < 50 and int(t / ROUND_S) % 2
        warmup.streamed(round((250 if hiccup else 400) * step), t)
        t += step
        clock.now = T0 + t
        ended = t if warmup.done(t) else None
    assert warmup.steady_at == pytest.approx(STEADY_ROUNDS * ROUND_S, abs=0.1)
    assert watch.verdict == STEADY and watch.ended is not None and watch.ended - T0 < 50
    assert ended is not None and ended >= 50 + STEADY_ROUNDS * ROUND_S - ROUND_S
    assert warmup.verdict == "steady"

"""Progress events: their JSON form, immutability and the ETA rule."""

from __future__ import annotations

import dataclasses

import pytest

from model_optimizer.events import (
    ArchiveOpened,
    Done,
    LoadProgress,
    StageDone,
    StartFailed,
    SweepStep,
    eta_s,
    quiet,
)


def test_to_dict_is_the_fields_by_name_and_the_kind_is_not_a_field():
    event = SweepStep(2, 8, "grow", "doubling", done=1, total=None)
    assert event.kind == "step"
    assert event.to_dict() == {"index": 2, "value": 8, "phase": "grow", "reason": "doubling",
                               "done": 1, "total": None, "eta_s": None}


def test_a_progress_snapshot_keeps_the_load_clients_keys():
    snapshot = {"phase": "measure", "done": 3, "failed": 0, "in_flight": 2, "elapsed_s": 1.0,
                "qps": 3.0, "ttft_p50_ms": 12.0, "stopped_reason": None}
    event = LoadProgress(**snapshot, telemetry={"kv_cache_usage_perc": 0.5})
    assert event.to_dict() == {**snapshot, "telemetry": {"kv_cache_usage_perc": 0.5}}


def test_events_carrying_an_archived_record_give_that_record_as_json():
    failure = {"class": "oom", "hint": "h", "evidence": [], "returncode": 1}
    assert StartFailed(failure).to_dict() == failure
    assert Done({"status": "ok"}).to_dict() == {"status": "ok"}
    assert StageDone("baseline", {"status": "ok", "seconds": 2.0}).to_dict() == {
        "stage": "baseline", "status": "ok", "seconds": 2.0}


def test_events_are_frozen():
    event = ArchiveOpened("r1", "/runs/r1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.path = "/elsewhere"  # type: ignore[misc]
    assert quiet(event) is None


@pytest.mark.parametrize(("elapsed", "done", "total", "left"), [
    (60.0, 2, 5, 90.0),      # 30 s a step, three to go
    (60.0, 0, 5, None),      # nothing done yet: no pace to go by
    (60.0, 2, None, None),   # the total unknown
    (60.0, 6, 5, 0.0),       # more done than planned: nothing left, never negative
])
def test_eta_is_the_pace_so_far_times_the_steps_left(elapsed, done, total, left):
    assert eta_s(elapsed, done, total) == left

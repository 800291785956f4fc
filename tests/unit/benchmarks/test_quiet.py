"""The benchmarks' quiet-machine gate (``benchmarks/quiet.py``)."""

from __future__ import annotations

import argparse

import pytest

from benchmarks import quiet


def args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    quiet.add_quiet_args(parser)
    return parser.parse_args(list(argv))


def busy(share: float):
    return lambda seconds=3.0: {"load_average": [3.4, 3.1, 2.0], "busy_share": share,
                                "cores": 2, "others": [{"pid": 7, "name": "pytest",
                                                        "cpu_pct": 97.0}], "at": 0.0}


def test_a_busy_machine_is_refused_with_the_reason(monkeypatch, capsys):
    monkeypatch.setattr(quiet, "machine_state", busy(0.6))
    with pytest.raises(SystemExit) as stopped:
        quiet.require_quiet(args())
    assert stopped.value.code == quiet.EXIT_BUSY
    err = capsys.readouterr().err
    assert "60% busy" in err and "pytest 97.0%" in err and "--allow-busy" in err


def test_allow_busy_measures_and_says_so(monkeypatch):
    monkeypatch.setattr(quiet, "machine_state", busy(0.6))
    state = quiet.require_quiet(args("--allow-busy"))
    assert state["busy_allowed"] is True and state["busy_share"] == 0.6


def test_an_idle_machine_passes(monkeypatch):
    monkeypatch.setattr(quiet, "machine_state", busy(0.05))
    assert quiet.require_quiet(args())["busy_allowed"] is False


def test_the_state_is_read_from_this_machine():
    state = quiet.machine_state(seconds=0.2)
    assert 0.0 <= state["busy_share"] <= 1.0 and len(state["load_average"]) == 3

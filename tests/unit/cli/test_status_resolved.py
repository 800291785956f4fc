"""`mopt status` shows whether the current revision's choice is resolved (issue 35)."""

from datetime import UTC, datetime

from model_optimizer.cli.status import _validated_lines

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
BASE = {"at": "2026-12-04T11:00:00Z", "run_id": "r1", "by": "sweep", "metrics": {}}


def test_status_says_written_not_resolved_with_the_minutes_that_would_resolve_it():
    validated = {**BASE, "resolved": False, "load_average": {"median": 3.1},
                 "decision": {"against": {"value": 64, "ratio": 0.93, "low": 0.81, "pairs": 4},
                              "more": {"windows": 24, "minutes": 9.5}}}
    line = _validated_lines(validated, NOW)[-1]
    assert "WRITTEN, NOT RESOLVED" in line and "0.930 of 64" in line
    assert "9.5 more minutes" in line and "load average 3.1" in line


def test_status_says_resolved_and_nothing_for_revisions_without_a_verdict():
    validated = {**BASE, "resolved": True,
                 "decision": {"against": {"value": 48, "ratio": 0.98, "low": 0.92, "pairs": 3}}}
    assert "choice: resolved: 0.980 of 48" in _validated_lines(validated, NOW)[-1]
    assert not any("choice:" in line for line in _validated_lines({**BASE, "by": "apply"}, NOW))

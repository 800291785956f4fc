"""`mopt status` shows whether the current revision's choice is resolved (issue 35)."""

from datetime import UTC, datetime

from model_optimizer.cli.status import _validated_lines

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
BASE = {"at": "2026-12-04T11:00:00Z", "run_id": "r1", "by": "sweep", "metrics": {}}


def test_status_says_written_not_resolved_with_where_to_read_why_and_the_load():
    validated = {**BASE, "resolved": False,
                 "load_average": {"min": 2.0, "median": 3.1, "max": 4.5, "samples": 6}}
    line = _validated_lines(validated, NOW)[-1]
    assert "WRITTEN, NOT RESOLVED" in line and "mopt runs show r1" in line
    assert "load average 3.1 (max 4.5)" in line


def test_status_says_resolved_and_nothing_for_revisions_without_a_verdict():
    assert _validated_lines({**BASE, "resolved": True}, NOW)[-1] == "  choice: resolved"
    assert not any("choice:" in line for line in _validated_lines({**BASE, "by": "apply"}, NOW))

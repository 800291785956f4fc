"""When the exported deployment verifies itself: a cron schedule, checked, and written the
way each scheduler reads it.

``mopt export --verify-schedule "0 3 * * *"`` (the default: daily at 03:00 UTC; ``off``
writes no schedule) is a five-field cron expression (minute, hour, day of month, month,
day of week: numbers, ``*``, ``a-b``, ``*/n``, ``a-b/n``, lists, month and day names) or
one of ``@hourly``, ``@daily``, ``@weekly``, ``@monthly``, ``@yearly``. It is checked
here (a bad one is refused, exit 2, before anything is written) and written as it is read:

- the Kubernetes CronJob takes it as written (in UTC: ``timeZone: Etc/UTC``);
- a systemd timer takes an ``OnCalendar=`` expression: every field becomes the list of
  values it selects (runs of consecutive values as ``a..b``), ``UTC`` at the end.

A schedule that restricts both the day of month and the day of week is refused: cron
runs on either day, systemd only on days that are both, so the two files would disagree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from model_optimizer.errors import UsageError

DEFAULT_SCHEDULE = "0 3 * * *"
OFF = "off"
TIME_ZONE = "Etc/UTC"
MACROS = {"@hourly": "0 * * * *", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
          "@weekly": "0 0 * * 0", "@monthly": "0 0 1 * *", "@yearly": "0 0 1 1 *",
          "@annually": "0 0 1 1 *"}
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
#: (name, lowest, highest, names) of each cron field, in order
FIELDS = (("minute", 0, 59, ()), ("hour", 0, 23, ()), ("day of month", 1, 31, ()),
          ("month", 1, 12, MONTHS), ("day of week", 0, 7, DAYS))
_ITEM = re.compile(r"^(\*|\w+(?:-\w+)?)(?:/(\d+))?$")


@dataclass(frozen=True)
class Schedule:
    """A checked cron schedule: as written for Kubernetes, and the values it selects."""

    cron: str
    values: tuple[frozenset[int] | None, ...]  # None: every value of the field

    @property
    def on_calendar(self) -> str:
        """The same schedule as a systemd ``OnCalendar=`` expression, in UTC."""
        minute, hour, day, month, weekday = self.values
        monday_first = frozenset((day + 6) % 7 for day in weekday or ())  # systemd's order
        days = "" if weekday is None else ",".join(
            _runs(monday_first, lambda v: DAYS[(v + 1) % 7].title())) + " "
        return (f"{days}*-{_field(month)}-{_field(day)} {_field(hour)}:{_field(minute)}:00 "
                "UTC")


def _field(values: frozenset[int] | None) -> str:
    return "*" if values is None else ",".join(_runs(values, lambda v: f"{v:02d}"))


def _runs(values: frozenset[int], word) -> list[str]:
    """Sorted ``values`` as words, consecutive runs of three or more as ``a..b``."""
    ordered, out = sorted(values), []
    start = 0
    for at in range(1, len(ordered) + 1):
        if at == len(ordered) or ordered[at] != ordered[at - 1] + 1:
            run = ordered[start:at]
            out += ([f"{word(run[0])}..{word(run[-1])}"] if len(run) >= 3
                    else [word(v) for v in run])
            start = at
    return out


def _number(text: str, field: tuple, schedule: str) -> int:
    name, low, high, names = field
    if text.lower() in names:
        return names.index(text.lower()) + (1 if name == "month" else 0)
    if not text.isdigit() or not low <= int(text) <= high:
        raise UsageError(f"--verify-schedule {schedule!r}: the {name} {text!r} is not "
                         f"{low}-{high}" + (f" or a name {names[0]}..{names[-1]}" if names
                                            else ""))
    return int(text)


def _values(text: str, field: tuple, schedule: str) -> frozenset[int] | None:
    """The values one field selects (None for ``*``); UsageError naming a bad item."""
    name, low, high, _ = field
    if text == "*":
        return None
    chosen: set[int] = set()
    for item in text.split(","):
        match = _ITEM.match(item)
        if not match or (match.group(2) is not None and int(match.group(2)) == 0):
            raise UsageError(f"--verify-schedule {schedule!r}: the {name} {item!r} is not "
                             "a number, a-b, */n, a-b/n or a list of them")
        bounds, step = match.group(1), int(match.group(2) or 1)
        if bounds == "*":
            first, last = low, high
        else:
            first_text, _, last_text = bounds.partition("-")
            first = _number(first_text, field, schedule)
            last = _number(last_text, field, schedule) if last_text else (
                high if match.group(2) else first)
        if first > last:
            raise UsageError(f"--verify-schedule {schedule!r}: {item!r} runs backwards")
        chosen.update(range(first, last + 1, step))
    if name == "day of week" and 7 in chosen:
        chosen = (chosen - {7}) | {0}  # cron's 7 is Sunday too
    return frozenset(chosen)


def parse_schedule(text: str) -> Schedule:
    """``text`` checked (UsageError, naming the field, when it is not a schedule)."""
    cron = MACROS.get(text.strip().lower(), text.strip())
    parts = cron.split()
    if len(parts) != len(FIELDS):
        raise UsageError(f"--verify-schedule {text!r}: a schedule has five fields (minute "
                         "hour day-of-month month day-of-week, e.g. \"0 3 * * *\" for daily "
                         f"at 03:00 UTC) or is one of {', '.join(MACROS)}; `off` writes none")
    values = tuple(_values(part, field, text) for part, field in zip(parts, FIELDS,
                                                                     strict=True))
    if values[2] is not None and values[4] is not None:
        raise UsageError(f"--verify-schedule {text!r} restricts both the day of month and "
                         "the day of week: cron runs on either, systemd only on both. Fix: "
                         "restrict one of them and write * for the other")
    return Schedule(" ".join(parts), values)


#: how long one scheduled verification may take before its Job (or unit) is stopped
VERIFY_DEADLINE_S = 4 * 3600


def verify_args(recipe: str, url: str, runs_dir: str, tokenizer: str | None = None
                ) -> list[str]:
    """``mopt``'s arguments for one scheduled verification of the deployed server."""
    return ["verify", recipe, "--url", url, "--runs-dir", runs_dir,
            *(["--tokenizer", tokenizer] if tokenizer else [])]

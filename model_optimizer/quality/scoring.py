"""Task scorers: is one generated answer correct? And task accuracy over repeats.

Scorers (named in an eval-set item, see :mod:`model_optimizer.quality.evalset`):

- ``exact``: the answer's first non-empty line, whitespace collapsed and a trailing ``.``
  dropped, equals the reference (case-sensitive).
- ``contains``: the reference occurs anywhere in the answer.
- ``number``: the first number in the answer (digits, or an English number word from zero
  to twenty) equals the reference's number.
- ``regex``: the item's ``pattern`` is found in the answer; with a reference, the first
  group (or the whole match) must equal it.

Accuracy of a repeat is the share of scored items answered correctly; over several repeats
(different seeds) the mean and the spread (min to max) are reported, and a difference between
two deployments is judged against that spread (see :func:`compare_accuracy`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from statistics import mean

from model_optimizer.history.stats import ALPHA, mann_whitney_u
from model_optimizer.quality.evalset import EvalItem

_WORD_NUMBERS = {word: value for value, word in enumerate(
    ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
     "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
     "eighteen", "nineteen", "twenty"])}
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?|\b(?:" + "|".join(_WORD_NUMBERS) + r")\b", re.I)


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return " ".join(line.split()).removesuffix(".").strip()
    return ""


def first_number(text: str) -> float | None:
    """The first number in ``text`` (digits or a number word up to twenty), or None."""
    match = _NUMBER.search(text)
    if match is None:
        return None
    token = match.group(0).lower()
    return float(_WORD_NUMBERS[token]) if token in _WORD_NUMBERS else float(token)


def score(item: EvalItem, answer: str) -> bool | None:
    """True/False for a scored item, None for an item without a scorer."""
    if item.scorer is None:
        return None
    reference = item.reference or ""
    if item.scorer == "exact":
        return _first_line(answer) == _first_line(reference)
    if item.scorer == "contains":
        return reference in answer
    if item.scorer == "number":
        expected = first_number(reference)
        return expected is not None and first_number(answer) == expected
    match = re.search(item.pattern or "", answer)
    if match is None:
        return False
    if item.reference is None:
        return True
    found = match.group(1) if match.groups() else match.group(0)
    return (found or "").strip() == reference.strip()


@dataclass(frozen=True)
class AccuracyComparison:
    """Task accuracy of a baseline and a candidate, and whether the drop is beyond noise."""

    baseline_mean: float
    candidate_mean: float
    drop: float                 # baseline_mean - candidate_mean (positive = worse)
    noise: float                # the larger spread (max - min) of either side's repeats
    p_value: float | None       # Mann-Whitney U on the per-item, per-repeat scores
    beyond_noise: bool

    def to_dict(self) -> dict:
        """JSON form."""
        return {"baseline_mean": self.baseline_mean, "candidate_mean": self.candidate_mean,
                "drop": self.drop, "noise": self.noise, "p_value": self.p_value,
                "beyond_noise": self.beyond_noise}


def spread(values: list[float]) -> float:
    """max - min of ``values`` (0 for fewer than two)."""
    return max(values) - min(values) if len(values) > 1 else 0.0


def compare_accuracy(baseline: list[list[bool]], candidate: list[list[bool]]
                     ) -> AccuracyComparison | None:
    """Compare per-repeat item scores (``[repeat][item]``) of two deployments.

    The drop counts as beyond noise when it exceeds the spread of either side's repeats and,
    with several repeats on both sides, the Mann-Whitney U test on the pooled 0/1 scores
    rejects at ``ALPHA`` (the test ``mopt diff`` uses). With one greedy repeat per side the
    spread is unknown and taken as 0: determinism of greedy decoding is what the eval's
    self-agreement figures prove.
    """
    if not baseline or not candidate or not baseline[0] or not candidate[0]:
        return None
    base_acc = [mean(r) for r in baseline]
    cand_acc = [mean(r) for r in candidate]
    drop = mean(base_acc) - mean(cand_acc)
    noise = max(spread(base_acc), spread(cand_acc))
    pooled_base = [float(x) for r in baseline for x in r]
    pooled_cand = [float(x) for r in candidate for x in r]
    p_value = mann_whitney_u(pooled_base, pooled_cand)[1]
    several = len(baseline) > 1 and len(candidate) > 1
    beyond = abs(drop) > noise and (not several or p_value < ALPHA)
    return AccuracyComparison(mean(base_acc), mean(cand_acc), drop, noise, p_value, beyond)

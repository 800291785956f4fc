"""What one eval of one deployment produced, and its files in an ``eval`` run archive.

An eval archive (``runs/<time>-<name>-<id>/``, kind ``eval`` in the index) holds, besides the
usual ``status.json``, ``run.json``, recipe files and ``engine.log``:

    evalset.jsonl        the items evaluated (prompts, references, scorers)
    outputs.jsonl        one line per repeat and item: text, token ids, top-k logprobs, seed
    scores.jsonl         teacher-forced top-k logprobs of this deployment along its own
                         repeat-0 answers (what makes any eval usable as a baseline)
    scores.baseline.jsonl  ... along the baseline's answers (when compared with one)
    fidelity.jsonl       per-prompt fidelity figures against the baseline
    quality.json         sampling, accuracy per repeat, lm-eval scores, fidelity summary,
                         comparison and gate verdict, time taken
    lm_eval/             lm-eval's own output and log, when lm-eval tasks ran
    report.md            for humans
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from model_optimizer.quality.client import Generation, Scored
from model_optimizer.quality.config import QualityConfig
from model_optimizer.quality.evalset import EvalItem, parse_eval_set
from model_optimizer.quality.lmeval import TaskScore

EVALSET = "evalset.jsonl"
OUTPUTS = "outputs.jsonl"
SCORES = "scores.jsonl"
SCORES_BASELINE = "scores.baseline.jsonl"
FIDELITY = "fidelity.jsonl"
QUALITY = "quality.json"
LM_EVAL_DIR = "lm_eval"


@dataclass
class EvalResult:
    """One eval of one deployment (possibly read back from its archive)."""

    run_id: str
    archive: Path
    status: str
    config: QualityConfig
    items: list[EvalItem] = field(default_factory=list)
    generations: list[list[Generation]] = field(default_factory=list)  # [repeat][item]
    scores: list[Scored] = field(default_factory=list)            # on its own answers
    baseline_scores: list[Scored] = field(default_factory=list)   # on the baseline's answers
    lm_eval: list[TaskScore] = field(default_factory=list)
    timings_s: dict = field(default_factory=dict)
    failure: str | None = None

    @property
    def ok(self) -> bool:
        """True when the eval completed."""
        return self.status == "ok"

    def classes(self) -> list[str]:
        """The classes of the scored items (``class`` in the eval set), in first-seen order."""
        return list(dict.fromkeys(i.item_class for i in self.items
                                  if i.scored and i.item_class is not None))

    def accuracy(self, item_class: str | None = None) -> list[list[bool]]:
        """``[repeat][scored item]`` correctness (see :mod:`quality.scoring`), of one class
        when ``item_class`` is given."""
        from model_optimizer.quality.scoring import score

        by_id = {item.id: item for item in self.items if item.scored
                 and (item_class is None or item.item_class == item_class)}
        return [[bool(score(by_id[g.id], g.text)) for g in repeat if g.id in by_id]
                for repeat in self.generations]

    def figures(self) -> dict:
        """This deployment's own figures: accuracy per repeat, mean, spread; lm-eval."""
        from statistics import mean

        from model_optimizer.quality.scoring import spread

        per_repeat = [mean(r) for r in self.accuracy() if r]
        failed = sum(1 for repeat in self.generations for g in repeat if not g.ok)
        return {"items": len(self.items), "repeats": len(self.generations),
                "failed_requests": failed,
                "accuracy": mean(per_repeat) if per_repeat else None,
                "accuracy_per_repeat": per_repeat,
                "accuracy_spread": spread(per_repeat) if per_repeat else None,
                "accuracy_by_class": {c: mean(found) for c in self.classes()
                                      if (found := [mean(r) for r in self.accuracy(c) if r])},
                "lm_eval": {s.task: {"metric": s.metric, "value": s.value, "stderr": s.stderr}
                            for s in self.lm_eval}}


def _jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            out.append(json.loads(line))
    return out


def load_eval(path: Path, config: QualityConfig | None = None) -> EvalResult:
    """Read an eval archive back (for use as a baseline). The caller verifies it first."""
    quality = json.loads((path / QUALITY).read_text(encoding="utf-8"))
    status = json.loads((path / "status.json").read_text(encoding="utf-8"))
    items = parse_eval_set((path / EVALSET).read_text(encoding="utf-8"), str(path / EVALSET)) \
        if (path / EVALSET).is_file() and (path / EVALSET).stat().st_size else []
    repeats: dict[int, list[Generation]] = {}
    for line in _jsonl(path / OUTPUTS):
        repeats.setdefault(int(line.get("repeat", 0)), []).append(Generation.from_dict(line))
    lm = [TaskScore(s["task"], s["metric"], s["value"], s.get("stderr"), s.get("samples"),
                    s.get("metrics") or {}) for s in quality.get("lm_eval_scores") or []]
    return EvalResult(status.get("id") or path.name, path, str(status.get("status")),
                      config or QualityConfig(), items,
                      [repeats[r] for r in sorted(repeats)],
                      [Scored.from_dict(s) for s in _jsonl(path / SCORES)],
                      [Scored.from_dict(s) for s in _jsonl(path / SCORES_BASELINE)],
                      lm, quality.get("timings_s") or {}, quality.get("failure"))

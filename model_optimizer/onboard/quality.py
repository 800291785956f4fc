"""The ``quality`` section `mopt init` writes: a gate on by default.

With ``--prompts FILE`` the first :data:`EVAL_PROMPTS` prompts (at most half the file) become
the fixed eval set (``<recipe>.evalset.jsonl``, fidelity against the baseline: top-1
agreement) and the rest the calibration set of ``mopt quantize`` (``<recipe>.calibration.jsonl``,
``quantize.calibration.file``), so no prompt is both. Without prompts the eval set is
``mopt:general``, shipped with mopt (24 items in the classes general, math and code, with
references: the accuracy drop is also judged per class). lm-eval tasks are offered as a
commented line. `mopt optimize`, `sweep` and `tune` refuse an output-changing candidate
without such a gate unless told ``--no-quality-gate``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from model_optimizer.fsutil import atomic_write_text

EVAL_PROMPTS = 32
BUILTIN_EVAL_SET = "mopt:general"
MIN_TOP1_AGREEMENT = 0.9
MAX_ACCURACY_DROP = 0.05


@dataclass(frozen=True)
class QualityChoice:
    """The eval set init chose, where from, and the files to write beside the recipe."""

    eval_set: str
    source: str
    scored: bool                       # items with references (accuracy, per class)
    files: dict[str, str] = field(default_factory=dict)  # name next to the recipe -> text
    calibration_file: str | None = None


def _eval_item(number: int, record: dict) -> dict:
    item: dict = {"id": f"prompt-{number}"}
    if isinstance(record.get("messages"), list):
        item["messages"] = [{"role": str(m.get("role", "user")), "content": m["content"]}
                            for m in record["messages"]]
    else:
        item["prompt"] = record.get("prompt", record.get("text"))
    return item


def _jsonl(records: list[dict]) -> str:
    return "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)


def quality_choice(recipe_path: Path, prompt_file: Path | None,
                   eval_prompts: int = EVAL_PROMPTS) -> QualityChoice:
    """The eval set for a new recipe at ``recipe_path`` (see the module docstring)."""
    if prompt_file is None:
        return QualityChoice(BUILTIN_EVAL_SET, "shipped with mopt: 24 prompts in the classes "
                             "general, math, code (CC0-1.0)", scored=True)
    from model_optimizer.onboard.prompts import read_prompt_records

    records = [record for _text, record in read_prompt_records(prompt_file)]
    count = min(eval_prompts, max(1, len(records) // 2))
    stem = recipe_path.stem
    files = {f"{stem}.evalset.jsonl": _jsonl([_eval_item(n, r) for n, r in
                                              enumerate(records[:count], start=1)])}
    calibration = None
    if records[count:]:
        calibration = f"{stem}.calibration.jsonl"
        files[calibration] = _jsonl(records[count:])
    return QualityChoice(f"{stem}.evalset.jsonl",
                         f"the first {count} of your {len(records)} prompts in {prompt_file}",
                         scored=False, files=files, calibration_file=calibration)


def render_quality(choice: QualityChoice) -> list[str]:
    """The commented ``quality`` (and, with your prompts, ``quantize``) lines."""
    lines = [
        "quality:   # the gate: optimize/sweep/tune keep nothing that changes the answers "
        "without passing it",
        f"  eval_set: {json.dumps(choice.eval_set)}   # {choice.source}",
        "  max_tokens: 16   # tokens generated per eval prompt (greedy, seed 0: repeatable)",
        "  thresholds:   # what a candidate must keep against the baseline's answers",
        f"    min_top1_agreement: {MIN_TOP1_AGREEMENT}   # share of answer positions where "
        "the candidate ranks the baseline's token first",
    ]
    if choice.scored:
        lines.append(f"    max_accuracy_drop: {MAX_ACCURACY_DROP}   # accuracy points lost, "
                     "overall and per class (general, math, code), beyond noise")
    lines.append("  # lm_eval: {tasks: [gsm8k], limit: 200}   # also lm-eval tasks (pip "
                 "install 'lm-eval[api]'; offline: task data already on this machine)")
    if choice.calibration_file:
        lines += ["quantize:", "  calibration:",
                  f"    file: {json.dumps(choice.calibration_file)}   # the rest of your "
                  "prompts: never both calibration and eval"]
    return lines


def write_quality_files(choice_files: dict[str, str], recipe_path: Path) -> list[Path]:
    """Write the eval and calibration sets next to the recipe; their paths."""
    written = []
    for name, text in choice_files.items():
        target = recipe_path.parent / name
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(target, text)
        written.append(target)
    return written

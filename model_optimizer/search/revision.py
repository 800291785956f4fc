"""What a search leaves behind when it succeeds: the chosen configuration written as the next,
validated revision of the recipe (the previous and the written text kept in the archive).
"""

from __future__ import annotations

from pathlib import Path

from model_optimizer.archive import RunArchive, utc_now
from model_optimizer.archive.names import PREVIOUS_RECIPE, WRITTEN_RECIPE
from model_optimizer.archive.versions import vllm_version
from model_optimizer.measure import FIGURE_KEYS
from model_optimizer.recipe import LoadedRecipe
from model_optimizer.recipe.render import model_location
from model_optimizer.recipe.writer import write_revision
from model_optimizer.telemetry import this_hardware


def default_model_config(loaded: LoadedRecipe, explicit: Path | None) -> str | None:
    """Model config for the planner: explicit, else the local model folder's, else None."""
    if explicit is not None:
        return str(explicit)
    candidate = Path(model_location(loaded.resolved, loaded.base_dir)) / "config.json"
    return str(candidate) if candidate.is_file() else None


def write_validated_revision(archive: RunArchive, loaded: LoadedRecipe, changes: dict,
                             figures: dict, *, by: str, output: Path,
                             hardware: str | None = None, quality: dict | None = None,
                             knee: dict | None = None) -> Path:
    """Write ``loaded`` with ``changes`` as its next revision to ``output``, validated by the
    search archived in ``archive`` (which keeps the previous and the written text).
    ``quality``: the quality gate's verdict on the configuration (``GateResult.to_dict()``);
    ``knee``: a fitted knee's verdict (resolved, value, band, share_low, windows)."""
    validated = {
        "at": utc_now(), "run_id": archive.id, "by": by,
        "metrics": {k: figures.get(k) for k in FIGURE_KEYS if k in figures},
        "vllm_version": vllm_version(), "hardware": hardware or this_hardware(),
    }
    if quality is not None:
        validated["quality"] = validated_quality(quality)
    if knee is not None:
        validated["knee"] = knee
    archive.write_text(PREVIOUS_RECIPE, loaded.source_text)
    text = write_revision(loaded, changes, validated, output)
    archive.write_text(WRITTEN_RECIPE, text)
    return output


QUALITY_FIGURES = ("exact_match_rate", "top1_agreement", "mean_kl", "max_kl",
                   "mean_first_divergence", "accuracy", "baseline_accuracy", "accuracy_drop")


def validated_quality(verdict: dict) -> dict:
    """The validated block's quality entry: passed, runs, the key figures, why."""
    figures = verdict.get("figures") or {}
    return {"passed": verdict.get("passed"), "baseline_run": verdict.get("baseline_run"),
            "eval_run": verdict.get("candidate_run"),
            "figures": {k: figures[k] for k in QUALITY_FIGURES if figures.get(k) is not None},
            "reasons": list(verdict.get("reasons") or [])}

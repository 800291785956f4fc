"""What a search leaves behind when it succeeds: the chosen configuration written as the next,
validated revision of the recipe (the previous and the written text kept in the archive),
pinned to the checkpoint it was measured on (``model.pins``, quantized or not; a hub id to
the commit measured), and marked in
bold when an output-changing field changed without a quality gate.
"""

from __future__ import annotations

from pathlib import Path

from model_optimizer.archive import RunArchive, utc_now
from model_optimizer.archive.names import PREVIOUS_RECIPE, WRITTEN_RECIPE
from model_optimizer.archive.versions import vllm_version
from model_optimizer.models.pins import hub_pins, served_pins
from model_optimizer.quality.config import changes_outputs, quality_config
from model_optimizer.recipe import LoadedRecipe
from model_optimizer.recipe.render import model_location
from model_optimizer.recipe.writer import write_revision
from model_optimizer.search.measure import FIGURE_KEYS
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
                             knee: dict | None = None, resolved: bool | None = None,
                             load_average: dict | None = None,
                             decision: dict | None = None) -> Path:
    """Write ``loaded`` with ``changes`` as its next revision to ``output``, validated by the
    search archived in ``archive`` (which keeps the previous and the written text).
    ``quality``: the quality gate's verdict on the configuration (``GateResult.to_dict()``);
    ``knee``: a fitted knee's verdict (resolved, value, band, share_low, windows);
    ``resolved``: the search's verdict on its choice (false: written, not resolved);
    ``load_average``: the machine's load during the search (``search.session.load_summary``);
    ``decision``: the evidence the verdict rests on (the weakest comparison, its interval)."""
    validated = {
        "at": utc_now(), "run_id": archive.id, "by": by,
        "metrics": {k: figures.get(k) for k in FIGURE_KEYS if k in figures},
        "vllm_version": vllm_version(), "hardware": hardware or this_hardware(),
    }
    if quality is not None:
        validated["quality"] = validated_quality(quality)
    elif ungated := ungated_changes(loaded, changes):
        validated["quality"] = {"gated": False, "passed": None, "reasons": [
            f"{NOT_GATED}: {', '.join(ungated)} changed without a quality gate "
            "(--no-quality-gate); its answers were never compared with the baseline's"]}
    changes = {**changes, **pin_changes(loaded, changes, output)}
    if knee is not None:
        validated["knee"] = knee
    if resolved is not None:
        validated["resolved"] = bool(resolved)
    if decision is not None:
        validated["decision"] = decision
    if load_average is not None:
        validated["load_average"] = load_average
    archive.write_text(PREVIOUS_RECIPE, loaded.source_text)
    text = write_revision(loaded, changes, validated, output)
    archive.write_text(WRITTEN_RECIPE, text)
    return output


QUALITY_FIGURES = ("exact_match_rate", "top1_agreement", "mean_kl", "max_kl",
                   "mean_first_divergence", "accuracy", "baseline_accuracy", "accuracy_drop")


NOT_GATED = "**NOT QUALITY-GATED**"


def ungated_changes(loaded: LoadedRecipe, changes: dict) -> list[str]:
    """The output-changing fields among ``changes`` (dotted) when the recipe has no quality
    gate: a revision that changes them says so in bold (``validated.quality``)."""
    if quality_config(loaded.resolved, loaded.base_dir).gate_problem is None:
        return []
    return changes_outputs([".".join(key) for key in changes])


def pin_changes(loaded: LoadedRecipe, changes: dict, output: Path) -> dict:
    """``model.pins`` for the checkpoint the revision serves when ``changes`` bring none: its
    SHA-256 (weights and config, hashed once per process, :mod:`models.pins`), itself as
    the source; for a hub id, the commit its revision names in the local Hugging Face cache
    (what was measured). Nothing when that is unknown or already pinned."""
    if ("model", "pins") in changes:
        return {}
    model = loaded.resolved["model"]
    if ("model", "path") in changes:
        source = str(changes[("model", "path")])
        folder = Path(source) if Path(source).is_absolute() else output.resolve().parent / source
    else:
        source, folder = model["path"], Path(model_location(loaded.resolved, loaded.base_dir))
        if not folder.is_absolute():  # a hub id
            return _hub_pin_change(model, changes.get(("model", "revision"),
                                                      model.get("revision")))
    if not (folder / "config.json").is_file():
        return {}
    pins = served_pins(folder, source, model.get("revision"))
    if (model.get("pins") or {}).get("sha256") == pins["sha256"]:
        return {}
    return {("model", "pins"): pins}


def _hub_pin_change(model: dict, revision: str | None) -> dict:
    pins = hub_pins(model["path"], revision)
    if pins is None or (model.get("pins") or {}).get("commit") == pins["commit"]:
        return {}
    return {("model", "pins"): pins}


def validated_quality(verdict: dict) -> dict:
    """The validated block's quality entry: passed, runs, the key figures (with the accuracy
    drop per eval-set class), why."""
    figures = verdict.get("figures") or {}
    return {"passed": verdict.get("passed"), "baseline_run": verdict.get("baseline_run"),
            "eval_run": verdict.get("candidate_run"),
            "figures": {k: v for k, v in figures.items() if v is not None and (
                k in QUALITY_FIGURES or k.startswith("accuracy_drop."))},
            "reasons": list(verdict.get("reasons") or [])}

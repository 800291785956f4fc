"""An archive's row of the run index, written by the archive itself: ``entry`` in its
``status.json``.

Each kind of archive (a run or bench, a sweep, a tune, a rollback) knows its own layout;
the index (``archive/index.py``) knows none of them. So each kind writes the same small
record, :data:`ENTRY_FIELDS`, as it learns it (what was run when it starts, the figures when
it is sealed), and the index reads that one format plus ``status.json``.

- a run (``runner``): from ``run.json`` and the resolved recipe when it starts
  (:func:`run_fields`), the metrics when it is sealed (:func:`metric_fields`);
- a search (``search.session``) and a rollback (``history.rollback``): the recipe when they
  start, the written revision's when they are sealed (:func:`revision_fields`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import yaml

#: where in status.json an archive keeps its index entry
ENTRY_KEY = "entry"
#: the figures the index keeps of each archive
METRIC_FIELDS = ("qps", "output_tok_s", "ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms",
                 "e2e_p50_ms")
#: everything an archive may say about itself in its entry
ENTRY_FIELDS = ("created_at", "recipe_name", "recipe_revision", "recipe_file", "recipe_hash",
                "parent", "vllm_version", "hardware", *METRIC_FIELDS, "slo_met")
#: recipe keys that are bookkeeping, not configuration (equal configurations hash equal)
CONFIG_HASH_IGNORES = ("name", "description", "revision", "validated")


def config_hash(resolved: dict | None) -> str | None:
    """16 hex digits identifying a configuration: the resolved recipe without its name,
    description, revision and validated block (equal configurations hash equal)."""
    if not isinstance(resolved, dict):
        return None
    core = {k: v for k, v in resolved.items() if k not in CONFIG_HASH_IGNORES}
    text = json.dumps(core, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def checked(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` if every key is an entry field; a ValueError naming the others."""
    unknown = sorted(set(fields) - set(ENTRY_FIELDS))
    if unknown:
        raise ValueError(f"not index entry fields: {', '.join(unknown)}")
    return fields


def metric_fields(metrics: dict | None) -> dict[str, Any]:
    """The index's figures from a run's metrics (or a validated block's)."""
    metrics = metrics or {}
    out: dict[str, Any] = {k: metrics.get(k) for k in METRIC_FIELDS}
    slo = metrics.get("slo_met")
    out["slo_met"] = None if slo is None else int(bool(slo))
    return out


def run_fields(run: dict, resolved: dict | None, hardware: str | None) -> dict[str, Any]:
    """What a run's entry says when it starts, from its ``run.json`` record, the resolved
    recipe (hashed with the workload as run) and the hardware label."""
    if resolved is not None and isinstance(run.get("workload"), dict):
        resolved = {**resolved, "workload": run["workload"]}
    return {"created_at": run.get("created_at"), "recipe_name": run.get("recipe_name"),
            "recipe_revision": run.get("recipe_revision"),
            "recipe_file": run.get("recipe_file"), "recipe_hash": config_hash(resolved),
            "vllm_version": (run.get("versions") or {}).get("vllm"), "hardware": hardware}


def revision_fields(written_text: str | None) -> dict[str, Any]:
    """What a search's or a rollback's entry says of the revision it wrote: its number, its
    configuration's hash and its validated block's figures, vLLM and hardware. Empty when
    nothing was written."""
    if written_text is None:
        return {}
    try:
        written = yaml.safe_load(written_text)
    except yaml.YAMLError:
        return {}
    if not isinstance(written, dict):
        return {}
    validated = written.get("validated") or {}
    return {"recipe_revision": written.get("revision", 1),
            "recipe_hash": config_hash(_resolve_quietly(written)),
            "vllm_version": validated.get("vllm_version"),
            "hardware": validated.get("hardware"), **metric_fields(validated.get("metrics"))}


def _resolve_quietly(document: dict) -> dict:
    try:
        from model_optimizer.recipe import resolve  # lazy: keeps importing archive light

        return resolve(document)
    except Exception:  # noqa: BLE001 - an odd recipe only loses its hash
        return document

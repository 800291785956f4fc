"""`mopt init`: a starting recipe for a model folder, with the planner's choices explained.

From the folder's ``config.json`` (and its ``quantization_config``, when the checkpoint is
already quantized), the accelerator named or seen, and the workload (token lengths, or
lengths measured on the user's own prompt file), this writes a recipe whose every value is
commented: where it comes from and what to change. The result validates and plans.

Choices (each is a plan, measured later by ``apply``/``sweep``/``optimize``):

- ``max_model_len``: the model's ``max_position_embeddings``, lowered to the longest request
  the KV cache holds as vLLM checks it (whole 256-token steps; sliding-window and Mamba
  layers counted as vLLM allocates them) and never below one workload sequence.
- ``max_num_seqs``: the planner's largest batch without preemption, capped at vLLM's own
  default for the accelerator (more would only queue); its comment names any architecture
  the planner assumed and, for a mixture-of-experts model, the experts a step reads.
- CPU engine: block size 32 (its attention backend needs a multiple of 32), eager mode (no
  torch.compile warm-up), ``VLLM_CPU_KVCACHE_SPACE`` a quarter of the RAM (1 to 16 GiB).
- ``quality``: a gate on by default (:mod:`onboard.quality`): your prompts' first ones or the
  eval set shipped with mopt, and thresholds; the eval and calibration sets are in ``files``.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from model_optimizer.errors import UsageError
from model_optimizer.onboard.detect import SeenHardware
from model_optimizer.onboard.quality import quality_choice, render_quality
from model_optimizer.plan import estimate, load_model_config
from model_optimizer.plan.accelerators import CPU_BLOCK_MULTIPLE
from model_optimizer.plan.checkpoint_files import CheckpointFiles, read_checkpoint
from model_optimizer.recipe import CURRENT_VERSION, load_recipe_text
from model_optimizer.recipe.schema import schemas_dir

CPU_BLOCK_SIZE = CPU_BLOCK_MULTIPLE  # the smallest block size the CPU engine takes
LEN_STEP = 256
_QUANT_METHODS = {"compressed-tensors": "compressed-tensors", "gptq": "gptq", "awq": "awq",
                  "fp8": "fp8", "modelopt": "modelopt", "mxfp4": "mxfp4"}


@dataclass(frozen=True)
class WorkloadChoice:
    """Request lengths to plan and measure with, and where they came from."""

    prompt_tokens: int = 512
    output_tokens: int = 128
    source: str = "flags (or defaults)"
    prompt_file: Path | None = None
    warning: str | None = None  # what the user must know about these lengths


@dataclass(frozen=True)
class InitResult:
    """The recipe text written, and the plan it was checked with."""

    text: str
    name: str
    plan_verdict: str
    choices: dict[str, Any]
    files: dict[str, str] = field(default_factory=dict)  # eval/calibration sets to write


def recipe_name(model_dir: Path) -> str:
    """A valid recipe name from the folder name (letters, digits, '.', '_', '-')."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", model_dir.resolve().name).strip("-._") or "model"
    return name[:64]


def checkpoint_quantization(config: dict) -> str:
    """The recipe's ``model.quantization`` for a checkpoint (``none`` when unquantized)."""
    method = (config.get("quantization_config") or {}).get("quant_method")
    return _QUANT_METHODS.get(str(method), "none") if method else "none"


def _dtype(config: dict) -> str:
    found = config.get("torch_dtype") or config.get("dtype")
    return found if found in ("bfloat16", "float16") else "bfloat16"


def _base_document(name: str, model_path: str, config: dict, hw: SeenHardware,
                   work: WorkloadChoice) -> dict[str, Any]:
    cpu = hw.accelerator == "cpu"
    engine: dict[str, Any] = {"kv_cache_dtype": "auto", "max_model_len": None,
                              "max_num_seqs": None}
    if cpu:
        kv_space = max(1, min(16, int((hw.memory_gib or 4) // 4)))
        engine.update(block_size=CPU_BLOCK_SIZE, enforce_eager=True,
                      env={"VLLM_CPU_KVCACHE_SPACE": str(kv_space)})
    else:
        engine["gpu_memory_utilization"] = 0.9
    hardware: dict[str, Any] = {"accelerator": hw.accelerator, "count": hw.count}
    if hw.memory_gib is not None:
        hardware["memory_gib"] = hw.memory_gib
    return {
        "recipe_version": 1, "name": name, "revision": 1,
        "model": {"path": model_path, "dtype": _dtype(config),
                  "quantization": checkpoint_quantization(config), "served_name": name},
        "engine": engine, "hardware": hardware,
        "workload": {"endpoint": "completions", "prompt_tokens": work.prompt_tokens,
                     "output_tokens": work.output_tokens, "concurrency": None,
                     "num_requests": 200, "warmup_requests": 4, "seed": 0},
    }


def _longest_fitting_len(doc: dict, config: dict, low: int, high: int,
                         files: CheckpointFiles | None) -> int:
    """The longest max_model_len in whole LEN_STEPs between ``low`` and ``high`` that the
    plan fits, else ``low``: bisected, because windowed and Mamba layers make a request's
    KV cost non-linear in its length."""
    first, last = -(-low // LEN_STEP), high // LEN_STEP
    best = low
    while first <= last:
        mid = (first + last) // 2
        doc["engine"]["max_model_len"] = mid * LEN_STEP
        if estimate(doc, config, files).fits_max_model_len:
            best, first = mid * LEN_STEP, mid + 1
        else:
            last = mid - 1
    return best


def _choose_lengths(doc: dict, config: dict, files: CheckpointFiles | None = None
                    ) -> dict[str, Any]:
    """Fill max_model_len and max_num_seqs from the planner (weights from the folder's
    safetensors headers when present); return the evidence."""
    seq_len = doc["workload"]["prompt_tokens"] + doc["workload"]["output_tokens"]
    limit = config.get("max_position_embeddings") or max(seq_len, 4096)
    doc["engine"]["max_model_len"] = limit
    report = estimate(doc, config, files)
    if report.kv_blocks and not report.fits_max_model_len:
        doc["engine"]["max_model_len"] = min(limit, _longest_fitting_len(doc, config, seq_len,
                                                                         limit, files))
        report = estimate(doc, config, files)
    default = report.recipe_max_num_seqs
    best = max(1, min(report.max_seqs_no_preemption, default))
    doc["engine"]["max_num_seqs"] = best
    report = estimate(doc, config, files)
    return {"position_limit": limit, "kv_tokens": report.kv_tokens,
            "max_seqs_no_preemption": report.max_seqs_no_preemption,
            "vllm_default_max_num_seqs": default, "verdict": report.verdict,
            "problems": report.problems, "weights_gib": report.weight_bytes / 1024**3,
            "assumptions": [w for w in report.warnings if "is not one the planner models"
                            in w or "unknown layout" in w],
            "moe": _moe_note(report, best)}


def _moe_note(report: Any, batch: int) -> str | None:
    """What a decode step at ``batch`` reads of a mixture-of-experts model."""
    if not report.moe or not report.decode_floors:
        return None
    floor = next((f for f in report.decode_floors if f.batch == batch), report.decode_floors[-1])
    return (f"MoE ({report.moe}): at {floor.batch} sequences a step touches most experts "
            f"(uniform routing), TPOT floor {floor.tpot_floor_ms:.2f} ms")


def build_init_recipe(model_dir: Path, recipe_path: Path, hw: SeenHardware,
                      work: WorkloadChoice, name: str | None = None) -> InitResult:
    """The commented recipe text for ``model_dir``, to be written at ``recipe_path``.

    Raises UsageError (via PlanError) when the folder has no usable config.json.
    """
    config = load_model_config(model_dir)
    name = name or recipe_name(model_dir)
    rel = os.path.relpath(model_dir.resolve(), recipe_path.resolve().parent)
    doc = _base_document(name, rel, config, hw, work)
    choices = _choose_lengths(doc, config, read_checkpoint(model_dir))
    quality = quality_choice(recipe_path, work.prompt_file)
    text = render_commented(doc, config, hw, work, choices,
                            schema_reference(recipe_path.resolve().parent))
    text += "\n".join(render_quality(quality)) + "\n"
    load_recipe_text(text, str(recipe_path))  # validates: RecipeError if anything is off
    return InitResult(text, name, choices["verdict"], choices, quality.files)


def schema_reference(recipe_dir: Path) -> str | None:
    """The ``$schema`` path for a recipe in ``recipe_dir``: a checkout's ``schemas/`` file,
    relative; None for an installed mopt, whose packaged copy (``_schemas`` in the install
    folder) moves or vanishes with the next install or virtual environment."""
    schema = schemas_dir() / f"recipe.v{CURRENT_VERSION}.json"
    if schema.parent.name != "schemas":
        return None
    return os.path.relpath(schema, recipe_dir)


def _yaml_value(value: Any) -> str:
    return json.dumps(value) if isinstance(value, str | bool) or value is None else str(value)


def render_commented(doc: dict, config: dict, hw: SeenHardware, work: WorkloadChoice,
                     choices: dict, schema_ref: str | None = "../schemas/recipe.v1.json") -> str:
    """The recipe as YAML with a comment on every value (see :mod:`explain`); an editor's
    ``$schema`` line first when ``schema_ref`` is given."""
    from model_optimizer.onboard.explain import comments

    notes = comments(doc, config, hw, work, choices)
    schema = [f"# yaml-language-server: $schema={schema_ref}"] if schema_ref else []
    lines = [*schema,
             f"# Written by `mopt init` for {doc['model']['path']} on {hw.description}.",
             "# Every value is a starting point: `mopt plan` checks it, `mopt optimize` "
             "measures it.",
             f"recipe_version: {doc['recipe_version']}", f"name: {doc['name']}",
             f"revision: {doc['revision']}"]
    for section in ("model", "engine", "hardware", "workload"):
        lines.append(f"{section}:")
        for key, value in doc[section].items():
            if isinstance(value, dict):
                lines.append(f"  {key}:" + _comment(notes.get(f"{section}.{key}")))
                lines += [f"    {k}: {_yaml_value(v)}" for k, v in value.items()]
                continue
            lines.append(f"  {key}: {_yaml_value(value)}" + _comment(notes.get(f"{section}.{key}")))
    lines += notes["__tail__"]
    return "\n".join(lines) + "\n"


def _comment(note: str | None) -> str:
    return f"   # {note}" if note else ""


def with_prompt_file(work: WorkloadChoice, path: Path, model_dir: Path) -> WorkloadChoice:
    """Lengths measured on a prompt file in the model's own tokenizer (median prompt)."""
    from model_optimizer.onboard.prompts import measure_prompt_file

    stats = measure_prompt_file(path, model_dir)
    if stats.count == 0:
        raise UsageError(f"{path}: no prompts found (one JSON object per line with 'prompt')")
    unit, warning = "tokens", None
    if not stats.exact:
        unit = "words"
        warning = (f"{model_dir} has no tokenizer.json: the prompt lengths of {path} are "
                   "whitespace words, not tokens (a token is often shorter than a word); "
                   "check workload.prompt_tokens, or add the tokenizer and run init again")
    return replace(work, prompt_tokens=max(1, stats.median_tokens), prompt_file=path,
                   source=f"{stats.count} prompts in {path} ({stats.how}), median "
                          f"{stats.median_tokens}, longest {stats.max_tokens} {unit}",
                   warning=warning)

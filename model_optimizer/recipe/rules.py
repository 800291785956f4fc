"""Cross-field rules the JSON Schema cannot express, checked on the resolved recipe."""

from __future__ import annotations

from typing import Any

from model_optimizer.errors import Diagnostic
from model_optimizer.plan.accelerators import knob_multiple
from model_optimizer.recipe.flags import known_flags
from model_optimizer.recipe.knobs import KNOBS
from model_optimizer.recipe.placement_rules import placement_rules
from model_optimizer.recipe.schema import subschema
from model_optimizer.recipe.security import check_security, flag_name
from model_optimizer.recipe.sweep_rules import (
    CATEGORICAL_KNOBS,
    NUMERIC_KNOBS,
    SWEEPABLE,
    param_problem,
    start_above_max,
)
from model_optimizer.recipe.validate import did_you_mean
from model_optimizer.recipe.workload_rules import workload_rules
from model_optimizer.recipe.yamlsource import Path_, SourceMap

__all__ = ["BOOL_KNOBS", "CATEGORICAL_KNOBS", "FIRST_CLASS_FLAGS", "FLOAT_KNOBS",
           "NUMERIC_KNOBS", "check_rules"]
#: engine knobs that take fractional values; every other numeric knob is an integer
FLOAT_KNOBS = frozenset(k.name for k in KNOBS if k.sweep == "numeric" and k.kind == "float")
#: engine knobs that are true or false (a tune's choices for them are booleans)
BOOL_KNOBS = frozenset(k.name for k in KNOBS if k.field.startswith("engine.")
                       and k.kind == "bool")

#: flags a recipe sets through a first-class field: extra_args may not set them again
FIRST_CLASS_FLAGS = {k.flag: k.field for k in KNOBS if k.exclusive}


def check_rules(recipe: dict[str, Any], smap: SourceMap) -> list[Diagnostic]:
    """Every cross-field problem of a resolved (defaults filled) recipe.

    Also run on recipes that failed the schema, so all problems are reported at once; a
    rule whose inputs are malformed is skipped.
    """
    problems: list[Diagnostic] = []
    for rule in (_batch_rule, _cpu_rules, _workload_rules, _extra_args_rule,
                 _sweep_rules, _tune_rules, _quality_rules, _parallel_rule, workload_rules,
                 placement_rules):
        try:
            problems.extend(rule(recipe, smap))
        except (KeyError, TypeError, AttributeError, ValueError):
            # The rule's inputs are themselves invalid; the schema has reported them.
            continue
    return problems + check_security(recipe, smap)


def _batch_rule(recipe: dict[str, Any], smap: SourceMap) -> list[Diagnostic]:
    engine = recipe["engine"]
    seqs, tokens = engine.get("max_num_seqs"), engine.get("max_num_batched_tokens")
    if seqs is not None and tokens is not None and tokens < seqs:
        return [smap.diagnostic(
            ("engine", "max_num_batched_tokens"),
            f"max_num_batched_tokens ({tokens}) is smaller than max_num_seqs ({seqs})",
            "vLLM needs at least one token per sequence in a step: raise "
            "max_num_batched_tokens or lower max_num_seqs")]
    return []


def _cpu_rules(recipe: dict[str, Any], smap: SourceMap) -> list[Diagnostic]:
    if recipe["hardware"]["accelerator"] != "cpu":
        return []
    engine, out = recipe["engine"], []
    block, multiple = engine.get("block_size"), knob_multiple("block_size", "cpu")
    if block is not None and multiple and block % multiple:
        out.append(smap.diagnostic(
            ("engine", "block_size"),
            f"block_size {block} is not a multiple of {multiple}, which vLLM's CPU engine "
            f"requires", f"use {max(multiple, round(block / multiple) * multiple)}"))
    space = engine["env"].get("VLLM_CPU_KVCACHE_SPACE")
    if space is not None and not str(space).strip().isdigit():
        out.append(smap.diagnostic(
            ("engine", "env", "VLLM_CPU_KVCACHE_SPACE"),
            f"VLLM_CPU_KVCACHE_SPACE must be a whole number of GiB, got {space!r}",
            "vLLM's CPU engine rejects fractions: use e.g. '1' or '2'"))
    return out


def _workload_rules(recipe: dict[str, Any], smap: SourceMap) -> list[Diagnostic]:
    workload, out = recipe["workload"], []
    if workload["shared_prefix_tokens"] >= workload["prompt_tokens"]:
        out.append(smap.diagnostic(
            ("workload", "shared_prefix_tokens"),
            f"shared_prefix_tokens ({workload['shared_prefix_tokens']}) must be smaller than "
            f"prompt_tokens ({workload['prompt_tokens']})",
            "the shared prefix is part of the prompt"))
    if workload.get("num_requests") is None and workload.get("duration_s") is None:
        out.append(smap.diagnostic(
            ("workload",), "the load has no end: num_requests and duration_s are both null",
            "set at least one of them"))
    if workload.get("target_half_width") and workload.get("duration_s") is None:
        out.append(smap.diagnostic(
            ("workload", "target_half_width"),
            "target_half_width needs duration_s (the shortest window before precision is "
            "checked)", "set workload.duration_s, e.g. 20"))
    return out


def _extra_args_rule(recipe: dict[str, Any], smap: SourceMap) -> list[Diagnostic]:
    out = []
    for flag in recipe["engine"]["extra_args"]:
        name = flag_name(flag)
        if name in FIRST_CLASS_FLAGS:
            out.append(smap.diagnostic(
                ("engine", "extra_args", flag), f"'{name}' is a first-class recipe field",
                f"set {FIRST_CLASS_FLAGS[name]} instead", prefer_key=True))
    return out


def flag_warnings(recipe: dict[str, Any], smap: SourceMap) -> list[Diagnostic]:
    """``extra_args`` flags the installed vLLM does not list (warnings, not errors)."""
    try:
        names = {flag_name(flag) for flag in recipe["engine"]["extra_args"]}
    except (KeyError, TypeError, AttributeError):
        return []
    if not names:
        return []
    known, source = known_flags(names)
    out = []
    for flag in recipe["engine"]["extra_args"]:
        name = flag_name(flag)
        if name not in known and name not in FIRST_CLASS_FLAGS:
            hint = did_you_mean(name, sorted(known)) or "see `vllm serve --help`"
            out.append(smap.diagnostic(("engine", "extra_args", flag),
                                       f"'{name}' is not a server flag of {source}; vLLM "
                                       "will refuse it at launch if it is unknown there too",
                                       hint, prefer_key=True))
    return out


def _sweep_rules(recipe: dict[str, Any], smap: SourceMap) -> list[Diagnostic]:
    sweep, out = recipe["sweep"], []
    problem = param_problem(sweep["param"], sweep.get("values"))
    if problem is not None:
        out.append(smap.diagnostic(("sweep", "param"), problem.message, problem.hint))
    above = start_above_max(sweep.get("start"), sweep.get("max"))
    if above is not None:
        out.append(smap.diagnostic(("sweep", "max"), above.message, above.hint))
    return out


def _quality_rules(recipe: dict[str, Any], smap: SourceMap) -> list[Diagnostic]:
    """Thresholds need something to evaluate (an eval set or lm-eval tasks)."""
    quality = recipe.get("quality") or {}
    thresholds = {k: v for k, v in (quality.get("thresholds") or {}).items() if v is not None}
    if thresholds and not quality.get("eval_set") and not (quality.get("lm_eval") or {}).get(
            "tasks"):
        first = next(iter(thresholds))
        return [smap.diagnostic(
            ("quality", "thresholds", first),
            "quality thresholds are set but nothing is evaluated",
            "set quality.eval_set (a JSONL file) or quality.lm_eval.tasks")]
    return []


def _tune_rules(recipe: dict[str, Any], smap: SourceMap) -> list[Diagnostic]:
    """Each knob of ``tune.params`` must be one mopt can set, with a range optuna can search."""
    tune = recipe["tune"]
    out: list[Diagnostic] = []
    accelerator = recipe["hardware"]["accelerator"]
    for name, spec in tune["params"].items():
        path = ("tune", "params", name)
        try:
            problems = _tune_param_problems(name, spec, accelerator, tune["sampler"])
        except (KeyError, TypeError, AttributeError, ValueError):
            continue  # malformed spec: the schema has reported it
        out.extend(smap.diagnostic(path + tuple(where), message, hint, prefer_key=not where)
                   for where, message, hint in problems)
    return out


_Problem = tuple[Path_, str, str]


def _tune_param_problems(name: str, spec: dict[str, Any], accelerator: str,
                         sampler: str) -> list[_Problem]:
    """(sub-path, message, hint) for everything wrong with one tuned knob."""
    knobs = SWEEPABLE
    if name not in knobs:
        hint = did_you_mean(name, list(knobs)) or f"choose from {', '.join(knobs)}"
        return [((), f"'{name}' is not an engine knob mopt can tune", hint)]
    if spec["type"] == "categorical":
        return _tune_choices_problems(name, spec, accelerator)
    return _tune_range_problems(name, spec, accelerator, sampler)


def _tune_choices_problems(name: str, spec: dict[str, Any], accelerator: str) -> list[_Problem]:
    if any(spec.get(key) is not None for key in ("low", "high", "step")):
        return [((), f"'{name}' is categorical here: it takes choices, not low/high/step",
                 "drop low/high/step, or use type: int with low and high")]
    choices = spec.get("choices")
    if not choices:
        return [((), f"'{name}' is categorical and needs choices",
                 f"e.g. choices: {_example_choices(name)}")]
    wrong = [c for c in choices if not _valid_choice(name, c, accelerator)]
    if not wrong:
        return []
    return [(("choices",), f"{', '.join(map(repr, wrong))}: not valid for engine.{name}"
             + _multiple_note(name, accelerator), f"e.g. choices: {_example_choices(name)}")]


def _multiple_note(name: str, accelerator: str) -> str:
    multiple = knob_multiple(name, accelerator)
    if not multiple:
        return ""
    return f" on the {accelerator.upper()} engine (multiples of {multiple} only)"


def _valid_choice(name: str, value: object, accelerator: str) -> bool:
    if name in BOOL_KNOBS:
        return isinstance(value, bool)
    if name == "kv_cache_dtype":
        return value in (subschema(("engine", "kv_cache_dtype")) or {}).get("enum", [])
    if name == "long_prefill_token_threshold" and value == 0 and not isinstance(value, bool):
        return True  # 0 turns the cap off
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return False
    if name == "gpu_memory_utilization":
        return value <= 1
    if not float(value).is_integer():
        return False
    return not int(value) % (knob_multiple(name, accelerator) or 1)


def _tune_range_problems(name: str, spec: dict[str, Any], accelerator: str,
                         sampler: str) -> list[_Problem]:
    kind, low, high, step = spec["type"], spec.get("low"), spec.get("high"), spec.get("step")
    if name in CATEGORICAL_KNOBS:
        return [(("type",), f"'{name}' is categorical", "use type: categorical with "
                 f"choices: {_example_choices(name)}")]
    if spec.get("choices") is not None:
        return [(("choices",), f"type {kind} takes low and high, not choices",
                 "use type: categorical to list values")]
    if low is None or high is None:
        return [((), f"type {kind} needs low and high", "e.g. low: 1, high: 64")]
    out: list[_Problem] = []
    if low >= high:
        out.append((("high",), f"high ({high}) must be above low ({low})", "swap them"))
    integer = name not in FLOAT_KNOBS
    if integer and kind.startswith("float"):
        out.append((("type",), f"engine.{name} takes integers", "use int or int_log"))
    if not integer and kind.startswith("int"):
        out.append((("type",), f"engine.{name} is a fraction", "use float"))
    if kind.startswith("int") and not all(float(v).is_integer() for v in (low, high, step or 1)):
        out.append(((), f"type {kind} needs whole low, high and step", "drop the decimals"))
    out.extend(_tune_scale_problems(name, kind, low, step, sampler))
    if name == "gpu_memory_utilization" and not (low > 0 and high <= 1):
        out.append(((), "gpu_memory_utilization is a fraction in (0, 1]", "e.g. 0.8 to 0.95"))
    multiple = knob_multiple(name, accelerator)
    if multiple and (kind == "int_log" or low % multiple or (step or 1) % multiple):
        out.append(((), f"the {accelerator.upper()} engine needs {name} in multiples of "
                        f"{multiple}",
                    f"use type: int with low a multiple of {multiple} and step: {multiple}, "
                    f"or type: categorical with choices: {_example_choices(name)}"))
    return out


def _tune_scale_problems(name: str, kind: str, low: float, step: float | None,
                         sampler: str) -> list[_Problem]:
    out: list[_Problem] = []
    if kind.endswith("_log") and low <= 0:
        out.append((("low",), f"a log scale needs low > 0, got {low}", "start at 1"))
    if kind.endswith("_log") and step is not None:
        out.append((("step",), "a log scale takes no step", f"use type: {kind[:-4]} for a step"))
    if sampler == "grid" and kind.startswith("float") and (step is None or kind == "float_log"):
        out.append(((), f"sampler grid needs a finite set of values for {name}",
                    "use type: float with a step, or categorical choices"))
    return out


def _example_choices(name: str) -> str:
    return {"kv_cache_dtype": "[auto, fp8]", "block_size": "[32, 64, 128]",
            "gpu_memory_utilization": "[0.8, 0.9]"}.get(
        name, "[false, true]" if name in CATEGORICAL_KNOBS else "[8, 16, 32]")


def _parallel_rule(recipe: dict[str, Any], smap: SourceMap) -> list[Diagnostic]:
    tp, count = recipe["engine"]["tensor_parallel_size"], recipe["hardware"]["count"]
    if tp > count:
        return [smap.diagnostic(
            ("engine", "tensor_parallel_size"),
            f"tensor_parallel_size {tp} needs {tp} accelerators; hardware.count is {count}",
            "raise hardware.count or lower tensor_parallel_size")]
    return []

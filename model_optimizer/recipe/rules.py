"""Cross-field rules the JSON Schema cannot express, checked on the resolved recipe."""

from __future__ import annotations

from model_optimizer.archive.redact import is_reference, is_secret_name
from model_optimizer.errors import Diagnostic
from model_optimizer.recipe.validate import did_you_mean
from model_optimizer.recipe.vllm_flags import KNOWN_FLAGS
from model_optimizer.recipe.yamlsource import SourceMap

#: engine knobs a sweep may move; numeric ones grow, categorical ones take `sweep.values`
NUMERIC_KNOBS = ("max_num_seqs", "max_num_batched_tokens", "block_size",
                 "gpu_memory_utilization", "max_model_len")
CATEGORICAL_KNOBS = ("kv_cache_dtype", "enable_prefix_caching", "enforce_eager")

#: flags a recipe sets through a first-class field: extra_args may not set them again
FIRST_CLASS_FLAGS = {
    "model": "model.path", "revision": "model.revision", "quantization": "model.quantization",
    "dtype": "model.dtype", "served-model-name": "model.served_name",
    "tokenizer": "model.tokenizer", "trust-remote-code": "model.trust_remote_code",
    "kv-cache-dtype": "engine.kv_cache_dtype", "block-size": "engine.block_size",
    "max-model-len": "engine.max_model_len", "max-num-seqs": "engine.max_num_seqs",
    "max-num-batched-tokens": "engine.max_num_batched_tokens",
    "gpu-memory-utilization": "engine.gpu_memory_utilization",
    "enable-prefix-caching": "engine.enable_prefix_caching",
    "tensor-parallel-size": "engine.tensor_parallel_size",
    "enforce-eager": "engine.enforce_eager", "host": "engine.host", "port": "engine.port",
}


def check_rules(recipe: dict, smap: SourceMap) -> list[Diagnostic]:
    """Every cross-field problem of a resolved (defaults filled) recipe.

    Also run on recipes that failed the schema, so all problems are reported at once; a
    rule whose inputs are malformed is skipped.
    """
    problems: list[Diagnostic] = []
    for rule in (_batch_rule, _cpu_rules, _length_rules, _workload_rules, _extra_args_rule,
                 _sweep_rules, _parallel_rule, _secret_rule):
        try:
            problems.extend(rule(recipe, smap))
        except (KeyError, TypeError, AttributeError, ValueError):
            # The rule's inputs are themselves invalid; the schema has reported them.
            continue
    return problems


def _batch_rule(recipe: dict, smap: SourceMap) -> list[Diagnostic]:
    engine = recipe["engine"]
    seqs, tokens = engine.get("max_num_seqs"), engine.get("max_num_batched_tokens")
    if seqs is not None and tokens is not None and tokens < seqs:
        return [smap.diagnostic(
            ("engine", "max_num_batched_tokens"),
            f"max_num_batched_tokens ({tokens}) is smaller than max_num_seqs ({seqs})",
            "vLLM needs at least one token per sequence in a step: raise "
            "max_num_batched_tokens or lower max_num_seqs")]
    return []


def _cpu_rules(recipe: dict, smap: SourceMap) -> list[Diagnostic]:
    if recipe["hardware"]["accelerator"] != "cpu":
        return []
    engine, out = recipe["engine"], []
    block = engine.get("block_size")
    if block is not None and block % 32:
        out.append(smap.diagnostic(
            ("engine", "block_size"),
            f"block_size {block} is not a multiple of 32, which vLLM's CPU engine requires",
            f"use {max(32, round(block / 32) * 32)}"))
    space = engine["env"].get("VLLM_CPU_KVCACHE_SPACE")
    if space is not None and not str(space).strip().isdigit():
        out.append(smap.diagnostic(
            ("engine", "env", "VLLM_CPU_KVCACHE_SPACE"),
            f"VLLM_CPU_KVCACHE_SPACE must be a whole number of GiB, got {space!r}",
            "vLLM's CPU engine rejects fractions: use e.g. '1' or '2'"))
    return out


def _length_rules(recipe: dict, smap: SourceMap) -> list[Diagnostic]:
    workload, max_len = recipe["workload"], recipe["engine"].get("max_model_len")
    needed = workload["prompt_tokens"] + workload["output_tokens"]
    if max_len is not None and max_len < needed:
        return [smap.diagnostic(
            ("engine", "max_model_len"),
            f"max_model_len {max_len} is shorter than the workload's prompt + output "
            f"({workload['prompt_tokens']} + {workload['output_tokens']} = {needed})",
            f"raise max_model_len to at least {needed} or shorten the workload")]
    return []


def _workload_rules(recipe: dict, smap: SourceMap) -> list[Diagnostic]:
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
    return out


def _extra_args_rule(recipe: dict, smap: SourceMap) -> list[Diagnostic]:
    out = []
    for flag in recipe["engine"]["extra_args"]:
        name = str(flag).removeprefix("--")
        path = ("engine", "extra_args", flag)
        if name in FIRST_CLASS_FLAGS:
            out.append(smap.diagnostic(
                path, f"'{name}' is a first-class recipe field",
                f"set {FIRST_CLASS_FLAGS[name]} instead", prefer_key=True))
        elif name not in KNOWN_FLAGS:
            hint = did_you_mean(name, sorted(KNOWN_FLAGS)) or "see `vllm serve --help`"
            out.append(smap.diagnostic(path, f"'{name}' is not a vLLM server flag mopt knows",
                                       hint, prefer_key=True))
    return out


def _sweep_rules(recipe: dict, smap: SourceMap) -> list[Diagnostic]:
    sweep, out = recipe["sweep"], []
    param = sweep["param"]
    if param not in NUMERIC_KNOBS + CATEGORICAL_KNOBS:
        hint = did_you_mean(param, list(NUMERIC_KNOBS + CATEGORICAL_KNOBS))
        out.append(smap.diagnostic(
            ("sweep", "param"), f"'{param}' is not an engine knob mopt can sweep",
            hint or f"choose one of {', '.join(NUMERIC_KNOBS + CATEGORICAL_KNOBS)}"))
    elif param in CATEGORICAL_KNOBS and not sweep.get("values"):
        out.append(smap.diagnostic(
            ("sweep", "param"), f"'{param}' is categorical and needs sweep.values",
            f"e.g. values: {_example_values(param)}"))
    start, maximum = sweep.get("start"), sweep.get("max")
    if start is not None and maximum is not None and maximum < start:
        out.append(smap.diagnostic(("sweep", "max"), f"sweep.max ({maximum}) is below "
                                   f"sweep.start ({start})", "swap them or raise max"))
    return out


def _example_values(param: str) -> str:
    return "[auto, fp8]" if param == "kv_cache_dtype" else "[false, true]"


def _parallel_rule(recipe: dict, smap: SourceMap) -> list[Diagnostic]:
    tp, count = recipe["engine"]["tensor_parallel_size"], recipe["hardware"]["count"]
    if tp > count:
        return [smap.diagnostic(
            ("engine", "tensor_parallel_size"),
            f"tensor_parallel_size {tp} needs {tp} accelerators; hardware.count is {count}",
            "raise hardware.count or lower tensor_parallel_size")]
    return []


def _secret_rule(recipe: dict, smap: SourceMap) -> list[Diagnostic]:
    """Secrets never sit in a recipe (recipes are archived and shared): use ${VAR}."""
    out = []
    engine = recipe["engine"]
    for section, mapping in (("env", engine["env"]), ("extra_args", engine["extra_args"])):
        for name, value in mapping.items():
            if is_secret_name(str(name)) and not is_reference(value):
                out.append(smap.diagnostic(
                    ("engine", section, name),
                    f"'{name}' looks like a secret written into the recipe",
                    f"keep it in mopt's environment and write '${{{_env_name(name)}}}' here; "
                    "mopt expands it at launch and never archives it"))
    return out


def _env_name(name: str) -> str:
    return str(name).upper().replace("-", "_")

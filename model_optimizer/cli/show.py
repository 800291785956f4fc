"""`mopt show`: the resolved recipe, the exact vLLM command it maps to, and its vLLM config."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
import yaml

from model_optimizer.cli.common import (
    JsonOption,
    SetOption,
    console,
    handle_errors,
    print_json,
)
from model_optimizer.cli.current import OptionalRecipeArg, load_chosen
from model_optimizer.engine.placement import resolve_placement
from model_optimizer.recipe.render import server_env, vllm_argv, vllm_config
from model_optimizer.recipe.security import code_settings
from model_optimizer.recipe.writer import shell_value, write_vllm_config


@handle_errors
def show(
    recipe: OptionalRecipeArg = None,
    overrides: SetOption = None,
    vllm_config_out: Annotated[
        Path | None,
        typer.Option("--vllm-config", help="Also write the vLLM-native config "
                     "(for `vllm serve --config FILE`) to this .yaml file.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Print the resolved recipe (defaults filled in) and the vLLM command it launches."""
    loaded = load_chosen(recipe, overrides, "show", as_json)
    argv = vllm_argv(loaded.resolved, loaded.base_dir)
    placement = resolve_placement(loaded.spec)
    env = {**server_env(loaded.resolved), **placement.engine_env}
    config = vllm_config(loaded.resolved, loaded.base_dir)
    trust = bool(loaded.resolved["model"]["trust_remote_code"])
    allowed = code_settings(loaded.resolved)
    if vllm_config_out is not None:
        write_vllm_config(vllm_config_out, config, source=str(recipe), env=env)
    if as_json:
        print_json({"recipe": loaded.resolved, "argv": argv, "env": env, "vllm_config": config,
                    "trust_remote_code": trust, "allow_code": allowed,
                    "placement": placement.to_dict()})
        return
    console.rule(f"{loaded.name} (revision {loaded.resolved['revision']}): resolved recipe")
    console.print(yaml.safe_dump(loaded.resolved, sort_keys=False), highlight=False,
                  markup=False)
    console.rule("vLLM command")
    prefix = " ".join(f"{k}={shell_value(v)}" for k, v in env.items())
    command = " ".join(shell_value(arg) for arg in argv)
    console.print((prefix + " " if prefix else "") + command, highlight=False,
                  markup=False, soft_wrap=True)
    console.print(f"trust_remote_code: {str(trust).lower()}; code-loading settings allowed "
                  f"by engine.allow_code: {', '.join(allowed) or 'none'}", highlight=False,
                  markup=False, soft_wrap=True)
    console.print(f"placement (cores on this machine): {placement.describe()}",
                  highlight=False, markup=False, soft_wrap=True)
    if loaded.resolved["engine"]["port"] == 0:
        console.print("(--port 0: mopt picks a free port at launch)", style="dim")
    if vllm_config_out is not None:
        console.print(f"wrote vLLM config {vllm_config_out} "
                      f"(run: vllm serve --config {vllm_config_out})", highlight=False,
                      markup=False)

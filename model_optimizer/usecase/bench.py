"""``mopt bench --url`` below the command line: load-test any running OpenAI-compatible
server, measured and archived like a run.

    outcome = bench("http://127.0.0.1:8000", bench_recipe(None, WorkloadFlags(concurrency=4)))
    outcome.metrics["qps"], outcome.exit_code
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from model_optimizer.archive import runs_dir
from model_optimizer.events import EventCallback
from model_optimizer.load import parse_request_rate
from model_optimizer.recipe import LoadedRecipe, Variation, load_recipe, load_recipe_text
from model_optimizer.recipe.overrides import parse_value
from model_optimizer.runner import RunOutcome, bench_endpoint
from model_optimizer.signals import terminate_as_interrupt
from model_optimizer.usecase.endpoint import endpoint_model
from model_optimizer.usecase.notices import INFO, NoticeCallback, tell

BARE_RECIPE = "recipe_version: 1\nname: bench\nmodel: {path: endpoint}\n"


def _flag_value(key: str, value: object) -> object:
    """A flag's value as the recipe value it sets: paths absolute, text typed as the key's
    schema types it (``--request-rate 2.5`` is 2.5, ``inf`` stays ``inf``)."""
    if isinstance(value, Path):
        return str(value.expanduser().resolve())
    if isinstance(value, str):
        return parse_value(key, value)
    return value


@dataclass(frozen=True)
class WorkloadFlags:
    """``mopt bench``'s workload flags, None when not given; each sets ``workload.<name>``,
    or the key its field's metadata names (``flag``: its spelling when not ``--<name>``)."""

    prompt_tokens: int | None = None
    output_tokens: int | None = None
    concurrency: int | None = None
    num_requests: int | None = None
    duration_s: float | None = field(default=None, metadata={"flag": "--duration"})
    request_rate: str | None = None
    warmup: int | None = field(default=None, metadata={"key": "warmup_requests"})
    shared_prefix: int | None = field(default=None, metadata={"key": "shared_prefix_tokens"})
    seed: int | None = None
    endpoint: str | None = None
    dataset: Path | None = field(default=None, metadata={"key": "dataset.path"})
    trace: Path | None = None
    speed: str | None = field(default=None, metadata={"key": "trace_speed"})
    api_key_env: str | None = None
    ignore_eos: bool | None = None

    def variations(self) -> list[Variation]:
        """The typed workload values of the flags given, in field order, each recorded as
        from its flag."""
        out = []
        for item in fields(self):
            value = getattr(self, item.name)
            if value is None:
                continue
            key = "workload." + item.metadata.get("key", item.name)
            flag = item.metadata.get("flag", "--" + item.name.replace("_", "-"))
            out.append(Variation(key, _flag_value(key, value), f"mopt bench {flag}"))
        return out


@dataclass(frozen=True)
class BenchRecipe:
    """What a bench measures with: a recipe's workload and SLOs (``given``: from a recipe
    file, whose model also counts the prompt tokens), or a bare one of the flags alone."""

    loaded: LoadedRecipe
    given: bool


def bench_recipe(recipe: Path | None, flags: WorkloadFlags | None = None,
                 overrides: list[str] | None = None) -> BenchRecipe:
    """``recipe`` (or a bare recipe) with the workload flags, then ``overrides`` (--set),
    applied: the flags win over the recipe, --set over the flags."""
    sets: list[str | Variation] = [*(flags or WorkloadFlags()).variations(), *(overrides or [])]
    loaded = (load_recipe(recipe, sets) if recipe is not None
              else load_recipe_text(BARE_RECIPE, "<bench flags>", sets))
    return BenchRecipe(loaded, recipe is not None)


def open_loop_lines(workload: dict[str, Any]) -> list[str]:
    """How a trace or an open loop will run (an open loop without a concurrency runs
    uncapped: runner.effective_workload)."""
    rate = parse_request_rate(workload.get("request_rate", "inf"))
    if workload.get("trace"):
        return [f"replaying {workload['trace']} at its own arrival times "
                f"(speed {workload.get('trace_speed') or 1})"]
    if rate is not None and workload.get("concurrency") is None:
        return [f"open loop: {rate:g} requests/s arriving, no cap on requests in flight "
                "(--concurrency N sets one)"]
    return []


def bench(url: str, recipe: BenchRecipe | Path | None = None, *, model: str | None = None,
          tokenizer: Path | None = None, runs_base: Path | None = None,
          on_event: EventCallback | None = None,
          on_notice: NoticeCallback | None = None) -> RunOutcome:
    """Load-test the server at ``url`` with ``recipe``'s workload (a :class:`BenchRecipe`,
    a recipe file, or None: the workload's defaults) and archive it under ``runs_base``.

    ``model``: the model to request (default: the server's only one); ``tokenizer``: where
    prompt tokens are counted (default: the recipe's model, else the server's /tokenize).
    Its exit code: 0 SLOs met, 4 not."""
    chosen = recipe if isinstance(recipe, BenchRecipe) else bench_recipe(recipe)
    url = url.rstrip("/")
    loaded = chosen.loaded
    model_name, tokenizer_dir = endpoint_model(url, loaded, model, tokenizer,
                                               recipe_given=chosen.given, on_notice=on_notice)
    tell(on_notice, INFO, open_loop_lines(loaded.resolved["workload"]))
    terminate_as_interrupt()
    return bench_endpoint(url, loaded, model_name, tokenizer_dir, runs_dir(runs_base),
                          on_event=on_event, archive_extra={"tokenizer": tokenizer_dir})

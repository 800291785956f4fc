"""``mopt capacity`` below the command line: the recipe measured (a launch, preflighted; or a
running server at ``url``, with a recipe or the bare one of the defaults and --set), the
model and tokenizer of that server, the rate search (``search/capacity.py``) and its sizing.

    outcome = capacity(Path("recipes/tiny-cpu.yaml"), target_rate=20)
    outcome.result["capacity_rps"], outcome.result["sizing"], outcome.exit_code
"""

from __future__ import annotations

from pathlib import Path

from model_optimizer.archive import runs_dir
from model_optimizer.engine.factory import EngineFactory
from model_optimizer.errors import UsageError
from model_optimizer.events import EventCallback
from model_optimizer.recipe import LoadedRecipe, Overrides, load_recipe, load_recipe_text
from model_optimizer.search.capacity import DEFAULT_HEADROOM, CapacityOutcome, run_capacity
from model_optimizer.usecase.endpoint import endpoint_model
from model_optimizer.usecase.notices import NoticeCallback, preflight_of

#: the recipe of ``mopt capacity --url`` without one: defaults, then --set
BARE_CAPACITY_RECIPE = "recipe_version: 1\nname: capacity\nmodel: {path: endpoint}\n"


def check_target_rate(target_rate: float | None) -> None:
    """UsageError for a ``target_rate`` that sizes nothing (0 req/s or less)."""
    if target_rate is not None and target_rate <= 0:
        raise UsageError(f"--target-rate {target_rate:g}: give a rate above 0 req/s")


def capacity_recipe(recipe: Path | LoadedRecipe | None, overrides: Overrides | None,
                    url: str | None) -> LoadedRecipe:
    """What capacity measures: ``recipe`` (a file with ``overrides``, or a loaded recipe);
    with ``url`` and no recipe, the bare one (the workload, slo and capacity defaults, then
    ``overrides``)."""
    if isinstance(recipe, LoadedRecipe):
        return recipe
    if recipe is not None:
        return load_recipe(recipe, overrides)
    if url is None:
        raise UsageError("capacity: give a recipe to launch, or the url of a running server")
    return load_recipe_text(BARE_CAPACITY_RECIPE, "<capacity flags>", overrides)


def capacity(recipe: Path | LoadedRecipe | None = None, *,
             overrides: Overrides | None = None, url: str | None = None,
             model: str | None = None, tokenizer: Path | None = None,
             target_rate: float | None = None, headroom: float = DEFAULT_HEADROOM,
             runs_base: Path | None = None, force: bool = False,
             on_event: EventCallback | None = None, on_notice: NoticeCallback | None = None,
             engine_factory: EngineFactory | None = None) -> CapacityOutcome:
    """Find the highest Poisson arrival rate at which ``recipe``'s SLOs hold on one server,
    archived under ``runs_base`` (kind capacity); with ``target_rate`` also the servers
    needed for it, each kept at (1 - ``headroom``) of the rate that passed.

    Without ``url`` the recipe's server is launched, preflighted first (PreflightError on a
    refusal unless ``force``, warnings told to ``on_notice``); with ``url`` the server
    running there is measured (``model``: the one to request, default its only one;
    ``tokenizer``: where prompt tokens are counted, default the recipe's model, without a
    recipe the server's own /tokenize). Its exit code: 0 a capacity, 4 no rate passed, 3
    the server failed to start, 5 it died."""
    check_target_rate(target_rate)
    loaded = capacity_recipe(recipe, overrides, url)
    base = runs_dir(runs_base)
    model_name = tokenizer_dir = None
    if url is None:
        preflight_of(loaded, base, on_notice, force=force)
    else:
        url = url.rstrip("/")
        model_name, tokenizer_dir = endpoint_model(url, loaded, model, tokenizer,
                                                   recipe_given=recipe is not None,
                                                   on_notice=on_notice)
    return run_capacity(loaded, base, url=url, model_name=model_name,
                        tokenizer_dir=tokenizer_dir, on_event=on_event,
                        engine_factory=engine_factory, target_rate=target_rate,
                        headroom=headroom)

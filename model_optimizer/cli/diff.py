"""`mopt diff A B`: recipe fields that differ and metric deltas judged against noise."""

from __future__ import annotations

from typing import Annotated

import typer

from model_optimizer.archive import runs_dir
from model_optimizer.cli.common import JsonOption, RunsDirOption, console, handle_errors, print_json
from model_optimizer.cli.completion import complete_run_or_recipe
from model_optimizer.errors import UsageError
from model_optimizer.history import stats
from model_optimizer.history.diff import diff as diff_sides
from model_optimizer.history.diff import render

RefArg = Annotated[str, typer.Argument(help="Run or sweep id (or unique prefix), archive "
                                            "folder, or recipe file.", show_default=False,
                                       autocompletion=complete_run_or_recipe)]


@handle_errors
def diff(
    a: RefArg,
    b: RefArg,
    alpha: Annotated[float, typer.Option(help="Significance level of the tests.")]
    = stats.ALPHA,
    min_effect: Annotated[float, typer.Option(
        "--min-effect", help="Smallest relative change called significant (0.10 = 10%).")]
    = stats.MIN_EFFECT,
    runs_dir_opt: RunsDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Compare A with B: the recipe fields that differ (resolved, dotted paths) and, for
    measured runs, the change of QPS, output tok/s, TTFT/TPOT/E2E p50 and p99 with a
    judgement of whether it is beyond noise.

    Latencies: Mann-Whitney U (two-sided) on the per-request samples. Throughput: a block
    bootstrap over the completion gaps of each run (within-run noise only). Significant
    means p < alpha and a change of at least --min-effect. Archives are verified against
    their manifests first. Exit 0 (2 for bad input or a broken archive).
    """
    if not 0 < alpha < 1:  # also refuses nan
        raise UsageError(f"--alpha {alpha}: a significance level lies between 0 and 1, "
                         "e.g. 0.01")
    if not 0 <= min_effect < float("inf"):
        raise UsageError(f"--min-effect {min_effect}: give a relative change >= 0, e.g. 0.10")
    result = diff_sides(a, b, runs_dir(runs_dir_opt), alpha, min_effect)
    if as_json:
        print_json(result.to_dict())
        return
    for line in render(result):
        console.print(line, highlight=False, markup=False, soft_wrap=True)

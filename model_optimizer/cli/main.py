"""Entry point of the `mopt` command: registers one small module per command."""

from __future__ import annotations

import typer

from model_optimizer import __version__
from model_optimizer.cli.apply import apply
from model_optimizer.cli.bench import bench
from model_optimizer.cli.capacity import capacity
from model_optimizer.cli.common import show_recipe_warnings
from model_optimizer.cli.diff import diff
from model_optimizer.cli.eval import eval_command
from model_optimizer.cli.export import export
from model_optimizer.cli.init import init
from model_optimizer.cli.optimize import optimize
from model_optimizer.cli.plan import plan
from model_optimizer.cli.quantize import quantize
from model_optimizer.cli.report import report
from model_optimizer.cli.rollback import rollback
from model_optimizer.cli.route import route
from model_optimizer.cli.runs import runs_app
from model_optimizer.cli.show import show
from model_optimizer.cli.split import split_command
from model_optimizer.cli.status import status
from model_optimizer.cli.sweep import sweep
from model_optimizer.cli.tiny_model import tiny_model
from model_optimizer.cli.tune import tune
from model_optimizer.cli.validate import validate
from model_optimizer.cli.verify import verify_command
from model_optimizer.cli.workload import workload_app
from model_optimizer.signals import ctrl_c_raises


class _Mopt(typer.Typer):
    """The command line; run as a program (``mopt``, ``python -m model_optimizer``) it first
    makes Ctrl-C raise even when SIGINT was inherited ignored (``signals.ctrl_c_raises``)."""

    def __call__(self, *args, **kwargs):
        ctrl_c_raises()
        return super().__call__(*args, **kwargs)


app = _Mopt(
    name="mopt",
    help="Recipe-driven, measured optimization of LLM deployments on vLLM.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion (typer's own)
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
app.command()(init)
app.command()(validate)
app.command()(show)
app.command()(plan)
app.command()(apply)
app.command()(route)
app.command("split")(split_command)
app.command()(bench)
app.command("eval")(eval_command)
app.command()(capacity)
app.command()(export)
app.command()(sweep)
app.command()(tune)
app.command()(quantize)
app.command()(optimize)
app.command("tiny-model")(tiny_model)
app.add_typer(runs_app, name="runs")
app.add_typer(workload_app, name="workload")
app.command()(diff)
app.command()(rollback)
app.command()(status)
app.command("verify")(verify_command)
app.command()(report)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"mopt {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                      help="Print mopt's version and exit.")) -> None:
    """Recipe-driven, measured optimization of LLM deployments on vLLM."""
    show_recipe_warnings()

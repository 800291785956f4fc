"""Options that several commands take are declared once, in ``cli/common.py``, and every
command's ``--help`` shows that one declaration."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest
from typer.testing import CliRunner

from model_optimizer.cli import common
from model_optimizer.cli.main import app

CLI = Path(common.__file__).parent
#: shared types whose flag other commands may also declare with another meaning
#: (``--output`` of init and report writes a recipe or an HTML file, not a revision)
SHARED_MEANING_ONLY = {"RevisionOutputOption"}


def shared_flags() -> dict[str, str]:
    """Each flag of a shared ``*Option`` type in cli/common.py, and that type's name."""
    flags = {}
    for name in dir(common):
        if name.endswith("Option") and typing.get_origin(getattr(common, name)) is \
                typing.Annotated and name not in SHARED_MEANING_ONLY:
            info = typing.get_args(getattr(common, name))[1]
            # in Annotated, typer takes a string first argument for the first flag
            declared = [info.default, *info.param_decls]
            flags.update({flag: name for flag in declared
                          if isinstance(flag, str) and flag.startswith("--")})
    return flags


def test_the_shared_types_cover_the_options_declared_in_several_commands():
    assert {"--model-config", "--set", "--json", "--runs-dir"} <= set(shared_flags())


def test_no_command_declares_a_shared_flag_again():
    flags = shared_flags()
    again = []
    for path in sorted(CLI.glob("*.py")):
        if path.name == "common.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "Option":
                again += [f"{path.name}:{node.lineno}: {arg.value} (use {flags[arg.value]})"
                          for arg in node.args if isinstance(arg, ast.Constant)
                          and arg.value in flags]
    assert not again, again


@pytest.mark.parametrize(("command", "flag", "text"), [
    ("plan", "--model-config", "The model's config.json for the planner"),
    ("sweep", "--model-config", "The model's config.json for the planner"),
    ("tune", "--model-config", "The model's config.json for the planner"),
    ("sweep", "--output", "Write the new revision here instead of over RECIPE."),
    ("tune", "--output", "Write the new revision here instead of over RECIPE."),
    ("quantize", "--output", "Write the new revision here instead of over RECIPE."),
])
def test_help_shows_the_shared_declaration(command, flag, text):
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    line = next(line for line in result.output.splitlines() if flag in line)
    assert text in line, line

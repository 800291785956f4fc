"""Fuzzing the recipe loader with hostile YAML: exit 2 or ok, never a traceback, bounded.

Generated documents mix anchors and aliases (nested, self-referencing, undefined), tags
(``!!python/object``, ``!!binary``, ``!!set``, unknown ``!tags``), deep nesting and huge
scalars, inside a valid recipe or on their own. ``mopt validate`` must answer 0 or 2 with
a message, within a time and memory bound, for every one of them.
"""

import os
import socket
import time
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from model_optimizer.cli.main import app

TIME_BOUND_S = 5.0
MEMORY_BOUND_BYTES = 256 * 1024 * 1024
HEADER = "recipe_version: 1\nname: fz\nmodel: {path: m}\n"
TAGS = ["!!python/object/apply:os.system", "!!python/name:os.system", "!!binary", "!!set",
        "!!omap", "!!timestamp", "!!str", "!!int", "!custom", "!!float"]

scalars = st.one_of(
    st.integers(), st.floats(allow_nan=True), st.booleans(),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20),
    st.integers(min_value=1_000, max_value=400_000).map(lambda n: "x" * n),  # huge scalar
    st.sampled_from([".nan", ".inf", "-.inf", "~", "null", "0x1F", "1e999", "'[/]'",
                     "'[bold]x'"]),
)


def _scalar_text(value) -> str:
    if isinstance(value, str) and value.startswith(("'", ".", "~", "n", "0x", "1e")):
        return value
    return repr(value) if not isinstance(value, str) else '"' + value.encode(
        "unicode_escape").decode("ascii").replace('"', '\\"') + '"'


@st.composite
def nodes(draw, depth=0):
    """YAML flow text for one node, with anchors, aliases and tags sprinkled in."""
    kind = draw(st.sampled_from(["scalar", "map", "seq", "alias", "deep"] if depth < 4
                                else ["scalar", "alias"]))
    prefix = ""
    if draw(st.integers(0, 4)) == 0:
        prefix += f"&a{draw(st.integers(0, 3))} "
    if draw(st.integers(0, 5)) == 0:
        prefix += draw(st.sampled_from(TAGS)) + " "
    if kind == "scalar":
        return prefix + _scalar_text(draw(scalars))
    if kind == "alias":
        return f"*a{draw(st.integers(0, 3))}"
    if kind == "deep":
        levels = draw(st.integers(10, 3000))
        return "[" * levels + "1" + "]" * levels
    children = draw(st.lists(nodes(depth=depth + 1), max_size=4))
    if kind == "seq":
        return prefix + "[" + ", ".join(children) + "]"
    keys = draw(st.lists(st.sampled_from(["engine", "k", "max_num_seqs", "env", "1", "<<"]),
                         min_size=len(children), max_size=len(children)))
    return prefix + "{" + ", ".join(f"{k}: {v}" for k, v in zip(keys, children,
                                                                 strict=True)) + "}"


documents = st.one_of(
    nodes().map(lambda text: HEADER + "engine: " + text + "\n"),
    nodes().map(lambda text: HEADER + "description: " + text + "\n"),
    nodes(),
    st.tuples(st.integers(2, 40)).map(
        lambda n: HEADER + "a: &a [1, 2]\n" + "".join(
            f"b{i}: &b{i} [*{'a' if i == 0 else f'b{i - 1}'}, "
            f"*{'a' if i == 0 else f'b{i - 1}'}]\n" for i in range(n[0]))),
    # a flow list up to half the byte limit: refused while scanning, not after a full parse
    st.integers(1_000, 250_000).map(lambda n: HEADER + "a: [" + ",".join(["1"] * n) + "]\n"),
    # huge integers where the schema has ceilings
    st.tuples(st.sampled_from(["workload: {prompt_tokens: ", "workload: {concurrency: ",
                               "engine: {max_num_seqs: ", "engine: {max_model_len: "]),
              st.integers(10**6, 10**40)).map(lambda kv: HEADER + f"{kv[0]}{kv[1]}}}\n"),
)


@pytest.mark.slow  # several seconds: 30 examples, each validated twice (one traced)
@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(documents)
def test_hostile_yaml_gets_exit_2_or_ok_without_traceback(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("fuzz") / "r.yaml"
    path.write_text(text, encoding="utf-8")
    started = time.perf_counter()
    result = CliRunner().invoke(app, ["validate", str(path)])
    elapsed = time.perf_counter() - started  # timed without tracemalloc (it slows 10x)
    tracemalloc.start()
    try:
        CliRunner().invoke(app, ["validate", str(path)])
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert result.exit_code in (0, 2), (result.exit_code, result.output[-2000:])
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        repr(result.exception))
    assert "Traceback" not in result.output
    if result.exit_code == 2:
        assert str(path) in result.output  # the message names the file
    assert elapsed < TIME_BOUND_S and peak < MEMORY_BOUND_BYTES, (elapsed, peak)


@settings(max_examples=6, deadline=None)
@given(st.sampled_from(["fifo", "device", "socket", "folder"]))
def test_a_recipe_that_is_not_a_regular_file_is_refused_at_once(tmp_path_factory, kind):
    folder = tmp_path_factory.mktemp("kinds")
    path, keep = folder / "r.yaml", None
    if kind == "fifo":
        os.mkfifo(path)  # nobody ever writes to it: reading it would block forever
    elif kind == "socket":
        keep = socket.socket(socket.AF_UNIX)
        keep.bind(str(path))
    elif kind == "folder":
        path.mkdir()
    else:
        path = "/dev/zero"
    started = time.perf_counter()
    try:
        result = CliRunner().invoke(app, ["validate", str(path)])
    finally:
        if keep is not None:
            keep.close()
    assert result.exit_code == 2 and str(path) in result.output, result.output
    assert "Traceback" not in result.output and time.perf_counter() - started < TIME_BOUND_S

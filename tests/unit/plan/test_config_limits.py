"""Sizes read from a config.json are bounded before anything is built from them (issue 37:
``num_hidden_layers: 1000000000`` made `mopt init` build a billion-element list)."""

from __future__ import annotations

import contextlib
import json
import resource

import pytest
from typer.testing import CliRunner

from model_optimizer.cli.main import app
from model_optimizer.plan import PlanError, load_model_config
from model_optimizer.plan.model_shape import ModelShape
from tests.unit.export.conftest import TINY_CONFIG


@contextlib.contextmanager
def address_space_capped(extra_bytes: int = 1 << 30):
    """At most ``extra_bytes`` more memory for this process while inside: a regression
    fails with MemoryError instead of taking the shared machine's memory."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as statm:
        used = int(statm.read().split()[0]) * resource.getpagesize()
    cap = used + extra_bytes if hard == resource.RLIM_INFINITY else min(hard, used + extra_bytes)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.mark.parametrize(("field", "value", "shown"), [
    ("num_hidden_layers", 10**9, "1000000000"), ("num_hidden_layers", 10**30, "1e+30"),
    ("hidden_size", 10**30, "1e+30"), ("num_key_value_heads", 10**9, "1000000000"),
    ("num_local_experts", 10**9, "1000000000"), ("sliding_window_pattern", 0, "0"),
    ("max_position_embeddings", float("inf"), "inf"),
])
def test_an_absurd_size_is_a_plan_error_naming_the_source_and_field(field, value, shown):
    config = {**TINY_CONFIG, field: value}
    if field == "sliding_window_pattern":
        config["model_type"] = "gemma3_text"
    with address_space_capped(), pytest.raises(PlanError) as info:
        ModelShape.from_config(config, source="m/config.json")
    assert str(info.value).startswith(f"m/config.json: {field} is {shown}, outside ")


def test_init_refuses_a_billion_layers_with_a_usage_error(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**TINY_CONFIG,
                                                    "num_hidden_layers": 10**9}))
    with pytest.raises(PlanError, match=r"config\.json: num_hidden_layers is 1000000000"):
        load_model_config(folder)
    with address_space_capped():
        result = CliRunner().invoke(app, ["init", str(folder), "-o", str(tmp_path / "r.yaml"),
                                          "--accelerator", "cpu"])
    assert result.exit_code == 2, result.output
    assert f"{folder / 'config.json'}: num_hidden_layers is 1000000000" in result.output
    assert not (tmp_path / "r.yaml").exists()


def test_real_sizes_pass(tmp_path):
    assert ModelShape.from_config(TINY_CONFIG).num_layers == 2

"""The knob helpers sweep and tune share, and the CPU block size rule they all read."""

from model_optimizer.plan.accelerators import CPU_BLOCK_MULTIPLE, knob_multiple
from model_optimizer.search.core.knobs import (
    FLOAT_KNOBS,
    describe,
    engine_values,
    is_float_knob,
)
from model_optimizer.search.sweep.strategy import SweepConfig


def test_engine_values_are_typed_recipe_values_and_describe_names_them():
    setting = {"max_num_seqs": 8, "enable_prefix_caching": True, "gpu_memory_utilization": 0.5}
    assert engine_values(setting) == {"engine.max_num_seqs": 8,
                                      "engine.enable_prefix_caching": True,
                                      "engine.gpu_memory_utilization": 0.5}
    assert describe(setting) == ("max_num_seqs 8, enable_prefix_caching True, "
                                 "gpu_memory_utilization 0.5")


def test_float_knobs_are_the_fractions_and_the_sweep_reads_them():
    assert is_float_knob("gpu_memory_utilization") and not is_float_knob("max_num_seqs")
    for knob in FLOAT_KNOBS:
        assert SweepConfig.from_recipe({"param": knob, "start": 0.5}).integer is False
    assert SweepConfig.from_recipe({"param": "block_size", "start": 32}).integer is True


def test_the_cpu_block_multiple_is_one_rule_read_everywhere():
    assert knob_multiple("block_size", "cpu") == CPU_BLOCK_MULTIPLE == 32
    assert knob_multiple("block_size", "H100") is None
    assert knob_multiple("max_num_seqs", "cpu") is None
    from model_optimizer.search.sweep.flags import build_config

    recipe = {"sweep": {"param": "block_size", "start": 32, "growth": 2.0},
              "engine": {}, "hardware": {"accelerator": "cpu"}}
    assert build_config(recipe).multiple_of == CPU_BLOCK_MULTIPLE
    recipe["hardware"]["accelerator"] = "H100"
    assert build_config(recipe).multiple_of is None


def test_build_config_is_from_recipe_with_the_flags_winning():
    recipe = {"sweep": {"param": "max_num_seqs", "start": None, "growth": 2.0, "repeats": 3,
                        "budget": 5, "confirm_duration_s": 0},
              "engine": {"max_num_seqs": 8}, "hardware": {"accelerator": "cpu"}}
    from model_optimizer.search.sweep.flags import SweepFlags, build_config

    config = build_config(recipe, SweepFlags(growth=4.0, max=None))
    assert config == SweepConfig.from_recipe({**recipe["sweep"], "start": 8, "growth": 4.0})


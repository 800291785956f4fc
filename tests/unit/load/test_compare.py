"""`mopt workload compare`: profiles of a trace and of a recipe's workload, and the one rule
that says when the difference calls for a re-validation."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from model_optimizer.cli.main import app
from model_optimizer.errors import EXIT_SLO_FAILED, EXIT_USAGE
from model_optimizer.load.compare import (
    REVALIDATE,
    burstiness,
    compare,
    synthetic_profile,
    trace_profile,
)
from model_optimizer.load.stats import percentile
from model_optimizer.load.trace import read_trace

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "traces" / "sessions.jsonl"


def words(text: str) -> int:
    return len(text.split())


def test_a_sessions_turns_count_their_conversation_and_its_shared_prefix(tmp_path):
    lines = [{"timestamp": 0, "prompt_tokens": 100, "output_tokens": 10, "session": "s"},
             {"timestamp": 1, "prompt": "one two three", "output_tokens": 20, "session": "s"},
             {"timestamp": 3, "prompt_tokens": 50, "output_tokens": 30}]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    profile = trace_profile(read_trace(path), words, speed=2.0)
    sent = [100, 100 + 10 + 3, 50]  # turn 2 carries turn 1's prompt and output
    assert (profile.prompt_p50, profile.prompt_p90) == (percentile(sent, 50),
                                                       percentile(sent, 90))
    assert profile.output_p90 == percentile([10, 20, 30], 90)
    assert profile.prefix_share == pytest.approx(110 / sum(sent))
    assert profile.rate_qps == pytest.approx(2 / 3 * 2.0)
    assert profile.burstiness == pytest.approx(burstiness([0, 1, 3]))


def test_burstiness_is_zero_for_a_metronome_and_near_one_for_poisson():
    assert burstiness([0.5 * i for i in range(20)]) == pytest.approx(0.0)
    rng, t, times = random.Random(3), 0.0, []
    for _ in range(20000):
        t += rng.expovariate(4.0)
        times.append(t)
    assert burstiness(times) == pytest.approx(1.0, abs=0.05)
    assert burstiness([1.0, 2.0]) is None


BASE = {"prompt_tokens": 400, "output_tokens": 64, "shared_prefix_tokens": 0,
        "request_rate": 2.0, "num_requests": 100, "mix": None, "seed": 0}


@pytest.mark.parametrize("field", ["prompt_p50", "prompt_p90", "output_p50", "output_p90",
                                   "rate_qps"])
def test_the_rule_flags_a_ratio_over_its_limit_either_way(field):
    recipe = synthetic_profile(BASE)
    assert compare(recipe, recipe)["revalidate"] is False
    limit = REVALIDATE["rate_ratio" if field == "rate_qps" else "length_ratio"]
    for factor in (limit * 1.05, 1 / (limit * 1.05)):
        trace = replace(recipe, **{field: getattr(recipe, field) * factor})
        result = compare(trace, recipe)
        assert result["revalidate"] and field.split("_qps")[0] in result["reasons"][0]
    inside = replace(recipe, **{field: getattr(recipe, field) * limit * 0.95})
    assert compare(inside, recipe)["revalidate"] is False


def test_burstiness_and_prefix_share_are_absolute_differences():
    recipe = synthetic_profile({**BASE, "shared_prefix_tokens": 100})
    assert recipe.prefix_share == pytest.approx(0.25) and recipe.burstiness == 1.0
    over = REVALIDATE["prefix_share_diff"] + 0.01
    assert compare(replace(recipe, prefix_share=0.25 + over), recipe)["revalidate"]
    assert not compare(replace(recipe, prefix_share=0.25 + over - 0.02), recipe)["revalidate"]
    bursty = replace(recipe, burstiness=1.0 + REVALIDATE["burstiness_diff"] + 0.1)
    assert "burstiness" in compare(bursty, recipe)["reasons"][0]


def test_a_closed_loop_recipe_has_no_rate_to_compare():
    recipe = synthetic_profile({**BASE, "request_rate": "inf"})
    assert recipe.rate_qps is None and recipe.burstiness is None
    result = compare(replace(recipe, rate_qps=50.0, burstiness=3.0), recipe)
    assert not result["revalidate"] and "closed loop" in result["notes"][0]


def test_a_mix_profile_follows_its_classes():
    mix = {"short": {"weight": 9, "prompt_tokens": 50, "output_tokens": 10},
           "long": {"weight": 1, "prompt_tokens": 2000, "output_tokens": 200}}
    profile = synthetic_profile({**BASE, "mix": mix})
    assert profile.prompt_p50 == 50 and profile.output_p50 == 10
    assert profile.prompt_p90 > 50  # one request in ten is long: p90 sits at the boundary


def invoke(*args: str):
    return CliRunner().invoke(app, ["workload", "compare", *args])


def test_compare_command_on_the_example_trace_and_recipe():
    recipe = ROOT / "recipes" / "tiny-cpu.yaml"
    result = invoke(str(EXAMPLE), str(recipe), "--json")
    assert result.exit_code in (0, EXIT_SLO_FAILED), result.output
    shown = json.loads(result.output)
    assert (result.exit_code == EXIT_SLO_FAILED) is shown["revalidate"] is bool(shown["reasons"])
    assert shown["trace"]["requests"] == len(read_trace(EXAMPLE).entries)
    assert shown["trace"]["prefix_share"] > 0 and shown["recipe"]["prefix_share"] == 0
    assert any("shared-prefix share" in reason for reason in shown["reasons"])
    text = invoke(str(EXAMPLE), str(recipe))
    assert "re-validate" in text.output and "shared prefix" in text.output


def test_compare_command_names_a_bad_trace_line_and_exits_2(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 1, "prompt": "a", "output_tokens": 1}\n{"timestamp": 2}\n')
    result = invoke(str(bad), str(ROOT / "recipes" / "tiny-cpu.yaml"))
    assert result.exit_code == EXIT_USAGE
    assert f"{bad}:2:" in result.output

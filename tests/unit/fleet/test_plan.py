"""`mopt plan FLEET`: each instance in its share, and the verdict for the shared card."""

from __future__ import annotations

import pytest

from model_optimizer.fleet import load_fleet
from model_optimizer.fleet.plan import plan_fleet

from .conftest import ROOT, SHIPPED, gpu_fleet

LLAMA = ROOT / "examples" / "llama-2-7b-config.json"
GIB = 1024**3


def test_a_7b_int4_and_a_7b_fp16_do_not_fit_an_a10_at_8_sequences_of_2k(write_fleet):
    # whatever the split: 3.6 + 12.6 GiB of weights, 2 GiB of reserves and 2 x 4 GiB of
    # 8-bit KV (8 x 2048 tokens each) is more than the A10's 22.4 GiB
    for shares in ((0.3, 0.7), (0.45, 0.55), (0.2, 0.8)):
        plan = plan_fleet(load_fleet(write_fleet(gpu_fleet(shares, ("gptq", "none")))), LLAMA)
        assert not plan.fits, shares
        assert plan.verdict().startswith("does not fit: ")
        assert any("fewer than max_num_seqs 8" in r or "no memory left" in r
                   for i in plan.instances for r in i.reasons())


def test_two_7b_int4_fit_an_a10_with_how_many_sequences_each(write_fleet):
    plan = plan_fleet(load_fleet(write_fleet(gpu_fleet((0.45, 0.45)))), LLAMA)
    assert plan.fits
    a, b = plan.instances
    assert a.report.seq_len == 2048 and a.report.recipe_max_num_seqs == 8
    assert a.report.max_seqs_no_preemption == b.report.max_seqs_no_preemption == 10
    assert plan.verdict() == ("fits: sequences held without preemption: a 10 of 2048 tokens "
                              "(max_num_seqs 8), b 10 of 2048 tokens (max_num_seqs 8)")
    # each instance takes its share: weights + reserve + KV budget = 0.45 of the card
    assert a.used_bytes == pytest.approx(0.45 * plan.memory_gib * GIB, rel=1e-6)


def test_an_instance_is_planned_for_its_own_classes(write_fleet):
    plan = plan_fleet(load_fleet(SHIPPED))
    short, long = plan.instances
    assert (short.classes, long.classes) == (("short",), ("long",))
    # mean request of each class: short 64 + 16, long 1000 + 32
    assert (short.report.seq_len, long.report.seq_len) == (80, 1032)
    assert plan.fits and short.report.kv_budget_bytes == long.report.kv_budget_bytes == GIB


def test_cpu_instances_over_the_machine_memory_do_not_fit(write_fleet):
    assert plan_fleet(load_fleet(SHIPPED)).fits  # 2 x 1 GiB of KV and tiny weights in 4 GiB
    # the same instances on a machine of 2 GiB: the KV spaces alone take it all
    plan = plan_fleet(load_fleet(write_fleet(_with_memory(2))))
    assert not plan.fits and plan.used_bytes > 2 * GIB
    assert "more than hardware.memory_gib 2" in plan.verdict()


def _with_memory(gib: int) -> dict:
    import yaml

    doc = yaml.safe_load(SHIPPED.read_text())
    doc["hardware"]["memory_gib"] = gib
    doc["instances"]["short"]["recipe"] = str(ROOT / "recipes" / "tiny-cpu.yaml")
    doc["instances"]["long"]["model"]["path"] = str(ROOT / "models" / "tiny-llama")
    return doc

"""Precision routing's decision on per-class quality figures: the gate judged on each class's
own items, and the rule (gate passed: fast; failed or too few items: precise).

The evals are shaped like two archived evals of the shipped ``mopt:general`` set (24 items,
8 per class), two repeats each: a precise instance that misses one arithmetic item and two
code items, and a fast (quantized) one that loses most of the arithmetic, one code answer
and, in one repeat, one general answer. The teacher-forced distributions are the recorded
vLLM 0.32 ``prompt_logprobs`` of ``data/vllm_0.32_responses.json``, shifted on the fast side
for one class. The tests assert the rule against figures computed here from the answers,
never a table copied from the decision.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from statistics import mean

import pytest

from model_optimizer.history.stats import ALPHA, mann_whitney_u
from model_optimizer.quality.classgate import class_part, gate_by_class
from model_optimizer.quality.client import Generation, Scored
from model_optimizer.quality.config import QualityConfig, Thresholds
from model_optimizer.quality.evalset import builtin_eval_set, load_eval_set
from model_optimizer.quality.precision import FAILED, PASSED, TOO_FEW, decide
from model_optimizer.quality.result import EvalResult
from model_optimizer.quality.scoring import score

RECORDED = json.loads((Path(__file__).parent / "data" / "vllm_0.32_responses.json").read_text())
ITEMS = load_eval_set(builtin_eval_set("mopt:general"))
WRONG_PRECISE = {"math-square-9", "code-js-const", "code-sql-select"}
#: per repeat, the items the fast instance answers wrongly (besides the precise one's misses)
WRONG_FAST = [{"math-add-12-9", "math-mul-6-7", "math-half-50", "math-dozen", "math-add-2-3",
               "code-py-none"},
              {"math-add-12-9", "math-mul-6-7", "math-div-20-5", "math-dozen", "math-add-2-3",
               "math-sub-10-4", "code-py-none", "general-plural-mouse"}]
LIMIT = Thresholds(max_accuracy_drop=0.1)
FAST, PRECISE = "int8", "bf16"


def recorded_dists() -> list[dict[int, float]]:
    """The recorded teacher-forced next-token distributions (top-k, token id -> logprob)."""
    entries = RECORDED["score"]["choices"][0]["prompt_logprobs"][1:]
    return [{int(k): v["logprob"] for k, v in entry.items()} for entry in entries]


def shifted(dist: dict[int, float], by: float) -> dict[int, float]:
    """``dist`` with its top token's logprob lowered by ``by`` and the rest renormalized."""
    top = max(dist, key=dist.get)
    moved = {t: (lp - by if t == top else lp) for t, lp in dist.items()}
    return {t: lp - math.log(sum(math.exp(v) for v in moved.values())) for t, lp in moved.items()}


def answer(item, wrong: bool) -> str:
    return "I do not know" if wrong else f" {item.reference}"


def eval_of(wrong_per_repeat: list[set[str]], run_id: str, *, kl_class: str | None = None,
            items=ITEMS) -> EvalResult:
    dists = recorded_dists()
    generations = [[Generation(i.id, seed, answer(i, i.id in wrong), [1, 2, 3], [7, 8, 9])
                    for i in items] for seed, wrong in enumerate(wrong_per_repeat)]
    own = [Scored(i.id, dists[:3]) for i in items]
    on_base = [Scored(i.id, [shifted(d, 3.0) if i.item_class == kl_class else d
                             for d in dists[:3]]) for i in items]
    return EvalResult(run_id, Path(run_id), "ok", QualityConfig(), list(items), generations,
                      own, on_base)


def precise_eval(items=ITEMS) -> EvalResult:
    return eval_of([WRONG_PRECISE, WRONG_PRECISE], "eval-precise", items=items)


def fast_eval(items=ITEMS, kl_class: str | None = None) -> EvalResult:
    return eval_of([WRONG_PRECISE | w for w in WRONG_FAST], "eval-fast", kl_class=kl_class,
                   items=items)


def class_accuracy(result: EvalResult, name: str) -> list[float]:
    """Per repeat: the share of the class's items answered correctly, scored here."""
    return [mean(repeat) for repeat in per_item(result, name)]


def per_item(result: EvalResult, name: str) -> list[list[bool]]:
    items = {i.id: i for i in result.items if i.item_class == name}
    return [[bool(score(items[g.id], g.text)) for g in repeat if g.id in items]
            for repeat in result.generations]


def test_each_class_is_routed_by_its_own_gate_verdict():
    base, cand = precise_eval(), fast_eval()
    decision = decide(gate_by_class(base, cand, LIMIT), ["general", "math", "code"],
                      FAST, PRECISE)
    for routing in decision.classes:
        name = routing.request_class
        ours, theirs = class_accuracy(base, name), class_accuracy(cand, name)
        drop = mean(ours) - mean(theirs)
        noise = max(max(ours) - min(ours), max(theirs) - min(theirs))
        assert routing.figures["accuracy_drop"] == pytest.approx(drop)
        assert routing.figures["accuracy_noise"] == pytest.approx(noise)
        pooled = [[float(x) for r in side for x in r] for side in
                  (per_item(base, name), per_item(cand, name))]
        harmed = (drop > LIMIT.max_accuracy_drop and drop > noise
                  and mann_whitney_u(*pooled)[1] < ALPHA)
        if harmed:
            assert routing.verdict == FAILED and routing.to == PRECISE
            assert f"accuracy {mean(ours):.3f} -> {mean(theirs):.3f}" in routing.reason
            assert "beyond the noise" in routing.reason
        else:
            assert routing.verdict == PASSED and routing.to == FAST
        assert routing.items == 8 and routing.scored == 8
        assert {c["name"] for c in routing.checks} == {"max_accuracy_drop"}
    assert decision.assignment() == {"general": FAST, "math": PRECISE, "code": FAST}


def test_a_class_is_judged_on_its_own_items_only():
    base, cand = precise_eval(), fast_eval()
    before = gate_by_class(base, cand, LIMIT)["general"]
    worse = fast_eval()
    for repeat in worse.generations:  # the code class loses everything
        for g in repeat:
            if g.id.startswith("code-"):
                g.text = "syntax error"
    after = gate_by_class(base, worse, LIMIT)
    assert after["general"].gate.figures == before.gate.figures
    assert not after["code"].gate.passed
    assert [i.item_class for i in class_part(worse, "code").items] == ["code"] * 8


def test_tightening_the_threshold_never_moves_a_class_to_the_fast_instance():
    base, cand = precise_eval(), fast_eval()
    previous = None
    for limit in (0.5, 0.3, 0.1, 0.05, 0.0):
        gates = gate_by_class(base, cand, Thresholds(max_accuracy_drop=limit))
        on_fast = {c for c, to in decide(gates, ["general", "math", "code"], FAST,
                                          PRECISE).assignment().items() if to == FAST}
        if previous is not None:
            assert on_fast <= previous
        previous = on_fast
    assert "math" not in previous


def test_too_few_items_go_to_the_precise_instance_even_when_they_pass():
    few = [i for i in ITEMS if i.item_class != "code" or i.id in
           ("code-py-len", "code-py-return", "code-py-for")]
    base, cand = precise_eval(few), fast_eval(few)
    gates = gate_by_class(base, cand, LIMIT)
    assert gates["code"].gate.passed and gates["code"].items == 3
    strict = decide(gates, ["general", "code"], FAST, PRECISE, min_items=8)
    code = next(c for c in strict.classes if c.request_class == "code")
    assert (code.to, code.verdict) == (PRECISE, TOO_FEW)
    assert "3 eval item(s)" in code.reason and "fewer than the 8" in code.reason
    lenient = decide(gates, ["general", "code"], FAST, PRECISE, min_items=3)
    assert lenient.assignment()["code"] == FAST
    assert strict.assignment()["general"] == lenient.assignment()["general"] == FAST


def test_a_fleet_class_the_eval_set_lacks_is_served_precisely_and_extra_ones_are_ignored():
    gates = gate_by_class(precise_eval(), fast_eval(), LIMIT)
    decision = decide(gates, ["general", "chat"], FAST, PRECISE)
    chat = next(c for c in decision.classes if c.request_class == "chat")
    assert (chat.to, chat.verdict, chat.items) == (PRECISE, TOO_FEW, 0)
    assert "no item of class 'chat'" in chat.reason
    assert decision.ignored == ("math", "code")
    assert decision.to_dict()["ignored_eval_classes"] == ["math", "code"]


def test_fidelity_thresholds_are_judged_per_class_too():
    kl_only = Thresholds(max_mean_kl=0.05)
    base, cand = precise_eval(), fast_eval(kl_class="general")
    gates = gate_by_class(base, cand, kl_only)
    assert gates["general"].gate.figures["mean_kl"] > 0.05
    assert gates["math"].gate.figures["mean_kl"] == pytest.approx(0.0, abs=1e-9)
    decision = decide(gates, ["general", "math", "code"], FAST, PRECISE)
    assert decision.assignment() == {"general": PRECISE, "math": FAST, "code": FAST}
    general = next(c for c in decision.classes if c.request_class == "general")
    assert "mean KL" in general.reason and general.figures["mean_kl"] > 0.05


def test_a_failed_fast_eval_sends_every_class_to_the_precise_instance():
    cand = fast_eval()
    cand.status, cand.failure = "failed:requests", "3 of 48 requests failed"
    decision = decide(gate_by_class(precise_eval(), cand, LIMIT), ["general", "math"],
                      FAST, PRECISE)
    assert set(decision.assignment().values()) == {PRECISE}
    assert all("eval failed: 3 of 48" in c.reason for c in decision.classes)


def test_the_evidence_is_plain_data_and_the_roles_must_differ():
    decision = decide(gate_by_class(precise_eval(), fast_eval(), LIMIT), ["math"], FAST,
                      PRECISE)
    evidence = decision.to_dict()
    assert json.loads(json.dumps(evidence)) == evidence
    assert evidence["classes"]["math"]["figures"]["baseline_accuracy"] == pytest.approx(0.875)
    with pytest.raises(ValueError, match="must differ"):
        decide({}, ["math"], FAST, FAST)

"""The planner's view of mixed workloads and long-request protection.

A mix (``workload.mix``) is planned at its *mean* request (each class's expected prompt and
output lengths, weighted): that is what the KV cache holds on average, so it sets how many
sequences run without preemption. Its *longest* request sets what one request can take:

- a prompt longer than the step's token budget (``max_num_batched_tokens``) fills whole
  scheduler steps while short requests wait; ``long_prefill_token_threshold`` caps the share
  of a step one long prefill gets (vLLM applies it only while other requests wait);
- a long generation holds its KV blocks until its last token; ``max_output_tokens`` caps it
  server-side (a request asking for more gets fewer tokens: the report counts them);
- a request whose prompt + output is a large share of the KV cache crowds out many short
  ones.

Pure arithmetic on the resolved recipe; no vLLM.
"""

from __future__ import annotations

import math
from typing import Any

from model_optimizer.mix import Length, parse_mix

#: vLLM 0.32's step token budget when max_num_batched_tokens is unset (online serving)
DEFAULT_STEP_TOKENS = 2048
KV_SHARE_WARNING = 0.25


def expected(length: Length) -> float:
    """The mean of a length distribution (clipping ignored: a planning figure)."""
    if length.dist is None:
        return float(length.low)
    if length.dist == "uniform":
        return (length.low + length.high) / 2
    if length.dist == "normal":
        return min(length.high, max(length.low, length.center))
    mean = length.center * math.exp(length.spread ** 2 / 2)
    return min(length.high, max(length.low, mean))


def apply_workload_shape(report: Any, engine: dict, workload: dict) -> None:
    """Re-plan a mix at its mean request and add the protection notes and warnings."""
    if not workload.get("mix"):
        return
    classes = parse_mix(workload["mix"])
    total = sum(c.weight for c in classes)
    mean_seq = sum(c.weight * (expected(c.prompt_tokens) + expected(c.output_tokens))
                   for c in classes) / total
    report.seq_len = max(1, round(mean_seq))
    report.blocks_per_seq = math.ceil(report.seq_len / report.block_size)
    report.max_seqs_no_preemption = report.kv_blocks // report.blocks_per_seq
    prompt = max(c.prompt_tokens.high for c in classes)
    output = max(c.output_tokens.high for c in classes)
    report.notes.append(f"mix of {len(classes)} classes planned at its mean request of "
                        f"{report.seq_len} tokens; the longest asks {prompt} + {output}")
    _prefill_advice(report, engine, prompt)
    _output_advice(report, engine, classes, output)
    cap = engine.get("max_output_tokens")
    longest = prompt + min(output, cap or output)
    if report.kv_tokens and longest / report.kv_tokens >= KV_SHARE_WARNING:
        report.warnings.append(
            f"one longest request ({longest} tokens) takes {longest / report.kv_tokens:.0%} "
            f"of the KV cache ({report.kv_tokens:,} tokens): a few of them queue every short "
            "request; cap prompts with max_model_len or outputs with max_output_tokens")


def _prefill_advice(report: Any, engine: dict, prompt: int) -> None:
    budget = engine.get("max_num_batched_tokens") or DEFAULT_STEP_TOKENS
    threshold = engine.get("long_prefill_token_threshold") or 0
    if engine.get("enable_chunked_prefill") is False:
        report.warnings.append(
            f"chunked prefill is off: a {prompt}-token prompt is prefilled in one step that "
            "every other request waits for")
    elif threshold:
        report.notes.append(
            f"a {prompt}-token prompt is prefilled in chunks of at most {threshold} tokens "
            f"while others wait ({math.ceil(prompt / threshold)} steps), leaving "
            f"{max(0, budget - threshold)} tokens per step to the other requests")
    elif prompt > budget // 2:
        report.warnings.append(
            f"a {prompt}-token prompt takes {min(prompt, budget)} of a step's {budget} tokens "
            f"for {math.ceil(prompt / budget)} step(s) while short requests wait: set "
            f"long_prefill_token_threshold (e.g. {max(32, budget // 4)})")


def _output_advice(report: Any, engine: dict, classes: list, output: int) -> None:
    cap = engine.get("max_output_tokens")
    shortest = min(c.output_tokens.high for c in classes)
    if cap is not None:
        if cap < output:
            report.notes.append(f"max_output_tokens {cap} cuts generations of up to {output} "
                                "tokens: those requests are served shorter (counted as capped)")
    elif output >= 4 * shortest:
        report.notes.append(
            f"generations of up to {output} tokens hold their KV blocks {output // shortest}x "
            f"longer than the shortest class's ({shortest}); engine.max_output_tokens caps "
            "them server-side")

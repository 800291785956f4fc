"""Cross-field rules for workload forms, per-class SLOs and long-request protection knobs.

Checked with the other rules (``recipe.rules.check_rules``) on the resolved recipe. A
dataset's own contents (its lines, their lengths, its class labels) are checked when it is
read, before the load starts (``load.workload``), because that needs the model's tokenizer.
"""

from __future__ import annotations

from typing import Any

from model_optimizer.errors import Diagnostic, UsageError
from model_optimizer.load.trace import parse_speed
from model_optimizer.mix import MixError, parse_mix
from model_optimizer.recipe.validate import did_you_mean
from model_optimizer.recipe.yamlsource import SourceMap


def workload_rules(recipe: dict[str, Any], smap: SourceMap) -> list[Diagnostic]:
    """Every problem of the workload form, slo.classes and the protection knobs."""
    out: list[Diagnostic] = []
    for rule in (_form_rule, length_rule, _class_slo_rule, _protection_rules):
        try:
            out.extend(rule(recipe, smap))
        except (KeyError, TypeError, AttributeError, ValueError):
            continue  # malformed inputs: the schema has reported them
    return out


def longest_request(workload: dict[str, Any]) -> tuple[int, int] | None:
    """(prompt, output) tokens of the longest request a synthetic workload sends.

    None for a dataset or a trace (their lengths are known once read with the tokenizer).
    """
    if workload.get("dataset") or workload.get("trace"):
        return None
    if workload.get("mix"):
        classes = parse_mix(workload["mix"])
        return (max(c.prompt_tokens.high for c in classes),
                max(c.output_tokens.high for c in classes))
    return workload["prompt_tokens"], workload["output_tokens"]


def _form_rule(recipe: dict[str, Any], smap: SourceMap) -> list[Diagnostic]:
    workload = recipe["workload"]
    if workload.get("trace") and (workload.get("mix") or workload.get("dataset")):
        other = "mix" if workload.get("mix") else "dataset"
        return [smap.diagnostic(("workload", "trace"), f"workload.trace and workload.{other} "
                                "exclude each other", "keep one: a trace brings its own prompts "
                                "and arrival times")]
    if workload.get("trace"):
        try:
            parse_speed(workload.get("trace_speed") or 1)
        except UsageError as exc:
            return [smap.diagnostic(("workload", "trace_speed"), str(exc))]
    if workload.get("mix") and workload.get("dataset"):
        return [smap.diagnostic(("workload", "dataset"), "workload.mix and workload.dataset "
                                "exclude each other", "keep one: synthetic classes or a file")]
    if workload.get("mix"):
        try:
            parse_mix(workload["mix"])
        except MixError as exc:
            return [smap.diagnostic(exc.path, str(exc), "see docs/workloads.md")]
    return []


def length_rule(recipe: dict[str, Any], smap: SourceMap) -> list[Diagnostic]:
    """max_model_len against the longest request the workload sends (plain or mix; a
    dataset's lengths are checked once it is read): the rule, in one place."""
    workload, max_len = recipe["workload"], recipe["engine"].get("max_model_len")
    try:
        longest = longest_request(workload)
    except MixError:
        return []  # _form_rule reports the broken mix
    if max_len is None or longest is None or sum(longest) <= max_len:
        return []
    prompt, output = longest
    mix = bool(workload.get("mix"))
    what = "the mix's longest request" if mix else "the workload's prompt + output"
    return [smap.diagnostic(
        ("engine", "max_model_len"),
        f"max_model_len {max_len} is shorter than {what} ({prompt} prompt + {output} output "
        f"tokens = {prompt + output})",
        f"raise max_model_len to at least {prompt + output}, or "
        + ("lower the classes' max lengths" if mix else "shorten the workload"))]


def _class_slo_rule(recipe: dict[str, Any], smap: SourceMap) -> list[Diagnostic]:
    workload, classes = recipe["workload"], dict(recipe["slo"].get("classes") or {})
    known = list(workload.get("mix") or {})
    labelled = workload.get("dataset") or workload.get("trace")  # labels checked when read
    for section in ("tune", "sweep"):
        wanted = recipe[section].get("objective_class")
        if wanted is not None and wanted not in known and not labelled:
            return [smap.diagnostic((section, "objective_class"),
                                    f"no class '{wanted}' in workload.mix",
                                    did_you_mean(wanted, known) or "define the class in "
                                    "workload.mix (or use a dataset with class labels)")]
    if not classes or labelled:
        return []  # a dataset's or a trace's labels are checked when it is read
    if not workload.get("mix"):
        return [smap.diagnostic(("slo", "classes"), "slo.classes needs request classes",
                                "define them in workload.mix, or use a dataset with class "
                                "labels")]
    known = list(workload["mix"])
    return [smap.diagnostic(("slo", "classes", name), f"no class '{name}' in workload.mix",
                            did_you_mean(name, known) or f"classes: {', '.join(known)}",
                            prefer_key=True)
            for name in classes if name not in known]


def _protection_rules(recipe: dict[str, Any], smap: SourceMap) -> list[Diagnostic]:
    engine, out = recipe["engine"], []
    threshold, max_len = engine.get("long_prefill_token_threshold"), engine.get("max_model_len")
    if threshold and max_len is not None and threshold > max_len:
        out.append(smap.diagnostic(
            ("engine", "long_prefill_token_threshold"),
            f"long_prefill_token_threshold {threshold} is above max_model_len {max_len}",
            f"vLLM refuses it: use at most {max_len}"))
    if threshold and engine.get("enable_chunked_prefill") is False:
        out.append(smap.diagnostic(
            ("engine", "long_prefill_token_threshold"),
            "long_prefill_token_threshold has no effect with chunked prefill off",
            "set enable_chunked_prefill to true (or null), or drop the threshold"))
    cap = engine.get("max_output_tokens")
    if cap is not None and "override-generation-config" in engine["extra_args"]:
        out.append(smap.diagnostic(
            ("engine", "max_output_tokens"),
            "max_output_tokens and extra_args override-generation-config both set vLLM's "
            "--override-generation-config", "put max_new_tokens in the extra_args value, or "
            "drop it and keep max_output_tokens"))
    if cap is not None and max_len is not None and cap >= max_len:
        out.append(smap.diagnostic(
            ("engine", "max_output_tokens"),
            f"max_output_tokens {cap} is not below max_model_len {max_len}",
            "it caps nothing that max_model_len does not already cap: lower it"))
    return out

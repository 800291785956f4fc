"""Figures per request class, and SLOs set per class (``slo.classes.<name>``).

A class's figures are ``stats.summarize`` over its own requests, in the same measured window
as the whole run (so class QPS values add up to the run's QPS). A class's SLO is the run's
SLO with the class's own bounds laid over it: ``slo: {ttft_p99_ms: 2000, classes: {short:
{ttft_p99_ms: 300}}}`` holds short requests to 300 ms and every other class to 2000 ms.

The run's goodput counts a request as good when it met its own class's bounds (the run's
bounds for a request without a class), and the run meets its SLOs only when the run as a
whole and every class with an SLO of its own meet theirs; a class's violations read
``short: ttft_p99_ms 412.5 > 300``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from model_optimizer.load.figures import Figures
from model_optimizer.load.stats import is_good_request, per_request_bounds_ms, summarize
from model_optimizer.load.stats import record_field as _field
from model_optimizer.load.steady import finish_time, summarize_steady

CLASS_FIGURES = ("requests", "completed", "failed", "qps", "goodput_qps", "good_requests",
                 "output_tok_s", "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "tpot_p50_ms",
                 "tpot_p99_ms", "e2e_p50_ms", "e2e_p99_ms", "mean_prompt_tokens",
                 "mean_output_tokens", "capped_requests", "cached_prompt_share", "slo_met",
                 "slo_violations", "slo_ratio")


def run_slo(slo: Mapping[str, Any] | None) -> dict[str, Any]:
    """The run-wide bounds of ``slo`` (its ``classes`` left out)."""
    return {key: value for key, value in (slo or {}).items() if key != "classes"}


def class_slo(slo: Mapping[str, Any] | None, name: str | None) -> dict[str, Any]:
    """The bounds that hold for class ``name``: the run's, overlaid with the class's own."""
    merged = run_slo(slo)
    own = ((slo or {}).get("classes") or {}).get(name) if name is not None else None
    merged.update({key: value for key, value in (own or {}).items() if value is not None})
    return merged


def capped_requests(records: Iterable[Any]) -> int:
    """Completed requests that generated fewer tokens than they asked for.

    With ``ignore_eos`` that is a server-side cap (``max_model_len``, a generation-config
    ``max_new_tokens``); without it, also a model that stopped early.
    """
    return sum(1 for record in records if _field(record, "ok")
               and _field(record, "requested_output_tokens") is not None
               and (_field(record, "output_tokens") or 0)
               < _field(record, "requested_output_tokens"))


def cached_prompt_share(records: Iterable[Any]) -> float | None:
    """The share of completed requests' prompt tokens the server reported cached
    (``usage.prompt_tokens_details.cached_tokens``); None when no response carried it."""
    told = [(_field(r, "cached_prompt_tokens"), _field(r, "prompt_tokens")) for r in records
            if _field(r, "ok") and _field(r, "cached_prompt_tokens") is not None
            and _field(r, "prompt_tokens")]
    total = sum(prompt for _, prompt in told)
    return sum(cached for cached, _ in told) / total if total else None


def summarize_classes(records: list[Any], window_s: float | None,
                      slo: Mapping[str, Any] | None,
                      names: Iterable[str] = (),
                      bounds: tuple[float, float] | None = None) -> dict[str, dict[str, Any]]:
    """Figures per class: every class in ``names`` and every class a record carries, in the
    run's steady window ``bounds`` when the run has one (else over ``window_s``)."""
    by_class: dict[str, list[Any]] = {name: [] for name in sorted(set(names))}
    for record in records:
        name = _field(record, "request_class")
        if name is not None:
            by_class.setdefault(name, []).append(record)
    out = {}
    for name, members in sorted(by_class.items()):
        summary = (summarize_steady(members, window_s, class_slo(slo, name), bounds=bounds)
                   if bounds is not None else summarize(members, window_s, class_slo(slo, name)))
        completed = [record for record in members if _field(record, "ok")]
        summary["mean_prompt_tokens"] = _mean(_field(r, "prompt_tokens") for r in completed)
        summary["mean_output_tokens"] = _mean(_field(r, "output_tokens") for r in completed)
        summary["capped_requests"] = capped_requests(members)
        summary["cached_prompt_share"] = cached_prompt_share(members)
        out[name] = {key: summary.get(key) for key in CLASS_FIGURES}
    return out


def apply_classes(metrics: dict[str, Any], records: list[Any], window_s: float | None,
                  slo: Mapping[str, Any] | None, names: Iterable[str] = ()) -> dict[str, Any]:
    """Add ``classes`` (per-class figures) to a run's ``metrics`` and fold their verdicts in.

    Without any class (no ``names``, no labelled record) ``metrics`` is returned unchanged
    except for ``capped_requests``.
    """
    metrics["capped_requests"] = capped_requests(records)
    if (share := cached_prompt_share(records)) is not None:  # the server sent cached_tokens
        metrics["cached_prompt_share"] = share
    steady = metrics.get("steady")
    bounds = (steady["start"], steady["end"]) if steady else None
    classes = summarize_classes(records, window_s, slo, names, bounds)
    if not classes:
        return metrics
    metrics["classes"] = classes
    if bounds is not None:  # the run's own figures: requests finished inside its window
        start, end = bounds
        records = [r for r in records if start < (finish_time(r) or 0) <= end]
        window_s = end - start
    good = sum(1 for record in records if is_good_request(
        record, per_request_bounds_ms(class_slo(slo, _field(record, "request_class")))))
    metrics["good_requests"] = good
    if window_s:
        metrics["goodput_qps"] = good / window_s
    with_own = set((slo or {}).get("classes") or {})
    for name in sorted(with_own & set(classes)):
        for violation in classes[name]["slo_violations"]:
            metrics["slo_violations"].append(f"{name}: {violation}")
    metrics["slo_met"] = not metrics["slo_violations"]
    ratios = [metrics.get("slo_ratio")] + [classes[name].get("slo_ratio")
                                           for name in with_own & set(classes)]
    metrics["slo_ratio"] = max((r for r in ratios if r is not None), default=None)
    return metrics


def figure(metrics: Mapping[str, Any], key: str) -> Any:
    """A run figure by key; ``short:goodput_qps`` reads class ``short``'s figure (the rule is
    ``Figures.figure``'s)."""
    return Figures.from_dict(metrics).figure(key)


def _mean(values: Iterable[Any]) -> float | None:
    numbers = [value for value in values if value is not None]
    return sum(numbers) / len(numbers) if numbers else None

"""A probe sweep's fitted curve in its reports: the band over the measured windows, the
TTFT it predicts, and the levels it predicts without having measured them (HTML here,
``report.md`` through :func:`prediction_markdown`).

Read from ``summary.json`` ``fit`` (written by the sweep: ``search/sweep/predict.py``
``curve_record``); an archive without one shows no fit. Every figure at a level not
measured is a prediction of the fitted model, labelled so; its held-out error is measured
on the real engine and in the simulator (``docs/benchmarks/fit-prediction.md``)."""

from __future__ import annotations

from dataclasses import dataclass

from model_optimizer.archive.report import fmt
from model_optimizer.report.page import Page
from model_optimizer.report.svg import Band, Point, curve_chart

#: where the prediction's error is published, and what it rests on
ERROR_SOURCE = ("held-out error on the real engine and in the simulator: "
                "docs/benchmarks/fit-prediction.md (on a real CPU server, with the sweep's "
                "two passes fitted, throughput and TTFT p50 missed their goals)")


@dataclass(frozen=True)
class Predicted:
    """The fitted model at one level it did not measure: the objective with its band, and
    the TTFT quantiles (None where the archive has no TTFT fit)."""

    level: float
    value: float
    low: float
    high: float
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None


def _series(fit: dict, key: str) -> list[float] | None:
    values = fit.get(key)
    grid = fit.get("grid") or []
    if not isinstance(values, list) or len(values) != len(grid) or not all(
            isinstance(v, int | float) for v in values):
        return None
    return [float(v) for v in values]


def fit_band(fit: dict | None, key: str) -> Band | None:
    """The fitted ``key`` (``qps``, ``ttft_p50_ms``...) over the grid with its band (the
    fitted line alone when the archive has no band); None without it."""
    if not isinstance(fit, dict):
        return None
    mid = _series(fit, key)
    if mid is None:
        return None
    low, high = _series(fit, f"{key}_low") or mid, _series(fit, f"{key}_high") or mid
    return Band([float(x) for x in fit["grid"]], mid, low, high)


def fit_metric(fit: dict | None) -> str:
    """The figure the curve was fitted on (the sweep's objective)."""
    return str((fit or {}).get("metric") or "qps")


def predictions(fit: dict | None) -> list[Predicted]:
    """The fitted model at the grid's levels that were not measured (empty without a fit)."""
    band = fit_band(fit, fit_metric(fit))
    if band is None or fit is None:
        return []
    measured = set(fit.get("levels") or [])
    p50, p99 = _series(fit, "ttft_p50_ms"), _series(fit, "ttft_p99_ms")
    return [Predicted(x, mid, low, high, p50[i] if p50 else None, p99[i] if p99 else None)
            for i, (x, mid, low, high) in enumerate(zip(band.xs, band.mid, band.low, band.high,
                                                        strict=True)) if x not in measured]


def _row(p: Predicted) -> list[str]:
    return [fmt(p.level), f"{fmt(p.value, 2)} ({fmt(p.low, 2)}..{fmt(p.high, 2)})",
            fmt(p.ttft_p50_ms), fmt(p.ttft_p99_ms)]


def _headers(fit: dict, param: str) -> list[str]:
    return [param, f"{fit_metric(fit)} predicted (band)", "TTFT p50 ms predicted",
            "TTFT p99 ms predicted"]


def _how(fit: dict) -> str:
    return (f"predicted by the curve fitted over {fit.get('windows')} measured windows, not "
            f"measured: {fit.get('model')}; band: {fit.get('bootstrap')} bootstrap refits, "
            f"5th..95th percentile; {ERROR_SOURCE}")


def _latency_point(row: dict, key: str) -> Point | None:
    value, metric = row.get("value"), row.get(key)
    if row.get("status") != "ok" or not isinstance(value, int | float) \
            or not isinstance(metric, int | float):
        return None
    return Point(float(value), float(metric), label=f"step {row.get('step')}: {fmt(value)} -> "
                                                    f"{fmt(metric, 1)} ms ({row.get('phase')})")


def fit_section(page: Page, fit: dict | None, rows: list[dict], param: str) -> None:
    """The fitted TTFT p50 over its windows, and the table of predictions at the levels
    not measured (with the objective's band)."""
    if fit is None or fit_band(fit, fit_metric(fit)) is None:
        return
    ttft = fit_band(fit, "ttft_p50_ms")
    points = [p for p in (_latency_point(r, "ttft_p50_ms") for r in rows) if p is not None]
    if ttft is not None and points:
        page.heading(f"TTFT p50 (ms) against {param}")
        page.raw(curve_chart(points, x_label=param, y_label="TTFT p50 ms", band=ttft))
    page.heading("Predicted from the fitted curve at levels not measured")
    page.table(_headers(fit, param), [_row(p) for p in predictions(fit)], table_id="predicted")
    page.paragraph(_how(fit), "muted")


def prediction_markdown(fit: dict | None, param: str) -> list[str]:
    """``report.md``'s section of the same predictions (no lines without a fit)."""
    found = predictions(fit)
    if fit is None or not found:
        return []
    headers = _headers(fit, param)
    return ["", "**Predicted from the fitted curve** at levels not measured:", "",
            "| " + " | ".join(headers) + " |", "|" + "---:|" * len(headers),
            *("| " + " | ".join(_row(p)) + " |" for p in found), "", _how(fit)]

"""The before/after block of the `mopt optimize` report: what a team takes to a meeting.

Baseline against the final configuration (the survivor, swept) with the 95% intervals of the
throughput, the latency and memory figures; the quality verdict against the baseline's
answers, per eval-set class; the checkpoint the written revision pins; and what each stage
cost in vLLM launches and minutes.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from model_optimizer.archive.report import fmt

ROWS = (("ttft_p99_ms", "TTFT p99 ms"), ("tpot_p99_ms", "TPOT p99 ms"),
        ("output_tok_s", "output tok/s"), ("peak_memory_mib", "peak memory MiB"))


QUALITY_SHOWN = ("exact_match_rate", "top1_agreement", "mean_kl", "accuracy",
                 "accuracy_drop")


def quality_figures_text(figures: dict) -> str:
    """The gate's key figures in words: fidelity, accuracy, and the drop (or the accuracy,
    for the reference) per eval-set class."""
    shown = [f"{k} {fmt(float(figures[k]), 3)}" for k in QUALITY_SHOWN
             if isinstance(figures.get(k), int | float) and not isinstance(figures[k], bool)]
    shown += [f"{k.split('.', 1)[1]} drop {fmt(float(v), 3)}" for k, v in figures.items()
              if k.startswith("accuracy_drop.") and isinstance(v, int | float)]
    shown += [f"{name} accuracy {fmt(float(v), 3)}"
              for name, v in (figures.get("accuracy_by_class") or {}).items()]
    return ", ".join(shown)


def _change(before, after) -> str:
    if not isinstance(before, int | float) or not isinstance(after, int | float) or not before:
        return "-"
    return f"{(after - before) / before * 100:+.0f}%"


def _final(state, rows: list[dict]) -> tuple[str, dict] | None:
    by_stage = {row["stage"]: row for row in rows}
    swept = by_stage.get("sweep")
    if swept and swept.get("qps") is not None and state.stages["sweep"].get("status") == "ok":
        return f"{state.survivor}, swept", swept
    if state.survivor in by_stage:
        return state.survivor, by_stage[state.survivor]
    return None


def _figures_table(state, rows: list[dict]) -> list[str]:
    base = next((row for row in rows if row["stage"] == "baseline"), None)
    final = _final(state, rows)
    if base is None or final is None:
        return ["No final configuration: nothing ran well enough.", ""]
    name, after = final
    lines = [f"| | baseline | final ({name}) | change |", "|---|---|---|---|",
             f"| QPS (95% interval) | {base['qps_text']} | {after['qps_text']} | "
             f"{_change(base.get('qps'), after.get('qps'))} |"]
    for key, title in ROWS:
        lines.append(f"| {title} | {fmt(base.get(key))} | {fmt(after.get(key))} | "
                     f"{_change(base.get(key), after.get(key))} |")
    return [*lines, ""]


def _quality(state) -> list[str]:
    if state.ungated:
        return [f"Quality: **NOT QUALITY-GATED**: --no-quality-gate: "
                f"{', '.join(state.ungated)} were judged on speed alone; no answer was "
                "compared with the baseline's.", ""]
    lines = ["Quality against the baseline's answers (fixed prompts and seeds):", ""]
    for name, record in state.stages.items():
        gate = record.get("gate") or {}
        if record.get("kind") != "candidate" or not gate:
            continue
        verdict = ("**passed**" if gate.get("passed") else "**FAILED**") if gate.get(
            "gated") else "not gated"
        shown = quality_figures_text(gate.get("figures") or {})
        why = "" if gate.get("passed") else ": " + "; ".join(gate.get("reasons") or [])
        lines.append(f"- {name}: {verdict}{why}" + (f" ({shown})" if shown else ""))
    return [*lines, ""] if len(lines) > 2 else []


def _pins(state, archive_id: str | None) -> list[str]:
    output = Path(state.output)
    try:
        written = yaml.safe_load(output.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return []
    if (written.get("validated") or {}).get("run_id") != archive_id:
        return ["Pins: no revision written by this pipeline.", ""]
    model = written.get("model") or {}
    pins = model.get("pins") or {}
    if not pins.get("sha256"):
        return [f"Pins: none (`{model.get('path')}` is not a local folder to hash).", ""]
    source = pins.get("source") or {}
    made = (f"; made from `{source.get('path')}` (sha256 {str(source.get('sha256'))[:12]}) "
            f"with quantize scheme {(pins.get('quantize') or {}).get('scheme')}"
            if pins.get("quantize") else "")
    return [f"Pins: the revision serves `{model.get('path')}`, sha256 "
            f"`{pins['sha256'][:16]}…` over {len(pins.get('files') or {})} weight and "
            f"config files{made}; `mopt apply --strict` refuses any other content.", ""]


def _cost(state, rows: list[dict]) -> list[str]:
    lines = ["| stage | launches | minutes |", "|---|---|---|"]
    for row in rows:
        minutes = (row.get("seconds") or 0) / 60
        quantize = row.get("quantize_seconds")
        extra = f" (quantize {quantize / 60:.1f})" if quantize else ""
        lines.append(f"| {row['stage']} | {row['launches']} | {minutes:.1f}{extra} |")
    total_launches = sum(row["launches"] for row in rows)
    total = sum(row.get("seconds") or 0 for row in rows) / 60
    return [*lines, f"| all | {total_launches} | {total:.1f} |", ""]


def before_after(state, rows: list[dict], archive_id: str | None = None) -> list[str]:
    """The report's first section, as Markdown lines."""
    return ["## Before / after", "", *_figures_table(state, rows), *_quality(state),
            *_pins(state, archive_id), "What each stage cost:", "", *_cost(state, rows)]

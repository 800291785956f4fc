"""The outputs of `mopt optimize`: the before/after table (one row per stage), its CSV, a
PNG, the report, and the changes that turn the recipe into the survivor's revision."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

from model_optimizer.archive import RunArchive
from model_optimizer.archive.report import fmt
from model_optimizer.fsutil import save_figure
from model_optimizer.report import write_report as write_html_report
from model_optimizer.search.optimize.summary import before_after, quality_figures_text

COLUMNS = (("stage", "stage"), ("what", "what"), ("status", "status"), ("qps_text", "QPS"),
           ("output_tok_s", "out tok/s"), ("ttft_p50_ms", "TTFT p50 ms"),
           ("ttft_p99_ms", "TTFT p99 ms"), ("tpot_p50_ms", "TPOT p50 ms"),
           ("tpot_p99_ms", "TPOT p99 ms"), ("peak_memory_mib", "peak mem MiB"),
           ("quality", "quality"), ("launches", "launches"), ("seconds", "stage s"))
CSV_EXTRA = ("qps", "qps_half_width", "quantize_seconds", "survivor")
#: the gate's figures shown in the table, in this order (per-class drops after them)
def _quality_text(gate: dict | None) -> str:
    if not gate:
        return "-"
    if not gate.get("gated"):
        reasons = "; ".join(r for r in gate.get("reasons") or [] if r)
        return reasons if reasons.startswith("**") else "not gated: " + reasons
    shown = quality_figures_text(gate.get("figures") or {})
    if gate.get("baseline"):
        return f"reference ({shown})" if shown else "reference"
    verdict = "passed" if gate.get("passed") else "FAILED: " + "; ".join(gate.get("reasons", []))
    return f"{verdict} ({shown})" if shown else verdict


def _qps_text(figures: dict) -> str:
    qps, half = figures.get("qps"), figures.get("qps_half_width")
    if qps is None:
        return "-"
    return f"{qps:.2f} ± {half:.2f}" if half is not None else f"{qps:.2f}"


def stage_launches(name: str, record: dict) -> int:
    """vLLM launches a stage cost: one per measured run (the gate's eval shares its server);
    a sweep's own count from its archive (its levels, scan servers and confirmations)."""
    if name != "sweep":
        return len(record.get("run_ids") or [])
    state_file = Path(record.get("sweep_dir") or "") / "state.json"
    if not state_file.is_file():
        return 0
    state = json.loads(state_file.read_text(encoding="utf-8"))
    return (sum(int(p.get("launches") or 0) for p in state.get("history") or [])
            + int(state.get("server_launches") or 0) + len(state.get("confirmations") or []))


def stage_rows(state) -> list[dict]:
    """One row per stage, in the order they ran."""
    rows = []
    for name, record in state.stages.items():
        figures = record.get("figures") or {}
        memory = figures.get("peak_memory_bytes")
        status = record.get("status", "running")
        if record.get("reason") and status != "ok":
            status = f"{status}: {record['reason']}"
        if name == "sweep" and record.get("chosen") is not None:
            status = f"{status}, max_num_seqs {record['chosen']}"
        quant_s = (record.get("checkpoint") or {}).get("seconds")
        rows.append({
            "stage": name, "what": record.get("what", ""), "status": status,
            **{key: figures.get(key) for key in ("qps", "qps_half_width", "output_tok_s",
                                                 "ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms",
                                                 "tpot_p99_ms")},
            "qps_text": _qps_text(figures),
            "peak_memory_mib": round(memory / 2**20, 1) if memory else None,
            "quality": _quality_text(record.get("gate")),
            "launches": stage_launches(name, record),
            "seconds": record.get("seconds"), "quantize_seconds": quant_s,
            "survivor": name == state.survivor,
        })
    return rows


def markdown_table(rows: list[dict]) -> str:
    """The before/after table in Markdown."""
    lines = ["| " + " | ".join(title for _key, title in COLUMNS) + " |",
             "|" + "---|" * len(COLUMNS)]
    for row in rows:
        cells = [fmt(row.get(key), 1) if isinstance(row.get(key), float) else
                 str(row.get(key) if row.get(key) is not None else "-") for key, _t in COLUMNS]
        if row.get("survivor"):
            cells[0] = f"**{cells[0]}** (survivor)"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _csv(rows: list[dict]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=[key for key, _t in COLUMNS] + list(CSV_EXTRA),
                            extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def _plot(rows: list[dict], path: Path, objective: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    measured = [r for r in rows if r.get("qps") is not None]
    if not measured:
        return
    names = [r["stage"] + (" *" if r.get("survivor") else "") for r in measured]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.bar(names, [r["qps"] for r in measured], color="tab:blue")
    left.set_title("throughput (req/s)")
    right.bar(names, [r.get("ttft_p99_ms") or 0 for r in measured], color="tab:orange")
    right.set_title("TTFT p99 (ms)")
    for axis in (left, right):
        axis.tick_params(axis="x", rotation=30)
    fig.suptitle(f"mopt optimize: one bar per stage (* survivor; chosen by {objective})")
    fig.tight_layout()
    save_figure(fig, path, dpi=100)
    plt.close(fig)


def write_outputs(archive: RunArchive, state, objective: str) -> list[dict]:
    """summary.csv, plot.png and report.md in the pipeline archive; returns the rows."""
    rows = stage_rows(state)
    archive.write_text("summary.csv", _csv(rows))
    _plot(rows, archive.file("plot.png"), objective)
    links = [f"- {name}: " + ", ".join(
        f"`{STEP}`" for STEP in _archives_of(record)) for name, record in state.stages.items()]
    report = [f"# mopt optimize {archive.id}", "",
              f"Recipe `{state.recipe_file}`; survivor: **{state.survivor or 'none'}** "
              f"(by {objective}); revision written to `{state.output}`.", "",
              *before_after(state, rows, archive.id), "## Every stage", "",
              markdown_table(rows), "", "Stage archives (under steps/):", *links, "",
              "![stages](plot.png)", ""]
    archive.write_text("report.md", "\n".join(report))
    write_html_report(archive.path)
    return rows


def _archives_of(record: dict) -> list[str]:
    names = list(record.get("run_ids") or [])
    if (record.get("checkpoint") or {}).get("archive"):
        names.insert(0, record["checkpoint"]["archive"])
    for key in ("sweep_dir",):
        if record.get(key):
            names.append(Path(record[key]).name)
    gate_run = (record.get("gate") or {}).get("run_id")
    return names + ([gate_run] if gate_run else [])


def final_changes(state, survivor: str, candidates, recipe_dir: Path) -> dict[tuple, object]:
    """Recipe changes for the survivor: its checkpoint (served and pinned), its KV dtype,
    and the swept max_num_seqs."""
    changes: dict[tuple, object] = {}
    record = state.stages[survivor]
    if made := record.get("checkpoint"):
        changes.update({("model", "path"): os.path.relpath(made["folder"], recipe_dir),
                        ("model", "quantization"): "compressed-tensors",
                        ("model", "weight_bits"): made["weight_bits"],
                        ("model", "pins"): made["pins"]})
    candidate = next((c for c in candidates if c.name == survivor), None)
    if candidate is not None and candidate.kv_cache_dtype:
        changes[("engine", "kv_cache_dtype")] = candidate.kv_cache_dtype
    swept = state.stages.get("sweep") or {}
    if swept.get("chosen") is not None:
        changes[("engine", "max_num_seqs")] = int(swept["chosen"])
    return changes

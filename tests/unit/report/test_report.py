"""The HTML report shows exactly the archived numbers, in one self-contained file."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from model_optimizer.archive.manifest import write_manifest
from model_optimizer.cli.main import app
from model_optimizer.report import render_report, write_report


class _Tables(HTMLParser):
    """Collects every table's rows (text of each cell) by table id, and every URL used."""

    def __init__(self):
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.urls: list[str] = []
        self._table = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("src", "href"):
            if key in attrs:
                self.urls.append(attrs[key])
        if tag == "table":
            self._table = attrs.get("id") or f"table{len(self.tables)}"
            self.tables[self._table] = []
        elif tag == "tr" and self._table:
            self.tables[self._table].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._table:
            self.tables[self._table][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _parse(html: str) -> _Tables:
    parser = _Tables()
    parser.feed(html)
    return parser


def _archive(folder: Path, kind: str, **files) -> Path:
    folder.mkdir(parents=True)
    status = {"id": folder.name, "kind": kind, "status": "ok",
              "entry": {"recipe_name": "tiny-cpu", "recipe_revision": 3,
                        "created_at": "2026-12-02T04:00:00Z", "vllm_version": "0.32.0",
                        "hardware": "cpu"}}
    (folder / "status.json").write_text(json.dumps(status))
    for name, data in files.items():
        name = name.replace("__", ".")
        (folder / name).write_text(data if isinstance(data, str) else json.dumps(data))
    return folder


SWEEP_SUMMARY = {
    "param": "max_num_seqs", "objective": "qps", "strategy": "probe-scan", "launches": 2,
    "chosen": {"value": 32}, "chosen_reason": "the knee: within 5% of the best",
    "noise": {"cv": 0.04, "values": 2, "windows": 4}, "plateau_threshold": 0.05,
    "steps": [
        {"step": 1, "value": 8, "phase": "grow", "status": "ok", "qps": 23.61,
         "qps_half_width": 2.5, "ttft_p99_ms": 120.0, "reason": "start"},
        {"step": 2, "value": 64, "phase": "grow", "status": "ok", "qps": 70.2,
         "qps_half_width": 6.1, "ttft_p99_ms": 410.0, "reason": "grow"},
        {"step": 3, "value": 32, "phase": "bisect", "status": "ok", "qps": 69.1,
         "qps_half_width": 5.0, "ttft_p99_ms": 240.5, "reason": "bisect"},
    ],
}


def test_a_sweep_report_holds_every_step_in_order_with_its_interval(tmp_path):
    folder = _archive(tmp_path / "sweep-1", "sweep", summary__json=SWEEP_SUMMARY)
    page = _parse(render_report(folder))
    steps = page.tables["steps"]
    assert steps[0][:5] == ["step", "value", "phase", "status", "qps"]
    assert [row[1] for row in steps[1:]] == ["8", "64", "32"]
    assert [row[4] for row in steps[1:]] == ["23.61 ± 2.50", "70.20 ± 6.10", "69.10 ± 5.00"]


def test_the_sweep_curve_is_drawn_by_value_with_error_bars_and_the_choice(tmp_path):
    folder = _archive(tmp_path / "sweep-1", "sweep", summary__json=SWEEP_SUMMARY)
    html = render_report(folder)
    titles = re.findall(r"<title>(step \d+)", html)
    assert titles == ["step 1", "step 3", "step 2"]          # sorted by value: 8, 32, 64
    assert html.count('class="err"') == 3 * 3                # a bar and two caps per point
    assert "chosen 32" in html
    assert "max_num_seqs=32: the knee" in html


def _fitted_summary() -> dict:
    """A probe-fit sweep's summary with its fit (``sweep_fit`` of the rows): issue 11 run 4's
    recorded real windows, with TTFT p50 of the step-time model (the run recorded none)."""
    from model_optimizer.search.sweep.predict import sweep_fit
    from tests.unit.search.core.test_fit import RUN4
    from tests.unit.search.sweep.test_predict import truth

    rows = [{"step": i + 1, "value": v, "phase": "scan-up", "status": "ok", "qps": q,
             "ttft_p50_ms": truth(v)["ttft_p50_ms"]} for i, (v, q) in enumerate(RUN4)]
    return {**SWEEP_SUMMARY, "strategy": "probe-fit", "steps": rows,
            "fit": sweep_fit(rows, 1 / 3, bootstrap=20)}


def test_a_fitted_sweep_shows_its_curve_band_and_the_levels_it_predicts(tmp_path):
    summary = _fitted_summary()
    html = render_report(_archive(tmp_path / "sweep-5", "sweep", summary__json=summary))
    assert html.count('class="band"') == 2 and html.count('class="fit"') == 2  # qps, TTFT
    assert len(re.findall(r"<title>step \d+", html)) == 2 * len(summary["steps"])
    fit = summary["fit"]
    predicted = _parse(html).tables["predicted"]
    unmeasured = [x for x in fit["grid"] if x not in fit["levels"]]
    assert [row[0] for row in predicted[1:]] == [f"{x:,.1f}" for x in unmeasured]
    first = fit["grid"].index(unmeasured[0])
    assert predicted[1][1] == (f"{fit['qps'][first]:,.2f} ({fit['qps_low'][first]:,.2f}.."
                               f"{fit['qps_high'][first]:,.2f})")
    assert predicted[1][2] == f"{fit['ttft_p50_ms'][first]:,.1f}"
    assert predicted[0][1] == "qps predicted (band)"
    assert "Predicted from the fitted curve at levels not measured" in html
    assert "held-out error on the real engine and in the simulator" in html


def test_a_sweep_without_a_fit_draws_no_band(tmp_path):
    html = render_report(_archive(tmp_path / "sweep-6", "sweep", summary__json=SWEEP_SUMMARY))
    assert 'class="band"' not in html and "predicted" not in _parse(html).tables


def test_a_sweep_noisier_than_its_threshold_says_the_windows_do_not_resolve_it(tmp_path):
    summary = {**SWEEP_SUMMARY, "noise": {"cv": 0.11, "values": 3, "windows": 7}}
    html = render_report(_archive(tmp_path / "sweep-4", "sweep", summary__json=summary))
    assert 'class="verdict warn"' in html and "do not resolve this choice" in html


def test_an_unresolved_sweep_says_so_first(tmp_path):
    summary = {**SWEEP_SUMMARY, "resolved": False}
    folder = _archive(tmp_path / "sweep-2", "sweep", summary__json=summary)
    html = render_report(folder)
    assert 'class="verdict warn"' in html and "NOT RESOLVED at this noise" in html


def test_a_run_report_holds_the_archived_figures_and_intervals(tmp_path):
    metrics = {"qps": 20.94, "goodput_qps": 20.0, "output_tok_s": 670.0, "slo_met": True,
               "ttft_p50_ms": 123.5, "ttft_p99_ms": 234.9,
               "intervals": {"qps": {"half_width": 1.25}, "ttft_p99_ms": {"half_width": 30.2}}}
    folder = _archive(tmp_path / "run-1", "run", metrics__json=metrics,
                      recipe__resolved__yaml="engine:\n  max_num_seqs: 16\n  block_size: 32\n")
    page = _parse(render_report(folder))
    assert page.tables["throughput"][1] == ["requests/s", "20.94 ± 1.25"]
    ttft = page.tables["latency"][1]
    assert ttft[0] == "TTFT" and ttft[2] == "123.5" and ttft[4] == "234.9 ± 30.2"
    assert ["max_num_seqs", "16"] in page.tables["engine"]


def test_the_page_is_self_contained_and_escapes_archived_text(tmp_path):
    summary = {**SWEEP_SUMMARY, "chosen_reason": "<script>alert(1)</script>"}
    folder = _archive(tmp_path / "sweep-3", "sweep", summary__json=summary)
    html = render_report(folder)
    assert "<script" not in html
    assert "&lt;script&gt;" in html
    page = _parse(html)
    assert all(not re.match(r"^[a-z]+://", url) for url in page.urls), page.urls


def test_report_command_writes_next_to_a_sealed_archive_and_leaves_it_intact(tmp_path):
    runs = tmp_path / "runs"
    folder = _archive(runs / "20261202T040000Z-tiny-cpu-sweep-abc123", "sweep",
                      summary__json=SWEEP_SUMMARY)
    write_manifest(folder)
    out = tmp_path / "r.html"
    result = CliRunner().invoke(app, ["report", str(folder), "--output", str(out),
                                      "--runs-dir", str(runs)])
    assert result.exit_code == 0, result.output
    assert "70.20 ± 6.10" in out.read_text()
    assert not (folder / "report.html").exists()
    again = CliRunner().invoke(app, ["runs", "show", str(folder), "--runs-dir", str(runs)])
    assert again.exit_code == 0, again.output


def test_report_command_refuses_a_tampered_archive(tmp_path):
    runs = tmp_path / "runs"
    folder = _archive(runs / "20261202T040000Z-tiny-cpu-sweep-def456", "sweep",
                      summary__json=SWEEP_SUMMARY)
    write_manifest(folder)
    (folder / "summary.json").write_text(json.dumps({**SWEEP_SUMMARY, "launches": 1}))
    result = CliRunner().invoke(app, ["report", str(folder), "--runs-dir", str(runs)])
    assert result.exit_code == 2
    assert "tampered" in result.output or "changed" in result.output


@pytest.mark.parametrize("kind", ["rollback", "eval"])
def test_other_kinds_get_a_page_with_their_status(tmp_path, kind):
    folder = _archive(tmp_path / f"{kind}-1", kind)
    target = write_report(folder)
    assert target == folder / "report.html"
    assert "status ok" in target.read_text()

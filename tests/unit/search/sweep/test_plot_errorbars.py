"""The sweep's PNG draws every window with its 95% interval, and one median per value."""

from __future__ import annotations

from types import SimpleNamespace

from matplotlib.container import ErrorbarContainer

import model_optimizer.search.sweep.outputs as outputs


def test_the_sweep_plot_has_an_error_bar_per_window_and_a_median_line(tmp_path, monkeypatch):
    figures = []
    monkeypatch.setattr(outputs, "save_figure", lambda fig, path: figures.append(fig))
    rows = [{"value": v, "status": "ok", "qps": q, "qps_half_width": hw, "goodput_qps": q,
             "ttft_p99_ms": 100.0, "tpot_p50_ms": 5.0}
            for v, q, hw in ((8, 20.0, 2.0), (32, 60.0, 6.0), (16, 40.0, 4.0), (32, 70.0, 8.0))]
    state = SimpleNamespace(objective="qps", config=SimpleNamespace(param="max_num_seqs"),
                            history=[])
    outputs.plot_sweep(tmp_path / "plot.png", state, rows, SimpleNamespace(value=32))
    [fig] = figures
    left = fig.axes[0]
    [bars] = [c for c in left.containers if isinstance(c, ErrorbarContainer)]
    segments = bars.lines[2][0].get_segments()
    spans = sorted(round(seg[1][1] - seg[0][1], 6) for seg in segments)
    assert spans == [4.0, 8.0, 12.0, 16.0]              # 2 x half-width, one per window
    median = [line for line in left.get_lines() if line.get_label() == "QPS median per value"]
    assert list(median[0].get_ydata()) == [20.0, 40.0, 65.0]   # 8, 16, 32 (median of 60, 70)

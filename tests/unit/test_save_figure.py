"""One atomic image writer (``fsutil.save_figure``) for every plot mopt archives."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import pytest

from model_optimizer.fsutil import save_figure

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PACKAGE = Path(__file__).resolve().parents[2] / "model_optimizer"


def test_a_figure_is_written_as_a_png(tmp_path):
    fig, axis = plt.subplots()
    axis.plot([1, 2, 3])
    save_figure(fig, tmp_path / "plot.png", dpi=50)
    plt.close(fig)
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["plot.png"]


def test_a_failing_render_leaves_the_previous_image_and_no_temporary(tmp_path):
    (tmp_path / "plot.png").write_bytes(b"previous")

    class Broken:
        def savefig(self, *args, **kwargs):
            raise KeyboardInterrupt  # Ctrl-C while plotting

    with pytest.raises(KeyboardInterrupt):
        save_figure(Broken(), tmp_path / "plot.png")
    assert (tmp_path / "plot.png").read_bytes() == b"previous"
    assert [p.name for p in tmp_path.iterdir()] == ["plot.png"]


def test_no_module_saves_a_figure_any_other_way():
    direct = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
              if ".savefig(" in p.read_text(encoding="utf-8") and p.name != "fsutil.py"]
    assert direct == [], "use model_optimizer.fsutil.save_figure"

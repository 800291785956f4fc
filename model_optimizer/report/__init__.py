"""The HTML report of an archive: one self-contained file with the figures and their
intervals, the curve with the chosen value, the engine configuration and links to the
archives it is made of (``mopt report``; sweeps, tunes and optimizes write it when they end)."""

from model_optimizer.report.build import REPORT_HTML, render_report, write_report

__all__ = ["REPORT_HTML", "render_report", "write_report"]

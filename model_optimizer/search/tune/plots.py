"""The tune's PNG plots (matplotlib, no display): optimization history, parameter importances,
and throughput against p99 TTFT with the Pareto front."""

from __future__ import annotations

from pathlib import Path

from optuna.trial import FrozenTrial

from model_optimizer.fsutil import save_figure
from model_optimizer.search.tune.space import TuneConfig

COLORS = {"feasible": "tab:green", "infeasible": "tab:orange", "failed": "tab:red",
          "pruned": "tab:gray"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> None:
    plt = _pyplot()
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def _kind(row: dict) -> str:
    if row["status"] == "ok":
        return "feasible" if row["feasible"] else "infeasible"
    return row["status"]


def plot_history(path: Path, rows: list[dict], config: TuneConfig,
                 best: FrozenTrial | None) -> None:
    """Objective per trial (failed and pruned at zero) and the best feasible so far."""
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    fig, axis = plt.subplots(figsize=(8, 4.5), dpi=110)
    finished = [r for r in rows if r["status"] in ("ok", "failed", "pruned")]
    for kind, color in COLORS.items():
        points = [r for r in finished if _kind(r) == kind]
        if points:
            axis.scatter([r["number"] for r in points], [r["objective"] or 0.0 for r in points],
                         color=color, label=kind, zorder=3,
                         marker={"failed": "v", "pruned": "x"}.get(kind, "o"))
    best_so_far, xs, ys = None, [], []
    for row in sorted(finished, key=lambda r: r["number"]):
        if row["feasible"] and (best_so_far is None or row["objective"] > best_so_far):
            best_so_far = row["objective"]
        if best_so_far is not None:
            xs.append(row["number"])
            ys.append(best_so_far)
    if xs:
        axis.step(xs, ys, where="post", color="tab:blue", label="best feasible so far")
    if best is not None:
        axis.axvline(best.number, color="tab:green", linestyle=":", label=f"chosen #{best.number}")
    axis.set_xlabel("trial")
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.set_ylabel(config.metric)
    axis.set_title("optimization history")
    axis.legend(loc="best", fontsize=8)
    _save(fig, path)


def plot_importances(path: Path, found: dict, config: TuneConfig) -> None:
    """optuna's parameter importances as horizontal bars."""
    plt = _pyplot()
    ranked = sorted(found.items(), key=lambda kv: kv[1])
    fig, axis = plt.subplots(figsize=(7, 1.2 + 0.5 * len(ranked)), dpi=110)
    axis.barh([k for k, _ in ranked], [v for _, v in ranked], color="tab:blue")
    axis.set_xlabel(f"importance for {config.metric}")
    axis.set_title("parameter importances")
    _save(fig, path)


def plot_pareto(path: Path, rows: list[dict], front: list[dict], config: TuneConfig,
                best: FrozenTrial | None, ttft_bound_ms: float | None) -> None:
    """Throughput (the objective) against p99 TTFT for completed trials; front and choice."""
    plt = _pyplot()
    fig, axis = plt.subplots(figsize=(8, 4.5), dpi=110)
    done = [r for r in rows if r["status"] == "ok" and r.get(config.metric) is not None
            and r.get("ttft_p99_ms") is not None]
    for kind in ("feasible", "infeasible"):
        points = [r for r in done if _kind(r) == kind]
        if points:
            axis.scatter([r["ttft_p99_ms"] for r in points], [r[config.metric] for r in points],
                         color=COLORS[kind], label=kind, zorder=3)
    for row in done:
        axis.annotate(f"#{row['number']}", (row["ttft_p99_ms"], row[config.metric]),
                      fontsize=7, xytext=(3, 3), textcoords="offset points")
    if front:
        axis.plot([r["ttft_p99_ms"] for r in front], [r[config.metric] for r in front],
                  color="tab:green", linestyle="--", label="Pareto front")
    if ttft_bound_ms is not None:
        axis.axvline(ttft_bound_ms, color="black", linestyle=":", label="SLO ttft_p99_ms")
    chosen = next((r for r in done if best is not None and r["number"] == best.number), None)
    if chosen is not None:
        axis.scatter([chosen["ttft_p99_ms"]], [chosen[config.metric]], s=200, marker="*",
                     color="gold", edgecolor="black", label=f"chosen #{best.number}", zorder=4)
    axis.set_xlabel("TTFT p99 (ms)")
    axis.set_ylabel(config.metric)
    axis.set_title(f"{config.metric} vs p99 TTFT")
    if done:
        axis.legend(loc="best", fontsize=8)
    _save(fig, path)

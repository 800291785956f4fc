"""``mopt export FLEET``: render a fleet's deployment in the asked formats, write it, archive
it, with the rules of a recipe's export (``export/run.py``): no secret in any file, written
atomically into ``--to``, an archive of kind ``export`` keeping the fleet file as given,
``export.json`` and a copy of every file.

The options a recipe's export has for one server (``--replicas``, ``--hpa-max``,
``--tune-workers``) are refused for a fleet: its instances share one accelerator, each
instance is one server. ``--verify-schedule`` is not written for a fleet (``mopt verify``
re-measures one recipe).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from model_optimizer.archive import STATUS_OK, RunArchive, utc_now
from model_optimizer.archive.entry import config_hash
from model_optimizer.archive.names import GIVEN_RECIPE
from model_optimizer.archive.versions import vllm_version
from model_optimizer.export.deployment import ExportError
from model_optimizer.export.fleet import FleetDeployment, build_fleet_deployment
from model_optimizer.export.fleet_vllm import executables
from model_optimizer.export.formats import (
    ExportOptions,
    FleetRendering,
    rendered_fleet,
    resolve_fleet,
)
from model_optimizer.export.outcome import (
    EXPORT_FILE,
    EXPORTED_DIR,
    ExportOutcome,
    check_no_secrets,
    environment_secrets,
)
from model_optimizer.fleet.spec import LoadedFleet
from model_optimizer.fsutil import atomic_write_text

#: an address to listen on or publish at: a host name, IPv4 or IPv6 address
HOST = re.compile(r"[A-Za-z0-9.:-]{1,253}")
#: how a fleet's instances share a GPU in each format (recorded in export.json)
GPU_SHARING = {"vllm": "gpu_memory_utilization shares", "systemd":
               "gpu_memory_utilization shares", "compose": "one card reserved by every "
               "instance, gpu_memory_utilization shares",
               "kubernetes": "NVIDIA device plugin time-slicing, gpu_memory_utilization shares"}


def check_fleet_options(options: ExportOptions) -> None:
    """ExportError for formats and options a fleet's export does not take."""
    for name in options.formats or ("(none)",):
        resolve_fleet(name)
    for flag, given in (("--replicas", options.replicas != 1), ("--hpa-max", options.hpa_max),
                        ("--tune-workers", options.tune_workers)):
        if given:
            raise ExportError(f"{flag} is for a recipe's export; a fleet's instances are one "
                              "server each on one shared accelerator. Fix: drop it, or "
                              "export an instance's recipe")
    if not HOST.fullmatch(options.router_host):
        raise ExportError(f"--router-host {options.router_host!r} is not an address; give a "
                          "host name or an IP address such as 127.0.0.1 or 0.0.0.0")


def render_fleet_files(fleet: FleetDeployment, loaded: LoadedFleet, folder: Path,
                       options: ExportOptions) -> dict[str, str]:
    """Every file of the asked formats (and the ``vllm`` files always), by path."""
    given = FleetRendering(fleet, loaded, folder, options)
    files: dict[str, str] = {}
    for kind in rendered_fleet(given):
        files |= kind.render(given)
    return files


def export_fleet(loaded: LoadedFleet, folder: str | Path, runs_base: str | Path,
                 options: ExportOptions) -> ExportOutcome:
    """Write ``loaded``'s deployment into ``folder`` in ``options.formats`` and archive it."""
    check_fleet_options(options)
    target = Path(folder).resolve()
    fleet = build_fleet_deployment(loaded, options.port, options.force, vllm_version())
    files = render_fleet_files(fleet, loaded, target, options)
    check_no_secrets(files, environment_secrets())
    for name, text in files.items():
        atomic_write_text(target / name, text)
    for name in executables(fleet):
        (target / name).chmod(0o755)
    digests = {name: hashlib.sha256(text.encode()).hexdigest() for name, text in files.items()}
    archive = _archive(loaded, fleet, runs_base, target, options, digests, files)
    return ExportOutcome(target, options.formats, digests, archive, fleet.forced_over)


def _record(loaded: LoadedFleet, fleet: FleetDeployment, target: Path,
            options: ExportOptions, digests: dict[str, str]) -> dict:
    return {"created_at": utc_now(), "fleet_file": str(loaded.path or ""),
            "fleet_name": fleet.fleet_name, "fleet_revision": fleet.revision,
            "folder": str(target), "formats": list(options.formats), "files": digests,
            "router": {"port": fleet.router_port, "host": options.router_host,
                       "model": fleet.router.model, "image": fleet.router_image},
            "instances": {name: {"name": m.dep.name, "port": m.dep.port,
                                 "classes": list(m.classes), "gpu_memory_utilization": m.share,
                                 "cores": list(m.cores) if m.cores else None}
                          for name, m in fleet.members.items()},
            "gpu_sharing": None if fleet.on_cpu else {
                name: GPU_SHARING[name] for name in ("vllm", *options.formats)},
            "forced_over": fleet.forced_over, "vllm_version": vllm_version()}


def _archive(loaded: LoadedFleet, fleet: FleetDeployment, runs_base: str | Path,
             target: Path, options: ExportOptions, digests: dict[str, str],
             files: dict[str, str]) -> Path:
    """An archive of kind ``export``: what was exported, from which fleet, where."""
    record = _record(loaded, fleet, target, options, digests)

    def start(archive: RunArchive) -> None:
        archive.write_text(GIVEN_RECIPE, loaded.source_text)
        archive.write_json(EXPORT_FILE, record)
        for name, text in files.items():
            archive.write_text(f"{EXPORTED_DIR}/{name}", text)
        archive.write_entry(created_at=record["created_at"], recipe_name=fleet.fleet_name,
                            recipe_revision=fleet.revision, recipe_file=record["fleet_file"],
                            recipe_hash=config_hash(loaded.resolved),
                            vllm_version=record["vllm_version"])

    archive = RunArchive.create(runs_base, fleet.fleet_name, kind="export", start=start)
    archive.set_status(STATUS_OK, phase="finished")
    archive.close()
    return archive.path

"""``mopt export``: render a recipe's deployment in the asked formats, write it, archive it.

Every format is rendered from one ``Deployment`` (``export/deployment.py``). Before
anything is written the files are checked for secrets (the values of the secret-named
variables in this process's environment and anything token-shaped): an export never
carries one. The files are written atomically into ``--to``; an archive of kind ``export``
under the runs dir keeps the recipe as given, ``export.json`` (formats, files with their
SHA-256, port, the problems ``--force`` exported over: ``export/gates.py``) and a copy
of every file.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from model_optimizer.archive import STATUS_OK, RunArchive, utc_now
from model_optimizer.archive.entry import config_hash
from model_optimizer.archive.names import GIVEN_RECIPE
from model_optimizer.archive.versions import vllm_version
from model_optimizer.export import vllm
from model_optimizer.export.deployment import (
    Deployment,
    ExportError,
    build_deployment,
)
from model_optimizer.export.formats import (
    ExportOptions,
    Rendering,
    format_names,
    rendered,
    resolve,
    schedule_of,
)
from model_optimizer.export.outcome import (
    EXPORT_FILE,
    EXPORTED_DIR,
    ExportOutcome,
    check_no_secrets,
    environment_secrets,
)
from model_optimizer.fsutil import atomic_write_text
from model_optimizer.recipe import LoadedRecipe

#: the formats' names, in order (``export/formats.py``: each registered by its module)
FORMATS = format_names()


def render_files(dep: Deployment, loaded: LoadedRecipe, folder: Path,
                 options: ExportOptions, runs_base: Path) -> dict[str, str]:
    """Every file of the asked formats, by name, and the ``vllm`` files always (Compose and
    systemd run them, Kubernetes holds the config in a ConfigMap)."""
    given = Rendering(dep, loaded, folder, options, runs_base, schedule_of(options))
    files: dict[str, str] = {}
    for kind in rendered(given):
        files |= kind.render(given)
    return files


def check_options(options: ExportOptions) -> None:
    """ExportError for formats or counts that make no sense."""
    for name in options.formats or ("(none)",):
        resolve(name)
    if options.tune_workers and "kubernetes" not in options.formats:
        raise ExportError("--tune-workers writes a Kubernetes Job: add --format kubernetes")
    schedule_of(options)


def export_recipe(loaded: LoadedRecipe, folder: str | Path, runs_base: str | Path,
                  options: ExportOptions) -> ExportOutcome:
    """Write ``loaded``'s deployment into ``folder`` in ``options.formats`` and archive it."""
    check_options(options)
    target = Path(folder).resolve()
    dep = build_deployment(loaded, options.port, options.force, vllm_version())
    forced_over = dep.forced_over
    files = render_files(dep, loaded, target, options, Path(runs_base))
    check_no_secrets(files, environment_secrets())
    target.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        atomic_write_text(target / name, text)
    (target / vllm.SERVE_SH).chmod(0o755)
    digests = {name: hashlib.sha256(text.encode()).hexdigest() for name, text in files.items()}
    archive = _archive(loaded, runs_base, target, options, digests, forced_over, files)
    return ExportOutcome(target, options.formats, digests, archive, forced_over)


def _archive(loaded: LoadedRecipe, runs_base: str | Path, target: Path,
             options: ExportOptions, digests: dict[str, str], forced_over: list[str],
             files: dict[str, str]) -> Path:
    """An archive of kind ``export``: what was exported, from what, where."""
    record = {"created_at": utc_now(), "recipe_file": str(loaded.path or ""),
              "recipe_name": loaded.name, "recipe_revision": loaded.spec.revision,
              "folder": str(target), "formats": list(options.formats), "files": digests,
              "port": options.port, "forced_over": forced_over,
              "verify_schedule": options.verify_schedule,
              "vllm_version": vllm_version()}

    def start(archive: RunArchive) -> None:
        archive.write_text(GIVEN_RECIPE, loaded.source_text)
        archive.write_json(EXPORT_FILE, record)
        for name, text in files.items():
            archive.write_text(f"{EXPORTED_DIR}/{name}", text)
        archive.write_entry(created_at=record["created_at"], recipe_name=loaded.name,
                            recipe_revision=loaded.spec.revision,
                            recipe_file=record["recipe_file"],
                            recipe_hash=config_hash(loaded.resolved),
                            vllm_version=record["vllm_version"])

    archive = RunArchive.create(runs_base, loaded.name, kind="export", start=start)
    archive.set_status(STATUS_OK, phase="finished")
    archive.close()
    return archive.path

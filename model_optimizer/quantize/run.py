"""`mopt quantize`: run llm-compressor in its own environment, pin the result, write a revision.

Steps: draw the calibration texts (:mod:`calibration`), write a spec file, run
:mod:`worker` with the quantization environment's Python (argument list, no shell, its
own process group, a time limit), move the finished checkpoint into place, hash it and
its source (:mod:`model_optimizer.models.pins`), and write the next recipe revision, which
serves the checkpoint and pins it. Everything is archived as a ``quantize`` run: the spec,
the calibration texts, the subprocess log, the result and the recipe written.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from model_optimizer.archive.entry import run_fields
from model_optimizer.archive.names import RUN_FILE
from model_optimizer.archive.run import STATUS_INTERRUPTED, STATUS_OK, RunArchive, utc_now
from model_optimizer.errors import EXIT_OK, MoptError, UsageError
from model_optimizer.events import EventCallback, QuantizeStage, QuantizeStarted, quiet
from model_optimizer.models.pins import checkpoint_hash
from model_optimizer.plan.quant_schemes import scheme
from model_optimizer.quantize.calibration import calibration_texts
from model_optimizer.recipe.render import model_location
from model_optimizer.recipe.writer import write_revision

QUANT_PYTHON_ENV = "MOPT_QUANT_PYTHON"
REPO_ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).resolve().parent / "worker.py"


class QuantizeError(MoptError):
    """The quantization subprocess failed or produced no usable checkpoint."""

    exit_code = 3


@dataclass(frozen=True)
class QuantizeResult:
    """What `mopt quantize` made and wrote."""

    checkpoint: Path
    pins: dict
    recipe_file: Path
    archive: Path
    seconds: float

    @property
    def exit_code(self) -> int:
        """0: a quantizer that fails raises QuantizeError (3) instead."""
        return EXIT_OK

    def to_dict(self) -> dict:
        """``mopt quantize --json``."""
        return {"ok": True, "checkpoint": str(self.checkpoint),
                "recipe": str(self.recipe_file), "archive": str(self.archive),
                "seconds": self.seconds, "pins": self.pins}


def quant_python() -> Path:
    """The quantization environment's Python: $MOPT_QUANT_PYTHON, else ./.venv-quant."""
    explicit = os.environ.get(QUANT_PYTHON_ENV)
    candidate = Path(explicit) if explicit else REPO_ROOT / ".venv-quant" / "bin" / "python"
    if not candidate.is_file():
        raise UsageError(f"no quantization environment at {candidate}: run "
                         "`bash examples/setup-quant.sh` (llm-compressor in its own venv; it "
                         f"cannot share vLLM's), or set {QUANT_PYTHON_ENV}")
    return candidate


def source_folder(resolved: dict, base_dir: Path | None) -> Path:
    """The unquantized model: ``model.pins.source.path`` when set (a quantized revision),
    else ``model.path``. UsageError when it is not a local folder."""
    source = ((resolved["model"].get("pins") or {}).get("source") or {}).get("path")
    recipe = resolved if not source else {**resolved, "model": {"path": source}}
    folder = Path(model_location(recipe, base_dir))
    if not (folder / "config.json").is_file():
        raise UsageError(f"model {folder}: not a local model folder with config.json; "
                         "quantization reads the weights from disk")
    return folder


def output_folder(resolved: dict, base_dir: Path | None, source: Path) -> Path:
    """``quantize.output``, else ``<source>-<scheme>`` next to the source model."""
    written = resolved["quantize"].get("output")
    if not written:
        return source.parent / f"{source.name}-{resolved['quantize']['scheme']}"
    path = Path(written).expanduser()
    return path if path.is_absolute() or base_dir is None else (base_dir / path).resolve()


def _spec(settings: dict, source: Path, partial: Path, archive: RunArchive,
          trust_remote_code: bool) -> dict:
    return {"source": str(source), "output": str(partial), "scheme": settings["scheme"],
            "group_size": settings["group_size"],
            "smoothing_strength": settings["smoothing_strength"],
            "dampening_frac": settings["dampening_frac"], "ignore": settings["ignore"],
            "texts_file": str(archive.file("calibration.json")),
            "num_samples": settings["calibration"]["num_samples"],
            "max_seq_length": settings["calibration"]["max_seq_length"],
            "seed": settings["calibration"]["seed"],
            "result_file": str(archive.file("result.json")),
            "trust_remote_code": trust_remote_code}


def run_worker(python: Path, spec_file: Path, log_file: Path, timeout_s: float,
               on_event: EventCallback) -> None:
    """Run the worker in its own process group; QuantizeError on failure or timeout.

    Ctrl-C stops the whole group before KeyboardInterrupt propagates.
    """
    argv = [str(python), str(WORKER), str(spec_file)]
    with log_file.open("w", encoding="utf-8") as log:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True, bufsize=1)
        deadline = time.monotonic() + timeout_s
        try:
            for line in proc.stdout:  # type: ignore[union-attr]
                log.write(line)
                log.flush()
                if line.startswith("MOPT-STAGE "):
                    on_event(QuantizeStage(line[len("MOPT-STAGE "):].strip()))
                if time.monotonic() > deadline:
                    raise QuantizeError(f"quantization exceeded quantize.timeout_s "
                                        f"{timeout_s:g} s; see {log_file}")
            code = proc.wait()
        finally:
            _stop_group(proc)
    if code != 0:
        tail = log_file.read_text(encoding="utf-8", errors="replace").splitlines()[-8:]
        raise QuantizeError(f"quantization failed (exit {code}); last lines of {log_file}:\n"
                            + "\n".join(tail))


def _stop_group(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def pins_for(checkpoint: Path, source: Path, resolved: dict, base: Path, tool: str) -> dict:
    """The ``model.pins`` block of the revision serving ``checkpoint``."""
    digest, source_digest = checkpoint_hash(checkpoint), checkpoint_hash(source)
    return {"sha256": digest.sha256, "files": digest.files,
            "source": {"path": os.path.relpath(source, base),
                       "revision": resolved["model"].get("revision"),
                       "sha256": source_digest.sha256},
            "quantize": resolved["quantize"], "tool": tool}


@dataclass(frozen=True)
class Checkpoint:
    """A quantized checkpoint on disk, its pins, and the archive of the run that made it."""

    folder: Path
    pins: dict
    archive: Path
    weight_bits: int
    seconds: float


def _partial(output: Path, archive: RunArchive) -> Path:
    """Where the checkpoint is written until it is complete."""
    return output.parent / f".{output.name}.partial-{archive.id}"


def _write_start(archive: RunArchive, loaded, chosen, folders: tuple[Path, Path],
                 calibration, python: Path) -> None:
    """run.json, the index row, the recipe, the calibration texts and the worker's spec."""
    resolved = loaded.resolved
    source, output = folders
    run = {"id": archive.id, "created_at": utc_now(), "recipe_name": resolved["name"],
           "recipe_revision": resolved["revision"], "recipe_file": str(loaded.path),
           "scheme": chosen.name, "source": str(source), "output": str(output),
           "calibration": calibration.source, "quant_python": str(python)}
    archive.write_json(RUN_FILE, run)
    archive.write_entry(**run_fields(run, None, None))  # its row of the run index
    archive.write_text("recipe.given.yaml", loaded.source_text)
    archive.write_json("calibration.json", calibration.texts)
    archive.write_json("spec.json", _spec(resolved["quantize"], source, _partial(output, archive),
                                          archive, resolved["model"]["trust_remote_code"]))


def make_checkpoint(loaded, runs_root: Path, pins_base: Path, force: bool = False,
                    on_event: EventCallback | None = None,
                    then: Callable[[Checkpoint], str] | None = None) -> Checkpoint:
    """Quantize the recipe's (source) model into its output folder; archive the run.

    ``pins_base`` is the folder the pins' source path is written relative to; ``then``
    (e.g. writing the recipe revision) runs before the archive is sealed, and the text it
    returns is archived as ``recipe.written.yaml``.
    """
    emit = on_event or quiet
    resolved, base = loaded.resolved, loaded.base_dir or Path.cwd()
    settings = resolved["quantize"]
    chosen = scheme(settings["scheme"])
    source = source_folder(resolved, base)
    output = output_folder(resolved, base, source)
    if output.exists() and not force:
        raise UsageError(f"{output}: exists; pass --force to replace it, or set "
                         "quantize.output")
    python = quant_python()
    calibration = calibration_texts(settings["calibration"], base)
    archive = RunArchive.create(runs_root, resolved["name"], kind="quantize", start=lambda new:
                                _write_start(new, loaded, chosen, (source, output),
                                             calibration, python))
    started = time.monotonic()
    partial = _partial(output, archive)
    emit(QuantizeStarted(str(archive.path), chosen.name, calibration.source, str(output)))
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        run_worker(python, archive.file("spec.json"), archive.file("quantize.log"),
                   settings["timeout_s"], emit)
        if not (partial / "config.json").is_file():
            raise QuantizeError(f"the quantizer wrote no checkpoint at {partial}")
        if output.exists():
            shutil.rmtree(output)
        partial.rename(output)
        tool = json.loads(archive.file("result.json").read_text()).get("tool", "llmcompressor")
        pins = pins_for(output, source, resolved, pins_base, tool)
        archive.write_json("pins.json", pins)
        made = Checkpoint(output, pins, archive.path, chosen.weight_bits,
                          round(time.monotonic() - started, 2))
        if then is not None:
            archive.write_text("recipe.written.yaml", then(made))
        archive.set_status(STATUS_OK, finished_at=utc_now(), checkpoint=str(output))
    except KeyboardInterrupt:
        archive.set_status(STATUS_INTERRUPTED, finished_at=utc_now())
        raise
    except MoptError as exc:
        archive.set_status(f"failed:{type(exc).__name__}", finished_at=utc_now(),
                           error=str(exc))
        raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
        if archive.read_status().get("status") == "running":
            archive.set_status("failed:error", finished_at=utc_now())
        archive.close()
    return made


def serving_changes(checkpoint: Checkpoint, recipe_dir: Path) -> dict[tuple, object]:
    """Recipe changes that serve ``checkpoint`` and pin it (paths relative to recipe_dir)."""
    return {("model", "path"): os.path.relpath(checkpoint.folder, recipe_dir),
            ("model", "quantization"): "compressed-tensors",
            ("model", "weight_bits"): checkpoint.weight_bits, ("model", "pins"): checkpoint.pins}


def quantize(loaded, runs_root: Path, recipe_out: Path, force: bool = False,
             on_event: EventCallback | None = None) -> QuantizeResult:
    """Quantize the recipe's model and write the next revision to ``recipe_out``."""
    recipe_dir = recipe_out.resolve().parent
    made = make_checkpoint(
        loaded, runs_root, recipe_dir, force, on_event,
        then=lambda made: write_revision(loaded, serving_changes(made, recipe_dir), None,
                                         recipe_out))
    return QuantizeResult(made.folder, made.pins, recipe_out, made.archive, made.seconds)

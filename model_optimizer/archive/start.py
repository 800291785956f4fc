"""What a run's archive holds from its start (the recipe as given and resolved, run.json
with argv, environment and overrides redacted, its index entry), and the server log scrubbed
of secrets when the server stops: shared by runs, benches, capacity searches and evals."""

from __future__ import annotations

from pathlib import Path

from model_optimizer.archive.entry import run_fields
from model_optimizer.archive.names import GIVEN_RECIPE, RESOLVED_RECIPE, RUN_FILE
from model_optimizer.archive.run import RunArchive, utc_now
from model_optimizer.archive.versions import collect_versions
from model_optimizer.fsutil import atomic_write_text
from model_optimizer.recipe import LoadedRecipe
from model_optimizer.secrets import redact_argv, redact_env, redact_override, redact_text
from model_optimizer.telemetry import hardware_label, hardware_seen


def write_start(archive: RunArchive, loaded: LoadedRecipe, argv: list[str],
                env: dict[str, str], extra: dict) -> None:
    """The start files of a run archive: both recipes, run.json and the index entry."""
    archive.write_text(GIVEN_RECIPE, loaded.source_text)
    archive.write_yaml(RESOLVED_RECIPE, loaded.resolved,
                       header=f"# {loaded.name} as run by mopt, defaults filled in\n")
    run = {
        "id": archive.id, "created_at": utc_now(), "recipe_file": str(loaded.path or ""),
        "recipe_name": loaded.name, "recipe_revision": loaded.spec.revision,
        "overrides": [redact_override(item) for item in loaded.overrides],
        "argv": redact_argv(argv), "env": redact_env(env),
        "versions": collect_versions(), "hardware": hardware_seen(), **extra}
    archive.write_json(RUN_FILE, run)
    archive.write_entry(**run_fields(run, loaded.resolved, hardware_label(run["hardware"])))


def scrub_log(path: Path, known: list[str]) -> None:
    """Hide secrets in a server log as vLLM wrote it: the values mopt passed, URL
    credentials, token-shaped strings. vLLM 0.32 masks only api_key, hf_token and
    watermark_config in its "non-default args" line; other flags and errors print values."""
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
        scrubbed = redact_text(text, known)
        if scrubbed != text:
            atomic_write_text(path, scrubbed)
    except OSError:
        pass  # no log, or an unwritable archive: nothing more to hide here

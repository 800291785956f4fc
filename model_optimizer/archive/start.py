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
from model_optimizer.secrets import (
    redact_argv,
    redact_env,
    redact_override,
    redact_text,
    redact_value,
)
from model_optimizer.telemetry import hardware_label, hardware_seen


def write_start(archive: RunArchive, loaded: LoadedRecipe | None, extra: dict, *,
                argv: list[str] | None = None, env: dict[str, str] | None = None,
                verb: str = "run") -> None:
    """The start files of a run archive: both recipes (none without ``loaded``: an eval of
    a --url alone), run.json and the index entry. run.json has ``argv`` and ``env``
    (redacted) when given; ``verb`` heads the resolved recipe ("run", "evaluated")."""
    if loaded is not None:
        archive.write_text(GIVEN_RECIPE, loaded.source_text)
        archive.write_yaml(RESOLVED_RECIPE, loaded.resolved,
                           header=f"# {loaded.name} as {verb} by mopt, defaults filled in\n")
    run = {"id": archive.id, "created_at": utc_now(), **_recipe_fields(loaded)}
    if argv is not None:
        run["argv"] = redact_argv(argv)
    if env is not None:
        run["env"] = redact_env(env)
    run.update({"versions": collect_versions(), "hardware": hardware_seen(), **extra})
    archive.write_json(RUN_FILE, run)
    archive.write_entry(**run_fields(run, loaded.resolved if loaded else None,
                                     hardware_label(run["hardware"])))


def _recipe_fields(loaded: LoadedRecipe | None) -> dict:
    """run.json's recipe file, name, revision, (redacted) ``--set`` overrides, and the
    values mopt varied itself (``varied``: key, value, source; a sweep's value, a flag)."""
    if loaded is None:
        return {"recipe_file": "", "recipe_name": None, "recipe_revision": None,
                "overrides": [], "varied": []}
    return {"recipe_file": str(loaded.path or ""), "recipe_name": loaded.name,
            "recipe_revision": loaded.spec.revision,
            "overrides": [redact_override(item) for item in loaded.overrides],
            "varied": [{**item.to_dict(),
                        "value": redact_value(item.path[-1], item.value)}
                       for item in loaded.varied_values]}


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

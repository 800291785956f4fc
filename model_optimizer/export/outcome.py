"""What an export wrote, and the check that it carries no secret (a recipe's export and a
fleet's: ``export/run.py``, ``export/fleet_run.py``)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from model_optimizer.export.deployment import ExportError
from model_optimizer.secrets import is_secret_name, looks_like_token

EXPORT_FILE = "export.json"
EXPORTED_DIR = "exported"
#: secret-looking names that hold the shell's working directory
SHELL_PATH_VARIABLES = frozenset({"PWD", "OLDPWD"})


@dataclass
class ExportOutcome:
    """What was written where."""

    folder: Path
    formats: tuple[str, ...]
    files: dict[str, str]
    archive: Path
    forced_over: list[str]

    def to_dict(self) -> dict:
        """JSON-ready summary."""
        return {"folder": str(self.folder), "formats": list(self.formats),
                "files": self.files, "archive": str(self.archive),
                "forced_over": self.forced_over}


def environment_secrets(environ: dict[str, str] | None = None) -> list[str]:
    """Values of this process's secret-named variables (they must appear in no export);
    the shell's working directories (``PWD`` reads as "password") and paths are not."""
    environ = os.environ if environ is None else environ
    return [v for k, v in environ.items() if is_secret_name(k) and len(v) >= 4
            and k not in SHELL_PATH_VARIABLES and not v.startswith("/")]


def check_no_secrets(files: dict[str, str], known: list[str]) -> None:
    """ExportError naming the file when one holds a known secret or a token-shaped value."""
    for name, text in files.items():
        if any(value in text for value in known) or looks_like_token(text):
            raise ExportError(f"{name}: the export would contain a secret; nothing was "
                              "written. Fix: pass secrets to the recipe as ${VAR} references")

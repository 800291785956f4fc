"""Exceptions shared by every stage, each carrying the exit code the CLI returns for it."""

from __future__ import annotations

from dataclasses import dataclass, field

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_START_FAILED = 3
EXIT_SLO_FAILED = 4
EXIT_RUN_FAILED = 5
EXIT_INTERRUPTED = 130


class MoptError(Exception):
    """Base class: a failure mopt explains in one paragraph, without a traceback."""

    exit_code = EXIT_FAILURE


class UsageError(MoptError):
    """Bad input from the user: a wrong flag, a missing file, a broken recipe."""

    exit_code = EXIT_USAGE


class RecipeWarning(UserWarning):
    """Something a recipe may do but probably did not mean (printed as ``warning:``)."""


@dataclass(frozen=True)
class Diagnostic:
    """One problem in a recipe, located as precisely as the source allows."""

    file: str
    line: int | None
    column: int | None
    path: str
    message: str
    hint: str | None = None

    def location(self) -> str:
        """``file:line:column`` (or as much of it as is known)."""
        parts = [self.file]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)

    def format(self) -> str:
        """The one-line human form: ``file:line:col: path: message (hint)``."""
        where = f"{self.path}: " if self.path else ""
        text = f"{self.location()}: {where}{self.message}"
        if self.hint:
            text += f" ({self.hint})"
        return text

    def to_dict(self) -> dict:
        """Machine-readable form for ``--json``."""
        return {
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "path": self.path,
            "message": self.message,
            "hint": self.hint,
        }


@dataclass
class RecipeError(UsageError):
    """A recipe (or its overrides) that cannot be used; holds every problem found at once."""

    diagnostics: list[Diagnostic] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(self.format())

    def format(self) -> str:
        """All diagnostics, one per line, sorted by file and line."""
        ordered = sorted(self.diagnostics, key=lambda d: (d.file, d.line or 0, d.column or 0))
        count = len(ordered)
        head = f"{count} problem{'s' if count != 1 else ''} found; nothing was run or written."
        return "\n".join([*(d.format() for d in ordered), head])

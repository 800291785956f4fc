"""Keep secrets out of archives: environment values and command-line values are redacted."""

from __future__ import annotations

import re

REDACTED = "***redacted***"
_SECRET_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "pass",
                           "credential", "credentials", "auth", "authorization", "cookie"})
_REFERENCE = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*\}$")


def is_secret_name(name: str) -> bool:
    """True for names that usually hold secrets (HF_TOKEN, api-key, ...).

    Word-based, so ``max-num-batched-tokens`` or ``tokenizer`` are not secrets.
    """
    words = re.split(r"[^a-z0-9]+", name.lower())
    return any(word in _SECRET_WORDS for word in words)


def is_reference(value: object) -> bool:
    """True for a ``${VAR}`` reference to mopt's own environment."""
    return isinstance(value, str) and bool(_REFERENCE.match(value))


def redact_env(env: dict[str, str]) -> dict[str, str]:
    """Copy of ``env`` with secret-looking values replaced (``${VAR}`` references kept)."""
    return {k: (REDACTED if is_secret_name(k) and not is_reference(v) else v)
            for k, v in env.items()}


def redact_argv(argv: list[str]) -> list[str]:
    """Copy of ``argv`` with the values of secret-looking flags replaced.

    Handles ``--api-key VALUE`` and ``--api-key=VALUE``.
    """
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(arg if is_reference(arg) else REDACTED)
            hide_next = False
            continue
        if arg.startswith("--") and is_secret_name(arg):
            if "=" in arg:
                flag, _ = arg.split("=", 1)
                out.append(f"{flag}={REDACTED}")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(arg)
    return out

"""Keep secrets out of archives, reports and messages: the one home of every redaction rule.

A lowest layer (imports nothing of mopt), so the recipe rules, the archive writers, the
engine supervisor and the search loops all apply the same rules:

- a *secret name* (``HF_TOKEN``, ``HFTOKEN``, ``GH_PAT``, ``S3_SECRETKEY``, ``MYPASSPHRASE``,
  ``api-key``, ``DB_URL``, ...) hides its value;
- a *token-shaped value* (``hf_...``, ``ghp_...``, ``sk-...``, AWS key ids, JWTs, long
  random-looking strings) is hidden wherever it appears, whatever its name;
- a URL keeps its scheme, host, port and path, but loses its password and the values of its
  query parameters (``postgresql://u:***@db/x?password=***``);
- ``${VAR}`` references are kept: they name a secret, they do not hold it.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

REDACTED = "***redacted***"

#: whole words (split at non-alphanumerics) that name a secret
_SECRET_WORDS = frozenset({
    "key", "apikey", "token", "secret", "password", "passwd", "pass", "pwd", "passphrase",
    "credential", "credentials", "auth", "authorization", "cookie", "jwt", "pat", "dsn",
    "privatekey", "secretkey", "accesskey", "sessionkey", "signature", "bearer",
})
#: fragments that name a secret inside a longer word (HFTOKEN, S3_SECRETKEY, MYPASSPHRASE)
_SECRET_FRAGMENTS = ("secret", "password", "passwd", "passphrase", "privatekey", "apikey",
                     "accesskey", "credential", "bearer")
#: word endings that name a secret (hftoken, ghtoken, awskey) but not tokens/tokenizer
_SECRET_ENDINGS = ("token", "key", "pat", "jwt")
#: words that end like a secret but are not one
_NOT_SECRET = frozenset({"monkey", "hotkey", "turkey", "donkey"})
#: last words that make a name a setting about secrets, not one (long-prefill-token-threshold)
_SETTING_TAILS = frozenset({"threshold", "adaptive", "ids", "count", "size", "len", "limit"})
#: first words of switches (allow-credentials)
_SWITCH_HEADS = frozenset({"allow", "enable", "disable", "use"})
#: names whose values are URLs or connection strings that may carry credentials
_URL_WORDS = frozenset({"url", "uri", "dsn", "endpoint", "storage", "connection"})

#: the whole value (``fullmatch``: ``$`` alone would also accept a final newline)
_REFERENCE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
_TOKEN_PATTERNS = (
    r"hf_[A-Za-z0-9]{20,}",                      # Hugging Face
    r"gh[pousr]_[A-Za-z0-9]{20,}",               # GitHub
    r"github_pat_[A-Za-z0-9_]{20,}",
    r"glpat-[A-Za-z0-9_\-]{16,}",                # GitLab
    r"sk-[A-Za-z0-9_\-]{16,}",                   # OpenAI-style
    r"xox[abprs]-[A-Za-z0-9\-]{10,}",            # Slack
    r"(?:AKIA|ASIA)[0-9A-Z]{16}",                # AWS access key id
    r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*",  # JWT
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
)
_TOKEN_RE = re.compile(r"(?<![A-Za-z0-9_\-])(?:" + "|".join(_TOKEN_PATTERNS) + ")")
#: a long random-looking word: letters of both cases and digits, nothing else (run ids,
#: paths and model names have separators)
_RANDOM_RE = re.compile(r"(?<![A-Za-z0-9_\-/.])[A-Za-z0-9]{32,}(?![A-Za-z0-9_\-/.])")
_URL_RE = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s'\"<>]+")


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"[^a-z0-9]+", str(name).lower()) if w]


def is_secret_name(name: str) -> bool:
    """True for names that usually hold secrets (HF_TOKEN, HFTOKEN, GH_PAT, api-key, ...).

    Word-based, so ``max-num-batched-tokens`` or ``tokenizer`` are not secrets.
    """
    words = _words(name)
    if len(words) > 1 and (words[-1] in _SETTING_TAILS or words[0] in _SWITCH_HEADS):
        return False
    for word in words:
        if word in _SECRET_WORDS or any(part in word for part in _SECRET_FRAGMENTS):
            return True
        if word not in _NOT_SECRET and word.endswith(_SECRET_ENDINGS) and len(word) > 3:
            return True
    return False


def is_url_name(name: str) -> bool:
    """True for names whose values are URLs that may carry credentials (DB_URL, dsn)."""
    return any(word in _URL_WORDS or word.endswith("url") for word in _words(name))


def is_reference(value: object) -> bool:
    """True for a ``${VAR}`` reference to mopt's own environment."""
    return isinstance(value, str) and bool(_REFERENCE.fullmatch(value))


def _random_looking(word: str) -> bool:
    return (sum(c.islower() for c in word) >= 3 and sum(c.isupper() for c in word) >= 3
            and sum(c.isdigit() for c in word) >= 2)


def looks_like_token(value: object) -> bool:
    """True when ``value`` is or contains a credential-shaped string."""
    if not isinstance(value, str) or is_reference(value):
        return False
    if _TOKEN_RE.search(value):
        return True
    return any(_random_looking(m.group(0)) for m in _RANDOM_RE.finditer(value))


def redact_url(url: str) -> str:
    """``url`` without its password and query values; the text as is if it is no URL."""
    try:
        parts = urlsplit(url)
        if not parts.scheme or not (parts.netloc or parts.query):
            return url
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, host = netloc.rsplit("@", 1)
            user = userinfo.split(":", 1)[0]
            netloc = f"{user}:{REDACTED}@{host}" if ":" in userinfo else f"{user}@{host}"
        query = urlencode([(k, REDACTED) for k, _ in parse_qsl(parts.query,
                                                                keep_blank_values=True)],
                          safe="*")
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        return REDACTED


def redact_text(text: str, known: list[str] | tuple[str, ...] = ()) -> str:
    """Free text (a log, a message) with URLs scrubbed, tokens and ``known`` values hidden.

    ``known`` are the secret values mopt itself handed to a process (expanded ``${VAR}``s).
    """
    for value in sorted({k for k in known if k and len(k) >= 4}, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    text = _URL_RE.sub(lambda m: redact_url(m.group(0)), text)
    text = _TOKEN_RE.sub(REDACTED, text)
    return _RANDOM_RE.sub(lambda m: REDACTED if _random_looking(m.group(0)) else m.group(0),
                          text)


def redact_value(name: str, value: object) -> object:
    """One named value as it may be archived."""
    if not isinstance(value, str) or is_reference(value):
        return value
    if is_secret_name(name) and not (is_url_name(name) and "://" in value):
        return REDACTED
    return redact_text(value)


def redact_env(env: dict[str, str]) -> dict[str, str]:
    """Copy of ``env`` with secret-looking values replaced (``${VAR}`` references kept)."""
    return {k: redact_value(k, v) for k, v in env.items()}


def redact_mapping(data: object, name: str = "") -> object:
    """A JSON-like structure with every secret-named or token-shaped value hidden."""
    if isinstance(data, dict):
        return {k: redact_mapping(v, str(k)) for k, v in data.items()}
    if isinstance(data, list):
        return [redact_mapping(v, name) for v in data]
    return redact_value(name, data)


def redact_override(item: str) -> str:
    """A ``--set key=value`` as it may be archived."""
    if "=" not in item:
        return redact_text(item)
    key, value = item.split("=", 1)
    return f"{key}={redact_value(key.rsplit('.', 1)[-1], value)}"


def redact_argv(argv: list[str]) -> list[str]:
    """Copy of ``argv`` with the values of secret-looking flags replaced.

    Handles ``--api-key VALUE`` and ``--api-key=VALUE``; token-shaped values and URL
    credentials are hidden whatever the flag.
    """
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(arg if is_reference(arg) else REDACTED)
            hide_next = False
        elif arg.startswith("--") and is_secret_name(arg):
            flag, sep, _ = arg.partition("=")
            out.append(f"{flag}={REDACTED}" if sep else arg)
            hide_next = not sep
        else:
            out.append(arg if is_reference(arg) else redact_text(arg))
    return out


def secret_values(argv: list[str], env: dict[str, str]) -> list[str]:
    """The values of secret-named flags and variables (to hide them in logs)."""
    values = [v for k, v in env.items() if is_secret_name(k)]
    for flag, value in zip(argv, argv[1:], strict=False):
        if flag.startswith("--") and "=" not in flag and is_secret_name(flag):
            values.append(value)
    values += [a.split("=", 1)[1] for a in argv if a.startswith("--") and "=" in a
               and is_secret_name(a.split("=", 1)[0])]
    return [v for v in values if v]


def contains_secret(name: str, value: object) -> bool:
    """True when ``name: value`` would put a secret into a file (``${VAR}`` never does)."""
    if not isinstance(value, str) or is_reference(value):
        return False
    return redact_value(name, value) != value

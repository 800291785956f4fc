"""What a recipe may make the server load or expose: code-loading settings, secrets, binding.

Recipes are files people share, and mopt starts a server from them. So:

- ``engine.extra_args`` may not set ``config`` (mopt renders the whole configuration itself;
  a vLLM config file could turn ``trust-remote-code`` on behind the recipe's back);
- a vLLM flag or an environment variable that loads code (a class by its import path, a
  plugin file, a logging config, a preloaded library, a module path) or opens the local disk
  to requests is refused unless the recipe names it in ``engine.allow_code``; ``mopt show``
  prints that list next to the trust setting;
- secrets are never written into a recipe (use ``${VAR}``), see ``model_optimizer.secrets``;
- the server binds to an explicit address (an empty host would bind every interface);
- ``model.path`` is a model folder, never a system folder (``/``, ``/etc``, ``/usr``, the
  home folder, ...): an export bind-mounts it into a container;
- no string holds a control character (a newline, a carriage return, an escape): recipe
  values end up in files other programs read line by line (a systemd unit, an env file, a
  YAML header) and on terminals, where a newline starts a new setting. Only
  ``description`` (free text that mopt never renders into a file) may hold tabs and
  newlines.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from model_optimizer.errors import Diagnostic
from model_optimizer.recipe.render import model_location
from model_optimizer.recipe.yamlsource import Path_, SourceMap
from model_optimizer.secrets import contains_secret, looks_like_token

#: flags mopt never passes: it renders the configuration itself
REFUSED_FLAGS = {
    "config": "mopt renders the whole vLLM configuration from the recipe; a vLLM config file "
              "could set trust-remote-code behind its back. Put each setting in the recipe",
}

#: vLLM flags that load code or open the local disk to requests, and why
CODE_FLAGS = {
    "middleware": "imports an ASGI middleware by its Python path",
    "worker-cls": "imports a worker class by its Python path",
    "worker-extension-cls": "imports a worker extension class by its Python path",
    "scheduler-cls": "imports a scheduler class by its Python path",
    "logits-processors": "imports logits processors by their Python path",
    "tool-parser-plugin": "executes a Python file",
    "reasoning-parser-plugin": "executes a Python file",
    "io-processor-plugin": "loads an IO processor plugin",
    "distributed-executor-backend": "may import an executor class by its Python path",
    "compilation-config": "may import inductor passes by their Python path",
    "kv-transfer-config": "may import a KV connector module",
    "ec-transfer-config": "may import an encoder-cache connector module",
    "log-config-file": "a logging config can instantiate any class",
    "logging-config": "a logging config can instantiate any class",
    "allowed-local-media-path": "lets every request read files under that path",
    "trust-request-chat-template": "lets requests supply their own chat templates",
    "trust-request-mm-kwargs": "lets requests pass processor arguments",
}

#: environment variables that load code or libraries into the server
CODE_ENV = {
    "LD_PRELOAD": "preloads a shared library into every process",
    "LD_AUDIT": "loads an audit library into every process",
    "LD_LIBRARY_PATH": "changes which shared libraries load",
    "PYTHONPATH": "changes which Python modules load",
    "PYTHONHOME": "changes which Python standard library loads",
    "PYTHONSTARTUP": "runs a Python file",
    "PYTHONUSERBASE": "changes which Python modules load",
    "PYTHONWARNINGS": "may import a module to resolve a warning category",
    "PYTHONBREAKPOINT": "imports a callable by its Python path",
    "PYTHONINSPECT": "drops the server into an interactive prompt",
    "VLLM_PLUGINS": "loads vLLM plugins",
    "VLLM_LOGGING_CONFIG_PATH": "a logging config can instantiate any class",
    "VLLM_ALLOW_INSECURE_SERIALIZATION": "lets the engine unpickle data (code)",
    "VLLM_NCCL_SO_PATH": "loads a shared library",
    "VLLM_CUDART_SO_PATH": "loads a shared library",
    "VLLM_RUST_FRONTEND_PATH": "runs an executable",
}


#: C0 controls (newline, carriage return, escape, ...), DEL, C1 controls (NEL) and the
#: Unicode line and paragraph separators: what starts a new line or moves a terminal's cursor
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
#: recipe paths whose strings may hold a tab or a newline (free text, never rendered)
_MULTILINE_OK = frozenset({("description",)})


def control_character(text: str, multiline: bool = False) -> str | None:
    """The first control character of ``text`` as Python writes it (``'\\n'``), or None;
    ``multiline`` lets tabs and newlines through."""
    for match in CONTROL_CHARACTERS.finditer(text):
        if not (multiline and match.group(0) in "\t\n"):
            return repr(match.group(0))[1:-1]
    return None


def control_strings(value: object, path: Path_ = ()) -> list[tuple[Path_, str, bool]]:
    """``(path, character, is_key)`` for every string of a recipe (keys too) holding a
    control character; ``description`` may hold tabs and newlines (module docstring)."""
    if isinstance(value, str):
        found = control_character(value, multiline=path in _MULTILINE_OK)
        return [(path, found, False)] if found else []
    out: list[tuple[Path_, str, bool]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found = control_character(key) if isinstance(key, str) else None
            out += [((*path, key), found, True)] if found else []
            out += control_strings(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += control_strings(item, (*path, index))
    return out


def one_line(text: object) -> str:
    """``text`` with every control character escaped (``\\n``, ``\\x1b``): safe in a
    comment or a one-line setting of a file another program reads line by line."""
    return CONTROL_CHARACTERS.sub(lambda m: repr(m.group(0))[1:-1], str(text))


def flag_name(key: object) -> str:
    """An ``extra_args`` key as vLLM's long flag name (``--no-x`` and ``x`` alike)."""
    name = str(key).removeprefix("--")
    return name.removeprefix("no-") if name.startswith("no-") else name


def code_settings(recipe: dict[str, Any]) -> list[str]:
    """The code-loading flags and variables a resolved recipe sets (what ``show`` prints)."""
    engine = recipe["engine"]
    flags = [flag_name(k) for k in engine["extra_args"] if flag_name(k) in CODE_FLAGS]
    env = [str(k) for k in engine["env"] if str(k) in CODE_ENV]
    return sorted(set(flags)) + sorted(set(env))


def check_security(recipe: dict[str, Any], smap: SourceMap) -> list[Diagnostic]:
    """Every refused setting of a resolved recipe."""
    out: list[Diagnostic] = []
    for rule in (_refused_flags, _code_rule, _secret_rule, _token_rule, _host_rule,
                 _control_rule, _model_path_rule):
        try:
            out.extend(rule(recipe, smap))
        except (KeyError, TypeError, AttributeError, ValueError):
            continue  # malformed input: the schema has reported it
    return out


def _refused_flags(recipe: dict[str, Any], smap: SourceMap) -> list[Diagnostic]:
    return [smap.diagnostic(("engine", "extra_args", key), f"'{flag_name(key)}' is refused",
                            REFUSED_FLAGS[flag_name(key)], prefer_key=True)
            for key in recipe["engine"]["extra_args"] if flag_name(key) in REFUSED_FLAGS]


def _code_rule(recipe: dict[str, Any], smap: SourceMap) -> list[Diagnostic]:
    engine = recipe["engine"]
    allowed = {str(name) for name in engine.get("allow_code") or []}
    out = []
    for section, table, key_of in (("extra_args", CODE_FLAGS, flag_name), ("env", CODE_ENV, str)):
        for key in engine[section]:
            name = key_of(key)
            if name in table and name not in allowed:
                out.append(smap.diagnostic(
                    ("engine", section, key),
                    f"'{name}' {table[name]}: mopt does not let a recipe load code unasked",
                    f"if you trust this recipe, add '{name}' to engine.allow_code",
                    prefer_key=True))
    for index, name in enumerate(engine.get("allow_code") or []):
        if name not in CODE_FLAGS and name not in CODE_ENV:
            out.append(smap.diagnostic(
                ("engine", "allow_code", index),
                f"'{name}' is not a code-loading flag or variable mopt guards",
                "list only names mopt refused, e.g. worker-extension-cls or PYTHONPATH"))
    return out


def _secret_rule(recipe: dict[str, Any], smap: SourceMap) -> list[Diagnostic]:
    """Secrets never sit in a recipe (recipes are archived and shared): use ${VAR}."""
    out = []
    engine = recipe["engine"]
    for section in ("env", "extra_args"):
        for name, value in engine[section].items():
            if contains_secret(str(name), value):
                out.append(smap.diagnostic(
                    ("engine", section, name),
                    f"'{name}' looks like a secret written into the recipe",
                    f"keep it in mopt's environment and write '${{{_env_name(name)}}}' here; "
                    "mopt expands it at launch and never archives it"))
    return out


def _token_rule(recipe: dict[str, Any], smap: SourceMap) -> list[Diagnostic]:
    """A credential-shaped value anywhere else in the recipe (description, model path)."""
    out: list[Diagnostic] = []

    def walk(value: object, path: Path_) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if path + (key,) not in (("engine", "env"), ("engine", "extra_args")):
                    walk(item, path + (key,))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, path + (index,))
        elif looks_like_token(value):
            out.append(smap.diagnostic(path, "this value looks like a credential (token or "
                                             "key); recipes are archived and shared",
                                       "remove it; pass secrets as ${VAR} in engine.env"))
    walk(recipe, ())
    return out


def _host_rule(recipe: dict[str, Any], smap: SourceMap) -> list[Diagnostic]:
    host = recipe["engine"]["host"]
    if isinstance(host, str) and not host.strip():
        return [smap.diagnostic(("engine", "host"), "an empty host binds every interface",
                                "use 127.0.0.1 (loopback), or 0.0.0.0 if you mean to expose "
                                "the server")]
    return []


def _control_rule(recipe: dict[str, Any], smap: SourceMap) -> list[Diagnostic]:
    """A control character in any string of the recipe, keys included (module docstring)."""
    return [smap.diagnostic(
        path, f"this {'key' if is_key else 'value'} holds the control character '{found}'; "
        "a recipe string is one line of text (a newline here would start a new setting in "
        "an exported systemd unit or env file)",
        "write it on one line without escapes such as \\n, \\r or \\t", prefer_key=is_key)
        for path, found, is_key in control_strings(recipe)]


#: folders no model lives in by itself: the file system's root and its top-level system
#: folders (Filesystem Hierarchy Standard), and the folder of home folders
SYSTEM_FOLDERS = frozenset(Path(p) for p in (
    "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32",
    "/proc", "/root", "/run", "/sbin", "/sys", "/tmp", "/usr", "/var", "/usr/bin",
    "/usr/lib", "/usr/local", "/usr/sbin", "/usr/share", "/var/lib"))


def system_folder(location: str | Path) -> bool:
    """True when ``location`` (resolved) is a system folder or the user's home folder."""
    path = Path(location)
    return path in SYSTEM_FOLDERS or path == Path.home().resolve()


def _model_path_rule(recipe: dict[str, Any], smap: SourceMap) -> list[Diagnostic]:
    """``model.path`` may not name a system folder (module docstring)."""
    source = Path(smap.file)
    location = model_location(recipe, source.resolve().parent if source.is_file() else None)
    if not Path(location).is_absolute() or not system_folder(location):
        return []
    return [smap.diagnostic(("model", "path"),
                            f"model.path resolves to {location}, a system folder, not a model "
                            "folder (an export would mount it into a container)",
                            "point it at the folder holding the model's config.json and "
                            "weights, e.g. ../models/tiny-llama")]


def _env_name(name: object) -> str:
    return str(name).upper().replace("-", "_")

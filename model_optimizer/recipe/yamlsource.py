"""Safe YAML loading that remembers where every key and value came from.

PyYAML's safe constructor builds the data, so a ``!!python/object`` tag is an error, never
code. The composed node tree is walked once more to record ``file:line:column`` for each
dotted path and to reject duplicate keys (plain PyYAML silently keeps the last one).

Hostile input stays bounded: only a regular file is read (a FIFO with no writer, a device
or a socket is refused before a byte is read), at most ``MAX_RECIPE_BYTES`` of it, anchors
and aliases are refused before anything is built (a few hundred bytes of nested aliases
expand to gigabytes, and a self-referencing one never ends), more than ``MAX_TOKENS`` YAML
tokens (a megabyte-long flow list) are refused while scanning, before a node is composed,
and nesting deeper than ``MAX_DEPTH`` is refused before it reaches Python's recursion limit.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from model_optimizer.errors import Diagnostic, RecipeError

MAX_RECIPE_BYTES = 1 << 20  # a recipe is a page of YAML; a megabyte is a mistake
MAX_NODES = 100_000
MAX_TOKENS = 20_000  # the largest shipped recipe scans to about 350 tokens
MAX_DEPTH = 64

Path_ = tuple[str | int, ...]  # a path into the document: keys and list indexes


@dataclass
class SourceMap:
    """Where things are in one source: 1-based line and column per document path."""

    file: str
    values: dict[Path_, tuple[int, int]] = field(default_factory=dict)
    keys: dict[Path_, tuple[int, int]] = field(default_factory=dict)
    overridden: dict[Path_, str] = field(default_factory=dict)
    ends: dict[Path_, tuple[int, int]] = field(default_factory=dict)
    flow: set[Path_] = field(default_factory=set)

    def locate(self, path: Path_, prefer_key: bool = False) -> tuple[int | None, int | None]:
        """Position of ``path``, else of its nearest ancestor that has one."""
        path = tuple(path)
        while True:
            table_order = (self.keys, self.values) if prefer_key else (self.values, self.keys)
            for table in table_order:
                if path in table:
                    return table[path]
            if not path:
                return (None, None)
            path = path[:-1]

    def diagnostic(self, path: Path_, message: str, hint: str | None = None,
                   prefer_key: bool = False) -> Diagnostic:
        """A diagnostic located at ``path`` (or at the ``--set`` that put it there)."""
        path = tuple(path)
        for cut in range(len(path), 0, -1):
            if path[:cut] in self.overridden:
                return Diagnostic(self.overridden[path[:cut]], None, None, dotted(path),
                                  message, hint)
        line, column = self.locate(path, prefer_key)
        return Diagnostic(self.file, line, column, dotted(path), message, hint)


def dotted(path: Path_) -> str:
    """``('engine', 'env', 'X')`` -> ``engine.env.X``; list indexes as ``[i]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _mark(node: yaml.Node) -> tuple[int, int]:
    return (node.start_mark.line + 1, node.start_mark.column + 1)


def _walk(node: yaml.Node, path: Path_, smap: SourceMap, problems: list[Diagnostic],
          seen: set[int]) -> None:
    """Record positions below ``node``; report duplicate keys. Aliases are walked once."""
    if id(node) in seen:
        return
    seen.add(id(node))
    if len(path) > MAX_DEPTH:
        raise RecipeError([Diagnostic(smap.file, *_mark(node), dotted(path[:3]) + ".…",
                                      f"nested more than {MAX_DEPTH} levels deep",
                                      "a recipe is a few levels of sections")])
    if len(seen) > MAX_NODES:
        raise RecipeError([Diagnostic(smap.file, None, None, "",
                                      f"more than {MAX_NODES} YAML nodes; a recipe is small")])
    smap.values[path] = _mark(node)
    smap.ends[path] = (node.end_mark.line + 1, node.end_mark.column + 1)
    if getattr(node, "flow_style", False):
        smap.flow.add(path)
    if isinstance(node, yaml.MappingNode):
        first_seen: dict[object, tuple[int, int]] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else repr(key_node)
            if key in first_seen:
                line, col = first_seen[key]
                problems.append(Diagnostic(
                    smap.file, *_mark(key_node), dotted((*path, key)),
                    f"duplicate key '{key}' (first defined at line {line}, column {col})",
                    "keep one of them: YAML would silently use the last"))
                continue
            first_seen[key] = _mark(key_node)
            smap.keys[(*path, key)] = _mark(key_node)
            _walk(value_node, (*path, key), smap, problems, seen)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, (*path, index), smap, problems, seen)


def _decode(raw: bytes, file: str) -> str:
    """UTF-8 text, or a diagnostic pointing at the first bad byte."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = raw[: exc.start]
        line = before.count(b"\n") + 1
        column = exc.start - (before.rfind(b"\n") + 1) + 1
        raise RecipeError([Diagnostic(
            file, line, column, "", f"not valid UTF-8 (byte 0x{raw[exc.start]:02x})",
            "save the file as UTF-8")]) from None
    return text.removeprefix("\ufeff")


def _yaml_error(exc: yaml.YAMLError, file: str) -> Diagnostic:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    hint = None
    if "constructor for the tag" in problem:
        problem = "unsafe or unknown YAML tag " + problem.split("tag", 1)[1].strip()
        hint = "recipes hold plain data: remove the tag"
    elif "found character '\\t'" in problem:
        hint = "indent with spaces, not tabs"
    else:
        context = getattr(exc, "context", None)
        problem = f"{context}: {problem}" if context else problem
    line = mark.line + 1 if mark else None
    column = mark.column + 1 if mark else None
    return Diagnostic(file, line, column, "", f"YAML syntax: {problem}", hint)


def _refuse_aliases_and_depth(text: str, file: str) -> None:
    """Scan the token stream: no anchors or aliases, bounded nesting and length (nothing
    built yet)."""
    depth = 0
    try:
        for count, token in enumerate(yaml.scan(text, Loader=yaml.SafeLoader)):
            if count >= MAX_TOKENS:
                raise RecipeError([Diagnostic(
                    file, token.start_mark.line + 1, token.start_mark.column + 1, "",
                    f"more than {MAX_TOKENS:,} YAML tokens; a recipe is a page of YAML",
                    "is this the right file?")])
            if isinstance(token, (yaml.AnchorToken, yaml.AliasToken)):
                kind = "anchor" if isinstance(token, yaml.AnchorToken) else "alias"
                raise RecipeError([Diagnostic(
                    file, token.start_mark.line + 1, token.start_mark.column + 1, "",
                    f"YAML {kind} '{token.value}': recipes do not use anchors or aliases",
                    "write the values out; they are a few lines")])
            if isinstance(token, (yaml.BlockMappingStartToken, yaml.BlockSequenceStartToken,
                                  yaml.FlowMappingStartToken, yaml.FlowSequenceStartToken)):
                depth += 1
            elif isinstance(token, (yaml.BlockEndToken, yaml.FlowMappingEndToken,
                                    yaml.FlowSequenceEndToken)):
                depth -= 1
            if depth > MAX_DEPTH:
                raise RecipeError([Diagnostic(
                    file, token.start_mark.line + 1, token.start_mark.column + 1, "",
                    f"nested more than {MAX_DEPTH} levels deep",
                    "a recipe is a few levels of sections")])
    except yaml.YAMLError as exc:
        raise RecipeError([_yaml_error(exc, file)]) from None


def parse_yaml(raw: bytes, file: str) -> tuple[object, SourceMap]:
    """Parse YAML bytes safely into data plus a :class:`SourceMap`; raise RecipeError."""
    if len(raw) > MAX_RECIPE_BYTES:
        raise RecipeError([Diagnostic(
            file, None, None, "",
            f"file is over {MAX_RECIPE_BYTES:,} bytes, the limit for recipes",
            "is this the right file?")])
    text = _decode(raw, file)
    _refuse_aliases_and_depth(text, file)
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise RecipeError([Diagnostic(file, 1, 1, "", "the file is empty",
                                          "start from recipes/tiny-cpu.yaml")])
        data = loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise RecipeError([_yaml_error(exc, file)]) from None
    except (RecursionError, MemoryError, OverflowError) as exc:
        raise RecipeError([Diagnostic(file, None, None, "",
                                      f"cannot be read as a recipe ({type(exc).__name__})",
                                      "a recipe is a page of plain YAML")]) from None
    except (ValueError, TypeError, AttributeError, LookupError) as exc:  # `!!int ""`
        raise RecipeError([Diagnostic(file, None, None, "",
                                      f"a tagged value cannot be built ({exc})",
                                      "drop the explicit YAML tag (!!timestamp, !!binary, "
                                      "...)")]) from None
    finally:
        loader.dispose()
    smap = SourceMap(file)
    problems: list[Diagnostic] = []
    _walk(node, (), smap, problems, set())
    if problems:
        raise RecipeError(problems)
    return data, smap


def _read_regular(path: str | Path, file: str) -> bytes:
    """At most ``MAX_RECIPE_BYTES + 1`` bytes of a regular file; anything else is refused
    before a byte is read (opened non-blocking, so a FIFO with no writer cannot hang)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(path)
        if not stat.S_ISREG(mode):
            kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a device"
                    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a plain file")
            raise RecipeError([Diagnostic(file, None, None, "",
                                          f"is {kind}, not a regular recipe file",
                                          "give the path of a YAML file")])
        chunks, left = [], MAX_RECIPE_BYTES + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 16))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_yaml_file(path: str | Path) -> tuple[object, SourceMap, bytes]:
    """Read and parse a YAML file (data, positions, the bytes read); errors are RecipeErrors."""
    file = str(path)
    try:
        raw = _read_regular(path, file)
    except FileNotFoundError:
        raise RecipeError([Diagnostic(file, None, None, "", "file not found",
                                      "check the path; recipes live in recipes/")]) from None
    except IsADirectoryError:
        raise RecipeError([Diagnostic(file, None, None, "",
                                      "is a folder, not a recipe file")]) from None
    except OSError as exc:
        raise RecipeError([Diagnostic(file, None, None, "",
                                      f"cannot read: {exc.strerror}")]) from None
    return (*parse_yaml(raw, file), raw)

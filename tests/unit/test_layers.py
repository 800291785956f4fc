"""Lower layers never import higher ones: every import of every module, parsed (ast), checked
against the one layer order in ``model_optimizer/layers.py``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from model_optimizer.layers import LAYERS, layer_of

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "model_optimizer"

#: (module, imported module) pairs allowed to run the wrong way, each with the reason and
#: who removes it; none today
KNOWN_EXCEPTIONS: frozenset[tuple[str, str]] = frozenset()


def module_name(path: Path) -> str:
    """``model_optimizer/a/b.py`` -> ``model_optimizer.a.b`` (a package is its __init__)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def top_name(module: str) -> str:
    """The layer name of a module: its first component under model_optimizer."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def imports_of(source: str, module: str, package: bool = False) -> list[tuple[int, str]]:
    """(line, imported module) for every mopt import in ``source``, function-level too;
    ``from model_optimizer import x`` counts as importing ``model_optimizer.x``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                anchor = module.split(".")[: len(module.split(".")) - node.level
                                            + (1 if package else 0)]
                base = ".".join(anchor + ([base] if base else []))
            found += [(node.lineno, f"{base}.{alias.name}" if _is_submodule(base, alias.name)
                       else base) for alias in node.names]
    return sorted({(line, name) for line, name in found
                   if name == "model_optimizer" or name.startswith("model_optimizer.")})


def _is_submodule(base: str, name: str) -> bool:
    folder = ROOT.joinpath(*base.split("."))
    return (folder / name).is_dir() or (folder / f"{name}.py").is_file()


def violations(source: str, module: str, package: bool = False) -> list[str]:
    """Each import in ``source`` (the text of ``module``) that breaks the layer order."""
    own = top_name(module)
    own_layer = layer_of(own)
    out = []
    for line, target in imports_of(source, module, package):
        other = top_name(target)
        if other == own or (module, target) in KNOWN_EXCEPTIONS:
            continue
        other_layer = layer_of(other)
        if other_layer is None or own_layer is None:
            out.append(f"{module}:{line} imports {target}: "
                       f"'{other if other_layer is None else own}' has no layer in "
                       "model_optimizer/layers.py")
        elif other_layer >= own_layer:
            why = "a higher layer" if other_layer > own_layer else "a sibling in its layer"
            out.append(f"{module}:{line} imports {target}, {why} ('{own}' is layer "
                       f"{own_layer}, '{other}' layer {other_layer})")
    return out


def test_every_top_level_package_and_module_has_a_layer():
    names = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
             if (p.is_file() and p.suffix == ".py") or (p / "__init__.py").is_file()}
    names = {"" if n == "__init__" else n for n in names}
    missing = sorted(n for n in names if layer_of(n) is None)
    assert not missing, f"place these in model_optimizer/layers.py LAYERS: {missing}"
    placed = [name for layer in LAYERS for name in layer]
    assert len(placed) == len(set(placed)), "a name is in two layers"


def test_no_lower_layer_imports_a_higher_one():
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        problems += violations(path.read_text(encoding="utf-8"), module_name(path),
                               is_package(path))
    assert not problems, "layering broken (see docs/design.md, Layers):\n" + "\n".join(
        problems)


def test_the_check_catches_upward_sideways_and_unplaced_imports():
    assert violations("from model_optimizer.search.sweep.loop import hardware_label\n",
                      "model_optimizer.history.drift") == [
        "model_optimizer.history.drift:1 imports model_optimizer.search.sweep.loop, a higher layer "
        f"('history' is layer {layer_of('history')}, 'sweep' layer {layer_of('sweep')})"]
    inside = "def f():\n    from model_optimizer.cli import apply\n"  # lazy imports count
    assert "a higher layer" in violations(inside, "model_optimizer.runner")[0]
    assert "model_optimizer.cli.apply" in violations(inside, "model_optimizer.runner")[0]
    assert "a sibling" in violations("import model_optimizer.search.tune.space\n",
                                     "model_optimizer.search.sweep.strategy")[0]
    assert "has no layer" in violations("from model_optimizer import search\n",
                                        "model_optimizer.newthing")[0]
    relative = "from ..cli import main\n"
    assert "a higher layer" in violations(relative, "model_optimizer.recipe.render")[0]
    assert violations("from model_optimizer.errors import UsageError\n"
                      "from model_optimizer.recipe import load_recipe\n",
                      "model_optimizer.search.sweep.loop") == []


def test_the_design_document_shows_the_same_order():
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    section = text[text.index("## 5. Layers"):]
    section = section[: section.index("\n## ", 4)]
    positions = []
    for layer in LAYERS:
        for name in layer:
            if not name or name == "layers":
                continue
            match = re.search(rf"`{re.escape(name)}`", section)
            assert match, f"docs/design.md, Layers: `{name}` is not shown"
            positions.append((layer_of(name), match.start()))
    rows = [min(p for layer, p in positions if layer == n) for n in sorted(
        {layer for layer, _ in positions})]
    assert rows == sorted(rows), "docs/design.md lists the layers in another order"


def test_no_module_imports_another_module_s_private_names():
    """Shared helpers live in a public module (the CLI's in ``cli.common``), not behind an
    underscore in a sibling."""
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "model_optimizer") and node.module != module:
                problems += [f"{module}:{node.lineno} imports {node.module}.{alias.name}"
                             for alias in node.names if alias.name.startswith("_")
                             and not alias.name.startswith("__")]
    assert not problems, "\n".join(problems)


def mutual_imports(sources: dict[str, str]) -> list[str]:
    """Pairs of modules (not packages' ``__init__``) that import each other, at any level
    of the file (TYPE_CHECKING and function-level imports too): a circle, however hidden."""
    graph = {module: {target for _, target in imports_of(text, module)}
             for module, text in sources.items()}
    return sorted(f"{a} <-> {b}" for a in graph for b in graph[a]
                  if a < b and b in graph and a in graph[b])


def test_no_two_modules_import_each_other():
    sources = {module_name(path): path.read_text(encoding="utf-8")
               for path in sorted(PACKAGE.rglob("*.py")) if not is_package(path)}
    circles = mutual_imports(sources)
    assert not circles, "modules that import each other (give the lower one a small " \
        "interface instead, as search/tune/scan.py's ScanHost):\n" + "\n".join(circles)


def test_the_circle_check_sees_a_type_checking_import():
    loop = "from model_optimizer.search.tune.scan import TrialScanner\n"
    scan = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from model_optimizer.search.tune.loop import TuneRunner\n")
    assert mutual_imports({"model_optimizer.search.tune.loop": loop,
                           "model_optimizer.search.tune.scan": scan}) == [
        "model_optimizer.search.tune.loop <-> model_optimizer.search.tune.scan"]


#: modules of ``cli/`` that the command modules share (options, progress, printing, the
#: recipe chosen, completion, the fleet halves of apply and plan); every other module that
#: ``cli/main.py`` imports is a command module
CLI_SHARED = frozenset({"common", "completion", "current", "fleet_apply", "fleet_plan",
                        "outcomes", "progress"})


def cli_imports(name: str) -> set[str]:
    """The ``cli`` modules that ``cli/<name>.py`` imports (function-level ones too)."""
    module = f"model_optimizer.cli.{name}"
    source = (PACKAGE / "cli" / f"{name}.py").read_text(encoding="utf-8")
    return {target.split(".")[2] for _, target in imports_of(source, module)
            if target.startswith("model_optimizer.cli.")}


def test_no_command_module_imports_another():
    """A command module parses, calls its use case and prints; what two commands share
    lives in a shared module or in ``usecase/``, never in another command's module."""
    commands = cli_imports("main") - CLI_SHARED
    assert {"apply", "bench", "rollback", "verify", "eval"} <= commands
    problems = sorted(f"cli/{name}.py imports cli/{other}.py" for name in commands
                      for other in cli_imports(name) & commands)
    assert not problems, "\n".join(problems)

"""Lower layers never import higher ones: every import of every module, parsed (ast), checked
against the one layer order in ``model_optimizer/layers.py``: ``LAYERS`` between the
top-level packages and modules, ``FAMILIES`` between the children of a family package."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from model_optimizer.layers import FAMILIES, LAYERS, child_layer_of, layer_of

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "model_optimizer"

#: (module, imported module) pairs allowed to run the wrong way, each with the reason and
#: who removes it; none today
KNOWN_EXCEPTIONS: frozenset[tuple[str, str]] = frozenset()


def module_name(path: Path) -> str:
    """``model_optimizer/search/core/fit.py`` -> ``model_optimizer.search.core.fit`` (a
    package is its __init__)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def top_name(module: str) -> str:
    """The layer name of a module: its first component under model_optimizer."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def child_name(module: str) -> str:
    """The name of a module inside its family: its second component under model_optimizer
    (``""`` for the family's own ``__init__``)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 else ""


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


def compared(module: str, target: str) -> tuple[str, int | None, str, int | None, str] | None:
    """What an import of ``target`` by ``module`` is judged by: the two names, their layers
    and where those are defined. Top-level names by ``LAYERS``; inside one family, its two
    children by ``FAMILIES``; None inside one package (or one child of a family)."""
    own, other = top_name(module), top_name(target)
    if own != other:
        return own, layer_of(own), other, layer_of(other), ""
    mine, theirs = child_name(module), child_name(target)
    if own not in FAMILIES or mine == theirs:
        return None
    return (f"{own}.{mine}", child_layer_of(own, mine), f"{own}.{theirs}",
            child_layer_of(own, theirs), f" in FAMILIES['{own}']")


def violations(source: str, module: str, package: bool = False) -> list[str]:
    """Each import in ``source`` (the text of ``module``) that breaks the layer order."""
    out = []
    for line, target in imports_of(source, module, package):
        judged = compared(module, target)
        if judged is None or (module, target) in KNOWN_EXCEPTIONS:
            continue
        own, own_layer, other, other_layer, where = judged
        if other_layer is None or own_layer is None:
            out.append(f"{module}:{line} imports {target}: "
                       f"'{other if other_layer is None else own}' has no layer in "
                       f"model_optimizer/layers.py{where}")
        elif other_layer >= own_layer:
            why = "a higher layer" if other_layer > own_layer else "a sibling in its layer"
            out.append(f"{module}:{line} imports {target}, {why} ('{own}' is layer "
                       f"{own_layer}, '{other}' layer {other_layer}{where})")
    return out


def children(folder: Path) -> set[str]:
    """The packages and modules directly in ``folder`` (``""`` for its ``__init__.py``)."""
    names = {p.stem if p.is_file() else p.name for p in folder.iterdir()
             if (p.is_file() and p.suffix == ".py") or (p / "__init__.py").is_file()}
    return {"" if n == "__init__" else n for n in names}


def test_every_top_level_package_and_module_has_a_layer():
    names = children(PACKAGE)
    missing = sorted(n for n in names if layer_of(n) is None)
    assert not missing, f"place these in model_optimizer/layers.py LAYERS: {missing}"
    placed = [name for layer in LAYERS for name in layer]
    assert len(placed) == len(set(placed)), "a name is in two layers"
    assert sorted(set(placed) - names) == [], "LAYERS names what is not in model_optimizer/"


def test_every_child_of_a_family_has_a_layer():
    assert set(FAMILIES) <= {name for layer in LAYERS for name in layer}, "a family unplaced"
    for family, layers in FAMILIES.items():
        names = children(PACKAGE / family)
        missing = sorted(n for n in names if child_layer_of(family, n) is None)
        assert not missing, f"place these in model_optimizer/layers.py FAMILIES: {missing}"
        placed = [name for layer in layers for name in layer]
        assert len(placed) == len(set(placed)), f"a child of {family} is in two layers"
        assert sorted(set(placed) - names) == [], f"FAMILIES names what {family}/ lacks"


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
        "model_optimizer.history.drift:1 imports model_optimizer.search.sweep.loop, a higher "
        f"layer ('history' is layer {layer_of('history')}, 'search' layer {layer_of('search')})"]
    inside = "def f():\n    from model_optimizer.cli import apply\n"  # lazy imports count
    assert "a higher layer" in violations(inside, "model_optimizer.runner")[0]
    assert "model_optimizer.cli.apply" in violations(inside, "model_optimizer.runner")[0]
    assert "a sibling" in violations("import model_optimizer.export.vllm\n",
                                     "model_optimizer.history.drift")[0]
    assert "has no layer" in violations("from model_optimizer import search\n",
                                        "model_optimizer.newthing")[0]
    relative = "from ..cli import main\n"
    assert "a higher layer" in violations(relative, "model_optimizer.recipe.render")[0]
    assert violations("from model_optimizer.errors import UsageError\n"
                      "from model_optimizer.recipe import load_recipe\n",
                      "model_optimizer.search.sweep.loop") == []


def test_the_check_holds_a_family_s_children_to_their_own_order():
    """Inside ``search``, the same rule one level down: ``FAMILIES['search']``."""
    assert violations("from model_optimizer.search.sweep.loop import SweepRunner\n",
                      "model_optimizer.search.core.session") == [
        "model_optimizer.search.core.session:1 imports model_optimizer.search.sweep.loop, a "
        f"higher layer ('search.core' is layer {child_layer_of('search', 'core')}, "
        f"'search.sweep' layer {child_layer_of('search', 'sweep')} in FAMILIES['search'])"]
    assert "a higher layer" in violations("from .core import session\n",  # relative
                                          "model_optimizer.search.measure")[0]
    lazy = "def f():\n    from model_optimizer.search.optimize import pipeline\n"
    assert "a higher layer" in violations(lazy, "model_optimizer.search.tune.loop")[0]
    for importer, imported in (("sweep.strategy", "tune.space"), ("tune.loop", "sweep.loop"),
                               ("optimize.pipeline", "simulate.drive"),
                               ("capacity", "measure")):
        found = violations(f"import model_optimizer.search.{imported}\n",
                           f"model_optimizer.search.{importer}")
        assert len(found) == 1 and "a sibling in its layer" in found[0], (importer, found)
    assert "'search.newthing' has no layer" in violations(
        "from model_optimizer.search.core import session\n", "model_optimizer.search.newthing")[0]
    assert "'search.newthing' has no layer" in violations(
        "import model_optimizer.search.newthing.x\n", "model_optimizer.search.sweep.loop")[0]
    # downward inside the family, within one child, and from above the family: allowed
    assert violations("from model_optimizer.search.core.session import SearchSession\n"
                      "from model_optimizer.search.measure import measure_configuration\n"
                      "from model_optimizer.search.sweep.decide import shortfall\n",
                      "model_optimizer.search.optimize.pipeline") == []
    assert violations("from model_optimizer.search.tune.scan import TrialScanner\n",
                      "model_optimizer.search.tune.loop") == []
    assert violations("from model_optimizer.search.sweep.loop import SweepRunner\n",
                      "model_optimizer.usecase.sweep") == []
    # below the family, any child of it is the family's layer: higher
    assert "a higher layer" in violations("from model_optimizer.search.measure import x\n",
                                          "model_optimizer.history.rollback")[0]


def layer_table(section: str, header: str) -> dict[int, set[str]]:
    """The rows of the markdown table under ``header``: layer number -> the names shown
    (backticked) in its second column."""
    rows: dict[int, set[str]] = {}
    for line in section[section.index(header):].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = line.split("|")
        rows[int(cells[1])] = set(re.findall(r"`([\w.]+)`", cells[2]))
    return rows


def layers_section() -> str:
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    section = text[text.index("## 5. Layers"):]
    return section[: section.index("\n## ", 4)]


def test_the_design_document_s_tables_are_the_layers():
    """Each row of design.md's layer table names exactly its layer's packages (``layers``
    and ``""`` aside); each row of a family's table exactly its layer's children."""
    section = layers_section()
    assert layer_table(section, "| layer | packages |") == {
        number: set(names) - {"", "layers"} for number, names in enumerate(LAYERS)}
    for family, layers in FAMILIES.items():
        assert layer_table(section, f"| {family} layer | children |") == {
            number: {f"{family}.{name}" for name in names if name}
            for number, names in enumerate(layers)}


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

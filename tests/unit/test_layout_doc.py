"""What docs/layout.md and the other documents say about the tree holds: the layout lists the
packages by layer, lowest first, and every child of a family in its family's order; every
source path named in the documentation, a docstring or a comment (``search/core/fit.py``,
``tests/unit/search/sweep/test_budget.py``) is a file of the repository."""

from __future__ import annotations

import re
from pathlib import Path

from model_optimizer.layers import FAMILIES, LAYERS, child_layer_of, layer_of

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "model_optimizer"
#: where a path in the documents is read from: the repository, the package, the tests
BASES = (ROOT, PACKAGE, ROOT / "tests" / "unit", ROOT / "tests", ROOT / "docs")
#: paths of vLLM's own source tree that the documents quote (not files of this repository)
FOREIGN = ("vllm/", "v1/", "platforms/")
#: a backticked path to a Python file: ``search/core/fit.py``, `tests/unit/test_layers.py`
PATH = re.compile(r"`([\w.-]+/[\w./-]*\.py)\b")


def layout_tree() -> str:
    """The ``model_optimizer/`` entry of docs/layout.md (up to the next top-level folder)."""
    text = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
    start = text.index("model_optimizer/")
    return text[start: text.index("\nschemas/", start)]


def first_position(text: str, name: str) -> int:
    """Where ``name/`` (a package) or ``name.py`` (a module) is first listed in ``text``."""
    match = re.search(rf"(?<![\w/.]){re.escape(name)}(/|\.py\b)", text)
    assert match, f"docs/layout.md does not list {name}"
    return match.start()


def test_the_layout_lists_the_packages_by_layer_lowest_first():
    tree = layout_tree()
    listed = sorted((first_position(tree, name), layer_of(name), name)
                    for layer in LAYERS for name in layer if name not in ("", "__main__"))
    order = [layer for _, layer, _ in listed]
    assert order == sorted(order), "docs/layout.md lists these out of layer order: " + ", ".join(
        f"{name} ({layer})" for _, layer, name in listed)


def test_the_layout_lists_every_child_of_a_family_in_its_order():
    tree = layout_tree()
    for family, layers in FAMILIES.items():
        names = [name for layer in layers for name in layer if name]
        listed = sorted((first_position(tree, f"{family}/{name}"),
                         child_layer_of(family, name), name) for name in names)
        order = [layer for _, layer, _ in listed]
        assert order == sorted(order), f"docs/layout.md lists {family}/ out of order: {listed}"
        assert tree.index(f"{family}/") < listed[0][0], f"{family}/ itself comes first"


def test_the_position_check_reads_a_package_and_a_module():
    text = "plan/ (planner), search/measure.py (one configuration), measure.py here"
    assert first_position(text, "plan") == 0
    assert first_position(text, "search/measure") == text.index("search/measure.py")
    assert first_position(text, "measure") == text.index("measure.py here")


def documents() -> list[Path]:
    """The documentation (its dated logs aside: history as written) and the sources."""
    docs = [p for p in (ROOT / "docs").rglob("*.md") if "log" not in
            p.relative_to(ROOT / "docs").parts]
    sources = [p for folder in ("model_optimizer", "tests", "benchmarks")
               for p in (ROOT / folder).rglob("*.py")]
    return [p for p in (*docs, ROOT / "README.md", ROOT / "benchmarks" / "README.md", *sources)
            if p != Path(__file__).resolve()]  # this file names missing paths on purpose


def missing_paths(text: str) -> list[str]:
    """The backticked paths to Python files in ``text`` that no base holds."""
    return [path for path in PATH.findall(text) if not path.startswith(FOREIGN)
            and not any((base / path).is_file() for base in BASES)]


def test_every_source_path_the_documents_name_exists():
    stale = [f"{path.relative_to(ROOT)}: {name}" for path in documents()
             for name in missing_paths(path.read_text(encoding="utf-8"))]
    assert not stale, "paths to files that are not there (moved?):\n" + "\n".join(stale)


def test_the_path_check_sees_a_moved_file():
    assert missing_paths("the knee (`search/core/fit.py`), ``tests/unit/test_layers.py``, "
                         "`model_optimizer/search/core/scan.py`, `vllm/v1/x.py`") == []
    assert missing_paths("the knee (`sweep/fit.py`) and ``search/session.py``") == [
        "sweep/fit.py", "search/session.py"]

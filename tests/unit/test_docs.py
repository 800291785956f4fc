"""The documentation holds together: every relative link resolves, the README stays short,
every page is in the site's navigation, and `mkdocs build --strict` passes."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
README_LIMIT_BYTES = 20 * 1024


def _markdown_files() -> list[Path]:
    return [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *sorted(DOCS.rglob("*.md"))]


def _broken_links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
    broken = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        file_part = target.split("#", 1)[0]
        if not (path.parent / file_part).resolve().exists():
            broken.append(f"{path.relative_to(ROOT)}: {target}")
    return broken


def test_every_relative_link_in_the_docs_resolves():
    broken = [link for path in _markdown_files() for link in _broken_links(path)]
    assert not broken, broken


def test_the_readme_stays_under_20_kb():
    size = (ROOT / "README.md").stat().st_size
    assert size <= README_LIMIT_BYTES, f"README.md is {size} bytes; move detail into docs/"


def _nav_pages(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [page for item in node for page in _nav_pages(item)]
    if isinstance(node, dict):
        return [page for value in node.values() for page in _nav_pages(value)]
    return []


def test_every_docs_page_is_in_the_site_navigation():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    listed = set(_nav_pages(config["nav"]))
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert pages - listed == set(), f"pages missing from mkdocs.yml's nav: {pages - listed}"
    assert listed - pages == set(), f"nav entries without a page: {listed - pages}"


def test_mkdocs_builds_the_site_strictly(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-4000:]
    assert (tmp_path / "site" / "index.html").is_file()
    shutil.rmtree(tmp_path / "site")

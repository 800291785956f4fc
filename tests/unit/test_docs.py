"""The documentation holds together: every relative link resolves, the README stays short,
every page is in the site's navigation (the dated benchmark logs under docs/benchmarks/log/
are kept out of the site), each benchmark page opens with today's verdict, and
`mkdocs build --strict` passes."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from pathspec.gitignore import GitIgnoreSpec

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
README_LIMIT_BYTES = 20 * 1024
BENCHMARKS = DOCS / "benchmarks"
BENCHMARK_PAGE_LIMIT_BYTES = 15 * 1024
VERDICT_HEADING = "## Today's verdict"
VERDICT_TEXT_LINES = 15
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


def _config() -> dict:
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text())


def _excluded_from_site() -> GitIgnoreSpec:
    """mkdocs' own reading of `exclude_docs` (gitignore patterns, relative to docs/)."""
    return GitIgnoreSpec.from_lines(_config().get("exclude_docs", "").splitlines())


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
    listed = set(_nav_pages(_config()["nav"]))
    excluded = _excluded_from_site()
    every = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    pages = {page for page in every if not excluded.match_file(page)}
    assert pages - listed == set(), f"pages missing from mkdocs.yml's nav: {pages - listed}"
    assert listed - pages == set(), f"nav entries without a page in the site: {listed - pages}"


def test_the_dated_benchmark_logs_are_kept_out_of_the_site():
    logs = sorted((BENCHMARKS / "log").glob("*.md"))
    assert logs, "docs/benchmarks/log/ holds the dated runs"
    excluded = _excluded_from_site()
    names = [str(p.relative_to(DOCS)) for p in logs]
    inside = [name for name in names if not excluded.match_file(name)]
    assert inside == [], f"dated logs that mkdocs would build into the site: {inside}"
    for log in logs:
        page = BENCHMARKS / log.name
        assert page.is_file(), f"{log.relative_to(ROOT)} has no page {page.relative_to(ROOT)}"
        assert f"(log/{log.name})" in page.read_text(encoding="utf-8"), (
            f"{page.relative_to(ROOT)} does not link to its dated log log/{log.name}")
    assert "docs/benchmarks/log/" in (BENCHMARKS / "index.md").read_text(encoding="utf-8")


def _github_anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a page's headings, where the logs are read (mkdocs, which
    checks every other page's anchors, does not render an excluded page)."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
    for heading in re.findall(r"^#{1,6} (.+)$", text, flags=re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        anchors.add(slug if count == 0 else f"{slug}-{count}")
        seen[slug] = count + 1
    return anchors


def test_links_into_the_dated_logs_name_a_heading_there():
    excluded = _excluded_from_site()
    broken = []
    for path in _markdown_files():
        text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
        for target in LINK.findall(text):
            if re.match(r"^[a-z]+:", target) or "#" not in target:
                continue
            file_part, anchor = target.split("#", 1)
            resolved = (path.parent / file_part).resolve() if file_part else path.resolve()
            if not resolved.is_relative_to(DOCS) or resolved.suffix != ".md":
                continue
            if not excluded.match_file(str(resolved.relative_to(DOCS))):
                continue
            if anchor not in _github_anchors(resolved):
                broken.append(f"{path.relative_to(ROOT)}: {target}")
    assert not broken, broken


def _verdict_section(text: str) -> list[str] | None:
    """The lines of the page's first `## ` section when it is today's verdict, else None."""
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith("## ")), None)
    if first is None or lines[first].rstrip() != VERDICT_HEADING:
        return None
    end = next((i for i in range(first + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return lines[first + 1:end]


def _verdict_shape(section: list[str]) -> tuple[int, int, int]:
    """(tables, lines of text, lines of code) in a verdict section; a code block (fenced, or
    indented four spaces) is the command that reproduces it."""
    tables = text = code = 0
    fenced = in_table = False
    for line in section:
        if line.lstrip().startswith("```"):
            fenced = not fenced
            code += 1
            in_table = False
        elif fenced or line.startswith("    "):
            code += 1
        elif line.lstrip().startswith("|"):
            if not in_table:
                tables += 1
            in_table = True
            continue
        elif line.strip():
            text += 1
        in_table = False
    return tables, text, code


def _benchmark_pages() -> list[Path]:
    return [p for p in sorted(BENCHMARKS.glob("*.md")) if p.name != "index.md"]


def test_each_benchmark_page_opens_with_todays_verdict():
    """Issue 34: one table, at most 15 lines of text, the command, the date; the page short."""
    wrong = []
    for page in _benchmark_pages():
        name = page.relative_to(ROOT)
        if page.stat().st_size > BENCHMARK_PAGE_LIMIT_BYTES:
            wrong.append(f"{name}: {page.stat().st_size} bytes; move dated runs to log/{page.name}")
        section = _verdict_section(page.read_text(encoding="utf-8"))
        if section is None:
            wrong.append(f"{name}: its first section is not {VERDICT_HEADING!r}")
            continue
        tables, text, code = _verdict_shape(section)
        if tables != 1:
            wrong.append(f"{name}: {tables} tables in today's verdict, not one")
        if text > VERDICT_TEXT_LINES:
            wrong.append(f"{name}: {text} lines of text in today's verdict "
                         f"(at most {VERDICT_TEXT_LINES})")
        if not code:
            wrong.append(f"{name}: today's verdict names no command that reproduces it")
        if not DATE.search("\n".join(section)):
            wrong.append(f"{name}: today's verdict has no date")
    assert not wrong, wrong


def test_the_verdict_shape_is_read_as_written():
    section = ["", "text", "", "| a | b |", "|---|---|", "| 1 | 2 |", "", "    mopt x", "more"]
    assert _verdict_shape(section) == (1, 2, 1)
    assert _verdict_shape(["| a |", "", "| b |", "```bash", "x", "```"]) == (2, 0, 3)
    page = "# T\n\nintro\n## Today's verdict\nbody\n## How it was measured\nx"
    assert _verdict_section(page) == ["body"]
    assert _verdict_section("# T\n\n## Verdict (2026-12-02)\nbody") is None


def test_mkdocs_builds_the_site_strictly(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-4000:]
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "benchmarks" / "index.html").is_file()
    assert not (tmp_path / "site" / "benchmarks" / "log").exists(), "dated logs built into the site"
    shutil.rmtree(tmp_path / "site")


def test_the_layout_page_names_every_package_and_module():
    """docs/layout.md lists every package and top-level module of model_optimizer/."""
    root = Path(__file__).resolve().parents[2]
    text = (root / "docs" / "layout.md").read_text()
    source = root / "model_optimizer"
    names = [f"{p.name}/" for p in source.iterdir() if (p / "__init__.py").is_file()]
    names += [p.name for p in source.glob("*.py") if p.name not in ("__init__.py",
                                                                     "__main__.py")]
    missing = sorted(name for name in names if name not in text)
    assert missing == []

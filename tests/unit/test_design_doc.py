"""The design document is in the repository and every reference to it names a real section."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"
REFERENCE = re.compile(r"design\.md section (\d+)")


def _sections() -> set[int]:
    return {int(n) for n in re.findall(r"^## (\d+)\. ", DESIGN.read_text(), re.MULTILINE)}


def _sources() -> list[Path]:
    files = [*ROOT.joinpath("model_optimizer").rglob("*.py"), *ROOT.joinpath("tests").rglob("*.py"),
             *ROOT.joinpath("benchmarks").rglob("*.py"), ROOT / "benchmarks" / "README.md",
             ROOT / "README.md", *ROOT.joinpath("docs").rglob("*.md")]
    return [f for f in files if f.is_file() and f != Path(__file__).resolve()]


def test_design_doc_has_the_required_sections():
    text = DESIGN.read_text()
    for heading in ("Architecture", "Data flow", "Metric definitions", "Measured vLLM facts",
                    "Layers", "How to add"):
        assert re.search(rf"^## \d+\. {heading}", text, re.MULTILINE), heading


def test_every_design_reference_points_to_docs_design_md_and_an_existing_section():
    sections = _sections()
    dangling, wrong_file = [], []
    for path in _sources():
        text = path.read_text(encoding="utf-8")
        if "DESIGN.md" in text:
            wrong_file.append(str(path.relative_to(ROOT)))
        for number in REFERENCE.findall(text):
            if int(number) not in sections:
                dangling.append(f"{path.relative_to(ROOT)}: section {number}")
    assert not wrong_file, f"references to a DESIGN.md outside the repository: {wrong_file}"
    assert not dangling, dangling

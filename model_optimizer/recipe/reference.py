"""The recipe reference page, generated from the schema so the two cannot drift apart.

``python -m model_optimizer.recipe.reference --write docs/reference.md`` rewrites the block
between the markers; a unit test fails when docs/reference.md and the schema disagree.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from model_optimizer.recipe.schema import recipe_schema

START = "<!-- recipe-reference:start (generated from schemas/recipe.v1.json) -->"
END = "<!-- recipe-reference:end -->"


def _type_text(node: dict[str, Any]) -> str:
    if "enum" in node:
        return "one of " + ", ".join(f"`{v}`" for v in node["enum"])
    if "const" in node:
        return f"`{node['const']}`"
    if "oneOf" in node:
        return " or ".join(_type_text(option) for option in node["oneOf"])
    declared = node.get("type", "any")
    return " or ".join(declared) if isinstance(declared, list) else declared


def _default_text(node: dict[str, Any]) -> str:
    if "default" not in node:
        return ""
    return f"`{json.dumps(node['default'])}`"


def _rows(node: dict[str, Any], prefix: str, required: set[str]) -> list[str]:
    rows = []
    for key, child in node.get("properties", {}).items():
        path = f"{prefix}{key}"
        if key == "$schema":
            continue
        mark = " (required)" if key in required else ""
        description = child.get("description", "").replace("|", "\\|")
        rows.append(f"| `{path}`{mark} | {_type_text(child)} | {_default_text(child)} | "
                    f"{description} |")
        if "properties" in child:
            rows += _rows(child, f"{path}.", set(child.get("required", [])))
    return rows


def render_reference() -> str:
    """The Markdown table of every recipe key, with type, default and description."""
    schema = recipe_schema()
    lines = [START, "", "| key | type | default | meaning |", "|---|---|---|---|",
             *_rows(schema, "", set(schema.get("required", []))), "", END]
    return "\n".join(lines)


def replace_block(text: str) -> str:
    """``text`` with the generated block put between the markers."""
    pattern = re.compile(re.escape(START) + ".*?" + re.escape(END), re.DOTALL)
    if not pattern.search(text):
        raise ValueError("the file has no recipe-reference markers")
    return pattern.sub(lambda _: render_reference(), text)


def main() -> None:
    """Print the reference, or rewrite it inside a file with --write."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", type=Path, help="file whose marked block to rewrite")
    args = parser.parse_args()
    if args.write:
        args.write.write_text(replace_block(args.write.read_text()))
    else:
        print(render_reference())


if __name__ == "__main__":
    main()

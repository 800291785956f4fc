"""The flags the recipe schema gives as examples are flags vLLM accepts (vLLM 0.32 refuses
``swap-space``, which the schema once showed), and none is a first-class recipe field."""

from __future__ import annotations

import re

from model_optimizer.recipe.rules import FIRST_CLASS_FLAGS
from model_optimizer.recipe.schema import recipe_schema
from model_optimizer.recipe.vllm_flags import KNOWN_FLAGS


def example_flags(text: str) -> set[str]:
    """Flag names of every ``{name: value}`` example in a description."""
    return {name for body in re.findall(r"\{([^}]*)\}", text)
            for name in re.findall(r"['\"]?([a-z][a-z0-9-]*)['\"]?\s*:", body)}


def test_extra_args_examples_are_flags_of_vllm():
    extra = recipe_schema()["properties"]["engine"]["properties"]["extra_args"]
    texts = [extra["description"], *map(str, extra.get("examples", []))]
    flags = set().union(*map(example_flags, texts))
    assert flags, "the description gives an example"
    assert flags <= KNOWN_FLAGS, flags - KNOWN_FLAGS
    assert not flags & set(FIRST_CLASS_FLAGS)
    assert "swap-space" not in KNOWN_FLAGS  # why it left: vLLM 0.32's parser has no such flag

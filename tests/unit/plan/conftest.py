"""Fixtures for the plan tests: resolved recipes built from the schema's defaults, model configs."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from model_optimizer.plan import load_model_config

REPO = Path(__file__).resolve().parents[3]
DATA = REPO / "tests" / "data"
SECTIONS = ("model", "engine", "hardware", "workload", "slo", "sweep")


def _load_schema() -> dict[str, Any]:
    return json.loads((REPO / "schemas" / "recipe.v1.json").read_text())


@pytest.fixture
def repo_root() -> Path:
    """The repository's root folder."""
    return REPO


@pytest.fixture
def recipe_schema() -> dict[str, Any]:
    """The recipe JSON Schema, version 1."""
    return _load_schema()


def _schema_defaults() -> dict[str, Any]:
    """Every section filled with the schema's own defaults, as the recipe resolver does."""
    schema = _load_schema()
    recipe: dict[str, Any] = {"recipe_version": 1, "name": "plan-test"}
    for section in SECTIONS:
        properties = schema["properties"][section]["properties"]
        recipe[section] = {
            key: copy.deepcopy(spec["default"])
            for key, spec in properties.items()
            if "default" in spec
        }
    recipe["model"]["path"] = "test-model"
    return recipe


@pytest.fixture
def make_recipe():
    """Return ``build(overrides)``: a resolved recipe with dotted-key overrides applied."""
    base = _schema_defaults()

    def build(overrides: dict[str, Any] | None = None) -> dict[str, Any]:
        recipe = copy.deepcopy(base)
        for dotted, value in (overrides or {}).items():
            section, key = dotted.split(".", 1)
            recipe[section][key] = value
        return recipe

    return build


@pytest.fixture
def llama2_config() -> dict[str, Any]:
    """Llama-2-7B's published config.json."""
    return load_model_config(DATA / "llama-2-7b" / "config.json")


@pytest.fixture
def llama3_config() -> dict[str, Any]:
    """Meta-Llama-3-8B's published config.json."""
    return load_model_config(DATA / "llama-3-8b")


@pytest.fixture
def tiny_config() -> dict[str, Any]:
    """The shape of `mopt tiny-model`'s default Llama (see model_optimizer/models/tiny.py)."""
    return {
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 512,
        "max_position_embeddings": 2048,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }

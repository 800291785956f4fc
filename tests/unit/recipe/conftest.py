"""Helpers for recipe tests: a valid minimal recipe to mutate."""

import textwrap

import pytest

VALID = textwrap.dedent("""\
    recipe_version: 1
    name: demo
    model:
      path: some/model
    engine:
      max_num_seqs: 8
      max_num_batched_tokens: 512
      max_model_len: 1024
    hardware:
      accelerator: A10
    workload:
      prompt_tokens: 128
      output_tokens: 32
      num_requests: 10
    """)


@pytest.fixture
def write_recipe(tmp_path):
    """Write recipe text to a file and return its path."""
    def write(text: str = VALID, name: str = "r.yaml"):
        path = tmp_path / name
        path.write_text(text)
        return path
    return write


@pytest.fixture
def fake_vllm(monkeypatch, tmp_path):
    """An installed "vLLM 9.9" whose parser lists the snapshot plus 'swap-space' (no import)."""
    from model_optimizer.recipe import flags
    from model_optimizer.recipe.vllm_flags import KNOWN_FLAGS

    asked = []
    monkeypatch.setenv("MOPT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(flags, "installed_vllm_version", lambda: "9.9")
    monkeypatch.setattr(flags, "_ask_vllm",
                        lambda: asked.append(1) or KNOWN_FLAGS | {"swap-space"})
    flags._installed_flags.cache_clear()
    yield asked
    flags._installed_flags.cache_clear()

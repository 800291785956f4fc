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

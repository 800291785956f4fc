"""Located, complete error reports for broken recipes."""

import pytest

from model_optimizer.errors import RecipeError, RecipeWarning
from model_optimizer.recipe import load_recipe, load_recipe_text

from .conftest import VALID


def errors_of(path, overrides=None):
    with pytest.raises(RecipeError) as info:
        load_recipe(path, overrides)
    return info.value.diagnostics


def test_valid_minimal_recipe_resolves_defaults(write_recipe):
    loaded = load_recipe(write_recipe())
    assert loaded.resolved["engine"]["gpu_memory_utilization"] == 0.9
    assert loaded.resolved["engine"]["host"] == "127.0.0.1"
    assert loaded.resolved["workload"]["request_rate"] == "inf"
    assert loaded.resolved["model"]["served_name"] == "demo"
    assert loaded.resolved["revision"] == 1
    assert "gpu_memory_utilization" not in loaded.document["engine"]


def test_misspelled_key_has_line_column_and_suggestion(write_recipe):
    path = write_recipe(VALID.replace("max_num_seqs: 8", "max_num_seq: 8"))
    [diag] = errors_of(path)
    assert (diag.file, diag.line, diag.column) == (str(path), 6, 3)
    assert diag.path == "engine.max_num_seq"
    assert "did you mean 'max_num_seqs'" in diag.hint


def test_every_error_is_reported_at_once(write_recipe):
    text = (VALID.replace("max_num_seqs: 8", "max_num_seqs: -1")
            .replace("accelerator: A10", "accelerator: A11")
            .replace("prompt_tokens: 128", "prompt_tokens: lots"))
    diags = errors_of(write_recipe(text))
    by_path = {d.path: d for d in diags}
    assert set(by_path) == {"engine.max_num_seqs", "hardware.accelerator",
                            "workload.prompt_tokens"}
    assert by_path["engine.max_num_seqs"].line == 6
    assert "must be >= 1" in by_path["engine.max_num_seqs"].message
    assert by_path["hardware.accelerator"].hint == "did you mean 'A10'?"
    assert "whole number" in by_path["workload.prompt_tokens"].message


def test_missing_required_key_points_at_parent(write_recipe):
    diags = errors_of(write_recipe(VALID.replace("  path: some/model\n", "  dtype: auto\n")))
    [diag] = diags
    assert diag.message == "missing required key 'path'"
    assert diag.line == 3 and diag.path == "model"


@pytest.mark.parametrize(("text", "needle"), [
    ("name: x\nmodel: {path: m}\n", "recipe_version is missing"),
    ("recipe_version: 7\nname: x\nmodel: {path: m}\n", "reads formats up to 1"),
    ("recipe_version: one\nname: x\nmodel: {path: m}\n", "must be a whole number"),
    ("recipe_version: 0\nname: x\nmodel: {path: m}\n", "no migration from 0 to 1"),
])
def test_version_problems_have_their_own_message(write_recipe, text, needle):
    [diag] = errors_of(write_recipe(text))
    assert needle in diag.message
    assert diag.line is not None


def test_a_future_version_names_no_package_of_the_registry(write_recipe):
    """``model-optimizer`` on PyPI is another project: the hint must not send users there."""
    [diag] = errors_of(write_recipe("recipe_version: 7\nname: x\nmodel: {path: m}\n"))
    assert "pip install" not in diag.hint and "model-optimizer" not in diag.hint
    assert "git pull" in diag.hint


def test_cross_field_rules(write_recipe):
    text = (VALID.replace("max_num_batched_tokens: 512", "max_num_batched_tokens: 4")
            .replace("max_model_len: 1024", "max_model_len: 100")
            .replace("accelerator: A10", "accelerator: cpu")
            + "  shared_prefix_tokens: 200\nsweep:\n  param: tensor_parallel_size\n")
    text = text.replace("engine:\n", "engine:\n  block_size: 48\n")
    messages = {d.path: d.message for d in errors_of(write_recipe(text))}
    assert "smaller than max_num_seqs" in messages["engine.max_num_batched_tokens"]
    assert "not a multiple of 32" in messages["engine.block_size"]
    assert "shorter than the workload's prompt + output" in messages["engine.max_model_len"]
    assert "must be smaller than" in messages["workload.shared_prefix_tokens"]
    assert "not an engine knob mopt can sweep" in messages["sweep.param"]


def test_extra_args_first_class_flags_are_errors_unknown_flags_warnings(write_recipe, fake_vllm):
    text = VALID.replace("engine:\n", "engine:\n  extra_args: {swap-spac: 4, max-num-seqs: 2,"
                                      " disable-log-stats: true}\n")
    diags = {d.path: d for d in errors_of(write_recipe(text))}
    assert set(diags) == {"engine.extra_args.max-num-seqs"}
    assert "set engine.max_num_seqs instead" in diags["engine.extra_args.max-num-seqs"].hint
    good = text.replace(" max-num-seqs: 2,", "")
    with pytest.warns(RecipeWarning, match=r"'swap-spac' is not a server flag of vLLM 9\.9"):
        loaded = load_recipe(write_recipe(good))
    [warning] = loaded.warnings
    assert warning.path == "engine.extra_args.swap-spac" and "swap-space" in warning.hint


def test_secret_literals_are_refused_but_references_allowed(write_recipe):
    bad = VALID.replace("engine:\n", "engine:\n  env: {HF_TOKEN: hf_abc}\n")
    [diag] = errors_of(write_recipe(bad))
    assert diag.path == "engine.env.HF_TOKEN" and "${HF_TOKEN}" in diag.hint
    good = VALID.replace("engine:\n", "engine:\n  env: {HF_TOKEN: '${HF_TOKEN}'}\n")
    assert load_recipe(write_recipe(good)).resolved["engine"]["env"]["HF_TOKEN"] == "${HF_TOKEN}"


def test_cpu_kv_space_must_be_whole_gib(write_recipe):
    text = VALID.replace("accelerator: A10", "accelerator: cpu").replace(
        "engine:\n", "engine:\n  env: {VLLM_CPU_KVCACHE_SPACE: '1.5'}\n")
    [diag] = errors_of(write_recipe(text))
    assert "whole number of GiB" in diag.message


@pytest.mark.parametrize(("raw", "needle", "line"), [
    (b"recipe_version: 1\nname: x\nname: y\nmodel: {path: m}\n", "duplicate key 'name'", 3),
    (b"recipe_version: 1\nname: !!python/object/apply:os.system [echo]\n", "unsafe", 2),
    (b"recipe_version: 1\nname: [x\n", "YAML syntax", 3),
    (b"recipe_version: 1\nname: \xff\n", "not valid UTF-8", 2),
    (b"", "empty", 1),
    (b"- a\n- b\n", "mapping of sections", 1),
])
def test_unreadable_sources(tmp_path, raw, needle, line):
    path = tmp_path / "bad.yaml"
    path.write_bytes(raw)
    [diag] = errors_of(path)
    assert needle in diag.message
    assert diag.line == line and diag.file == str(path)


def test_oversized_file_is_refused(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_bytes(b"recipe_version: 1\n" + b"# padding\n" * 200_000)
    [diag] = errors_of(path)
    assert "the limit for recipes" in diag.message


def test_missing_file(tmp_path):
    [diag] = errors_of(tmp_path / "nope.yaml")
    assert diag.message == "file not found"


def test_alias_bomb_is_refused_before_anything_is_built():
    text = "recipe_version: 1\nname: x\nmodel: {path: m}\na: &a [1, 2]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(20))
    with pytest.raises(RecipeError) as info:
        load_recipe_text(text)
    [diag] = info.value.diagnostics
    assert "anchor 'a'" in diag.message and (diag.line, diag.column) == (4, 4)

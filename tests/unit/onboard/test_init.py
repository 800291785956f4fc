"""`mopt init`: the recipe it writes validates, plans, and explains its values."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from model_optimizer.cli.main import app
from model_optimizer.errors import UsageError
from model_optimizer.onboard.detect import SeenHardware, match_gpu_name
from model_optimizer.onboard.init import (
    WorkloadChoice,
    build_init_recipe,
    checkpoint_quantization,
    recipe_name,
)
from model_optimizer.onboard.prompts import measure_prompt_file, read_prompt_texts
from model_optimizer.plan import estimate, load_model_config
from model_optimizer.recipe import load_recipe

DATA = Path(__file__).resolve().parents[2] / "data"
TINY = {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512,
        "max_position_embeddings": 2048, "torch_dtype": "bfloat16",
        "architectures": ["LlamaForCausalLM"], "model_type": "llama"}
CPU = SeenHardware("cpu", 1, 8.0, "CPU, 8 GiB RAM")
runner = CliRunner()


def _model(tmp_path: Path, config: dict, name: str = "my-model") -> Path:
    folder = tmp_path / "models" / name
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def _write(tmp_path, model_dir, hw, work=None, name=None) -> Path:
    target = tmp_path / "recipes" / "out.yaml"
    target.parent.mkdir(exist_ok=True)
    result = build_init_recipe(model_dir, target, hw, work or WorkloadChoice(), name)
    target.write_text(result.text)
    return target


def test_schema_line_points_into_a_checkout_never_into_an_install(tmp_path, monkeypatch):
    import model_optimizer.onboard.init as init

    recipe = _write(tmp_path, _model(tmp_path, TINY), CPU)
    first = recipe.read_text().splitlines()[0]
    assert first.startswith("# yaml-language-server: $schema=")
    assert (recipe.parent / first.split("$schema=", 1)[1]).resolve().is_file()
    installed = tmp_path / "venv" / "site-packages" / "model_optimizer" / "_schemas"
    monkeypatch.setattr(init, "schemas_dir", lambda: installed)
    target = tmp_path / "recipes" / "installed.yaml"
    text = build_init_recipe(_model(tmp_path, TINY, "other"), target, CPU,
                             WorkloadChoice()).text
    assert "$schema" not in text and "site-packages" not in text
    assert text.startswith("# Written by `mopt init`")


def test_tiny_cpu_recipe_validates_and_plans(tmp_path):
    recipe = _write(tmp_path, _model(tmp_path, TINY), CPU,
                    WorkloadChoice(prompt_tokens=64, output_tokens=32))
    loaded = load_recipe(recipe)  # raises on any schema or rule problem
    engine = loaded.resolved["engine"]
    assert loaded.resolved["model"]["path"] == "../models/my-model"
    assert (engine["block_size"], engine["enforce_eager"]) == (32, True)
    assert engine["env"] == {"VLLM_CPU_KVCACHE_SPACE": "2"}  # a quarter of 8 GiB
    # 2 GiB / (32 * 2048 bytes) = 32,768 blocks; 3 blocks per 96-token sequence: 10,922;
    # capped at vLLM's CPU default of 128
    assert engine["max_num_seqs"] == 128
    assert engine["max_model_len"] == 2048
    report = estimate(loaded.resolved, TINY)
    assert report.fits and report.max_seqs_no_preemption == 10_922
    assert "planner: 10,922 sequences fit without preemption" in recipe.read_text()


@pytest.mark.parametrize(("flags", "names"), [
    ("fpu sse2 avx2", ["fp8-dynamic"]),            # an AVX2-only x86 CPU (AMD EPYC here)
    ("fpu sse2 avx2 avx512f", ["w4a16", "kv-fp8"])])  # the defaults: no section written
def test_cpu_candidates_are_what_this_cpu_can_serve(tmp_path, cpu_flags_are, flags, names):
    from model_optimizer.search.optimize.candidates import candidates_of

    cpu_flags_are(flags)
    recipe = _write(tmp_path, _model(tmp_path, TINY), CPU)
    assert ("optimize:" in recipe.read_text()) == (names == ["fp8-dynamic"])
    candidates = candidates_of(load_recipe(recipe).resolved)
    assert [c.name for c in candidates] == names
    assert candidates[0].quantize["scheme"] == names[0].replace("-", "_")


def test_every_value_is_commented(tmp_path):
    text = _write(tmp_path, _model(tmp_path, TINY), CPU).read_text()
    body = [line for line in text.splitlines()
            if line.startswith("  ") and not line.startswith("    ")
            and not line.strip().startswith(("endpoint", "warmup", "param", "start"))]
    assert body and all("#" in line for line in body), [b for b in body if "#" not in b]


@pytest.mark.parametrize(("config_dir", "accelerator"), [
    ("llama-2-7b", "A10"), ("llama-3-8b", "L4"), ("qwen2.5-0.5b", "A10"), ("mistral-7b", "H100"),
])
def test_published_configs_give_recipes_that_fit(tmp_path, config_dir, accelerator):
    model_dir = tmp_path / config_dir
    shutil.copytree(DATA / config_dir, model_dir)
    hw = SeenHardware(accelerator, 1, None, accelerator)
    loaded = load_recipe(_write(tmp_path, model_dir, hw))
    report = estimate(loaded.resolved, load_model_config(model_dir))
    assert report.fits, report.problems
    assert loaded.resolved["engine"]["max_num_seqs"] <= report.max_seqs_no_preemption


def test_max_model_len_is_lowered_to_what_the_cache_holds(tmp_path):
    model_dir = tmp_path / "llama3"
    shutil.copytree(DATA / "llama-3-8b", model_dir)
    # 18.5 GiB * 0.9 - 14.96 GiB of bf16 weights - 1 GiB reserve: about 0.69 GiB of KV cache,
    # 131,072 bytes per token: about 5,600 tokens, less than the model's 8192
    hw = SeenHardware("A10", 1, 18.5, "A10 with 18.5 GiB")
    loaded = load_recipe(_write(tmp_path, model_dir, hw))
    report = estimate(loaded.resolved, load_model_config(model_dir))
    max_len = loaded.resolved["engine"]["max_model_len"]
    assert max_len < 8192 and max_len % 256 == 0
    assert report.fits and report.kv_tokens - 256 < max_len <= report.kv_tokens


def test_sliding_windows_keep_the_full_length(tmp_path):
    model_dir = tmp_path / "mistral"
    shutil.copytree(DATA / "mistral-7b", model_dir)
    # about 0.8 GiB of KV cache: a 32,768-token request holds 4095 + 2048 tokens per layer
    # (window + one prefill chunk, + a block) = 32 x 6160 x 4096 bytes = 0.75 GiB
    hw = SeenHardware("A10", 1, 17.0, "A10 with 17 GiB")
    loaded = load_recipe(_write(tmp_path, model_dir, hw))
    report = estimate(loaded.resolved, load_model_config(model_dir))
    assert loaded.resolved["engine"]["max_model_len"] == 32768
    assert report.fits and report.request_bytes_max_model_len == 32 * 6160 * 4096


def test_quantized_checkpoint_is_recognised(tmp_path):
    config = {**TINY, "quantization_config": {"quant_method": "compressed-tensors"}}
    assert checkpoint_quantization(config) == "compressed-tensors"
    assert checkpoint_quantization({**TINY, "quantization_config": {"quant_method": "x"}}) \
        == "none"
    loaded = load_recipe(_write(tmp_path, _model(tmp_path, config), CPU))
    assert loaded.resolved["model"]["quantization"] == "compressed-tensors"


def test_recipe_name_from_folder():
    assert recipe_name(Path("/x/Qwen2.5 0.5B (instruct)")) == "Qwen2.5-0.5B-instruct"


def test_gpu_names_match_the_table():
    assert match_gpu_name("NVIDIA H100 80GB HBM3", 79.6) == "H100"
    assert match_gpu_name("NVIDIA A100-SXM4-40GB", 39.4) == "A100-40GB"
    assert match_gpu_name("NVIDIA A100 80GB PCIe", 79.1) == "A100-80GB"
    assert match_gpu_name("NVIDIA A10", 22.5) == "A10"
    assert match_gpu_name("NVIDIA L40S", 45.0) == "L40S"
    assert match_gpu_name("NVIDIA L4", 22.5) == "L4"
    assert match_gpu_name("Tesla T4", 15.0) is None


def test_prompt_file_lengths_in_the_model_tokenizer(tmp_path):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "one two three"}\n\n# comment\n'
                       '{"messages": [{"role": "user", "content": "four five"}]}\n'
                       '{"text": "six seven eight nine ten"}\n')
    assert read_prompt_texts(prompts) == ["one two three", "four five", "six seven eight nine ten"]
    stats = measure_prompt_file(prompts, tmp_path)  # no tokenizer.json: words
    assert (stats.count, stats.median_tokens, stats.max_tokens) == (3, 3, 5)
    assert stats.how.startswith("whitespace")


@pytest.mark.parametrize(("line", "expected"), [
    ("{not json", "p.jsonl:2:2: invalid JSON"),
    ("[1, 2]", "p.jsonl:2: expected a JSON object"),
    ('{"prompt": 3}', 'p.jsonl:2: no "prompt"'),
])
def test_bad_prompt_lines_name_file_and_line(tmp_path, line, expected):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "ok"}\n' + line + "\n")
    with pytest.raises(UsageError, match=expected):
        read_prompt_texts(prompts)


def test_cli_writes_validates_and_refuses_to_overwrite(tmp_path):
    model_dir = _model(tmp_path, TINY)
    out = tmp_path / "r.yaml"
    args = ["init", str(model_dir), "-o", str(out), "--accelerator", "cpu", "--memory-gib", "4",
            "--prompt-tokens", "64", "--output-tokens", "32"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert runner.invoke(app, ["validate", str(out)]).exit_code == 0
    assert yaml.safe_load(out.read_text())["hardware"]["memory_gib"] == 4.0
    again = runner.invoke(app, args)
    assert again.exit_code == 2 and "--force" in again.output
    assert runner.invoke(app, [*args, "--force"]).exit_code == 0


def test_cli_prompt_file_sets_the_prompt_length(tmp_path):
    model_dir = _model(tmp_path, TINY)
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": " ".join(["w"] * n)}) + "\n"
                               for n in (10, 20, 30)))
    out = tmp_path / "r.yaml"
    result = runner.invoke(app, ["init", str(model_dir), "-o", str(out), "--accelerator", "cpu",
                                 "--prompts", str(prompts), "--json"])
    assert result.exit_code == 0, result.output
    assert load_recipe(out).resolved["workload"]["prompt_tokens"] == 20


def test_cli_prompt_file_without_a_tokenizer_says_it_counted_words(tmp_path):
    model_dir = _model(tmp_path, TINY)  # config.json only: no tokenizer.json
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": " ".join(["w"] * n)}) + "\n"
                               for n in (10, 20, 30)))
    out = tmp_path / "r.yaml"
    result = runner.invoke(app, ["init", str(model_dir), "-o", str(out), "--accelerator", "cpu",
                                 "--prompts", str(prompts), "--json"])
    assert result.exit_code == 0, result.output
    [warning] = json.loads(result.stdout)["warnings"]
    assert "no tokenizer.json" in warning and "words, not tokens" in warning
    assert "warning:" in result.stderr and "no tokenizer.json" in result.stderr
    assert "longest 30 words" in out.read_text()


def test_cli_bad_folder_and_accelerator_exit_2(tmp_path):
    assert runner.invoke(app, ["init", str(tmp_path / "nope")]).exit_code == 2
    model_dir = _model(tmp_path, TINY)
    result = runner.invoke(app, ["init", str(model_dir), "-o", str(tmp_path / "r.yaml"),
                                 "--accelerator", "TPU"])
    assert result.exit_code == 2 and "unknown" in result.output
    (model_dir / "config.json").write_text("{}")
    result = runner.invoke(app, ["init", str(model_dir), "-o", str(tmp_path / "r.yaml")])
    assert result.exit_code == 2 and "missing field" in result.output

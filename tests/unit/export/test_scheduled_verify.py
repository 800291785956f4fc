"""The deployment verifies itself on a schedule (issue 39 item 6): a Kubernetes CronJob and
a systemd timer running `mopt verify --url`, their archives on persistent storage; the
schedule checked, the manifests validated offline like the other exports."""

from __future__ import annotations

import re
import shlex
import socket
import subprocess
import sys

import kubernetes_validate
import pytest
import yaml
from typer.testing import CliRunner

from model_optimizer.cli.main import app
from model_optimizer.errors import UsageError
from model_optimizer.export import ExportOptions, export_recipe
from model_optimizer.export.schedule import parse_schedule
from model_optimizer.recipe import load_recipe
from tests.unit.export.conftest import write_recipe
from tests.unit.export.test_formats import parse_unit
from tests.unit.export.test_gates import SYSTEMD_ANALYZE, verify_unit

KEY = "k-live-0123456789abcdef"
API_KEY = '  extra_args:\n    api-key: "${VLLM_API_KEY}"\n'
NAME = "mopt-tiny-export"


def keyed_recipe(tmp_path, model_dir):
    """A recipe whose server takes an API key and whose load generator sends it."""
    path = write_recipe(tmp_path, model_dir, extra_engine=API_KEY)
    path.write_text(path.read_text().replace("workload:\n",
                                             "workload:\n  api_key_env: VLLM_API_KEY\n"))
    return load_recipe(path)


def export(loaded, tmp_path, *formats, **options):
    return export_recipe(loaded, tmp_path / "out", tmp_path / "runs",
                         ExportOptions(formats, port=8100, **options))


@pytest.mark.parametrize(("cron", "calendar"), [
    ("0 3 * * *", "*-*-* 03:00:00 UTC"),
    ("*/15 * * * *", "*-*-* *:00,15,30,45:00 UTC"),
    ("30 2 * * mon-fri", "Mon..Fri *-*-* 02:30:00 UTC"),
    ("0 9-17/4 * * 1,3,7", "Mon,Wed,Sun *-*-* 09,13,17:00:00 UTC"),
    ("0 8 * * 5-7", "Fri..Sun *-*-* 08:00:00 UTC"),
    ("0 0 1 */3 *", "*-01,04,07,10-01 00:00:00 UTC"),
    ("@weekly", "Sun *-*-* 00:00:00 UTC"),
])
def test_a_cron_schedule_becomes_the_same_systemd_calendar(cron, calendar):
    schedule = parse_schedule(cron)
    assert schedule.on_calendar == calendar
    if SYSTEMD_ANALYZE:  # systemd reads it back as written
        checked = subprocess.run([SYSTEMD_ANALYZE, "calendar", calendar], capture_output=True,
                                 text=True, timeout=30, check=False)
        assert checked.returncode == 0, checked.stderr
        assert f"Normalized form: {calendar}" in checked.stdout


@pytest.mark.parametrize(("cron", "says"), [
    ("0 3 * *", "a schedule has five fields"),
    ("60 3 * * *", "the minute '60' is not 0-59"),
    ("0 3 * * funday", "the day of week 'funday' is not 0-7 or a name sun..sat"),
    ("*/0 * * * *", "the minute '*/0' is not a number"),
    ("0 5-2 * * *", "'5-2' runs backwards"),
    ("0 3 1 * mon", "restricts both the day of month and the day of week"),
])
def test_a_bad_schedule_is_refused_naming_the_field(cron, says):
    with pytest.raises(UsageError, match=re.escape(says)):
        parse_schedule(cron)


def test_the_cronjob_verifies_the_service_and_keeps_its_archives_on_a_claim(
        tmp_path, model_dir, monkeypatch):
    monkeypatch.setenv("VLLM_API_KEY", KEY)  # in the exporting shell: never in a file
    out = export(keyed_recipe(tmp_path, model_dir), tmp_path, "kubernetes",
                 verify_schedule="30 2 * * 1-5", tune_image="registry.example/mopt:1")
    text = (out.folder / "verify-cronjob.yaml").read_text()
    assert KEY not in text
    recipe_map, claim, cronjob = yaml.safe_load_all(text)
    assert [recipe_map["kind"], claim["kind"], cronjob["kind"]] == [
        "ConfigMap", "PersistentVolumeClaim", "CronJob"]
    assert claim["metadata"]["name"] == f"{NAME}-verify-runs"
    spec = cronjob["spec"]
    assert (spec["schedule"], spec["timeZone"], spec["concurrencyPolicy"]) == (
        "30 2 * * 1-5", "Etc/UTC", "Forbid")
    job = spec["jobTemplate"]["spec"]
    assert job["backoffLimit"] == 0  # exit 4 fails the Job: a verdict is not retried
    pod = job["template"]["spec"]
    assert not [v for v in pod["volumes"] if "emptyDir" in v]
    runs = next(v for v in pod["volumes"] if v["name"] == "runs")
    assert runs["persistentVolumeClaim"] == {"claimName": f"{NAME}-verify-runs"}
    [container] = pod["containers"]
    assert container["image"] == "registry.example/mopt:1"
    assert {"name": "runs", "mountPath": "/runs"} in container["volumeMounts"]
    assert container["command"] == ["mopt"] and container["args"] == [
        "verify", "/etc/mopt/recipe.yaml", "--url", f"http://{NAME}:8100",
        "--runs-dir", "/runs", "--tokenizer", "/models/tiny"]
    assert container["env"] == [{"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": {
        "name": f"{NAME}-env", "key": "VLLM_API_KEY"}}}]
    assert "nvidia.com/gpu" not in container["resources"]["requests"]
    for document in (recipe_map, claim, cronjob):
        kubernetes_validate.validate(document, kubernetes_validate.latest_version(),
                                     strict=True)
    cronjob["spec"]["concurrencyPolicy"] = ["Forbid"]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(cronjob, kubernetes_validate.latest_version(),
                                     strict=True)


def test_the_schedule_is_daily_by_default_and_off_writes_none(tmp_path, model_dir):
    loaded = load_recipe(write_recipe(tmp_path, model_dir))
    files = export(loaded, tmp_path, "kubernetes", "systemd").files
    assert {"verify-cronjob.yaml", f"{NAME}-verify.timer", f"{NAME}-verify.service"} <= set(
        files)
    cronjob = list(yaml.safe_load_all((tmp_path / "out" / "verify-cronjob.yaml").read_text()))
    assert cronjob[-1]["spec"]["schedule"] == "0 3 * * *"
    none = export(loaded, tmp_path, "kubernetes", "systemd", verify_schedule="off").files
    assert not [name for name in none if "verify" in name]


def test_the_cli_refuses_a_bad_schedule_before_writing(tmp_path, model_dir):
    recipe = write_recipe(tmp_path, model_dir)
    bad = CliRunner().invoke(app, ["export", str(recipe), "--to", str(tmp_path / "o"), "-f",
                                   "kubernetes", "--verify-schedule", "0 25 * * *",
                                   "--runs-dir", str(tmp_path / "runs")])
    assert bad.exit_code == 2 and "the hour '25' is not 0-23" in bad.output
    assert not (tmp_path / "o").exists()


def test_the_systemd_timer_starts_the_oneshot_verification(tmp_path, model_dir):
    loaded = keyed_recipe(tmp_path, model_dir)
    out = export(loaded, tmp_path, "systemd", verify_schedule="@daily")
    timer = parse_unit((out.folder / f"{NAME}-verify.timer").read_text())
    assert timer["Timer"] == {"OnCalendar": ["*-*-* 00:00:00 UTC"], "Persistent": ["true"],
                              "Unit": [f"{NAME}-verify.service"]}
    assert timer["Install"]["WantedBy"] == ["timers.target"]
    service = parse_unit((out.folder / f"{NAME}-verify.service").read_text())["Service"]
    assert service["Type"] == ["oneshot"]
    assert service["EnvironmentFile"] == [f"/etc/mopt/{NAME}.secrets.env"]
    runs = (tmp_path / "runs").resolve()  # the export's: the validating archive is there
    assert shlex.split(service["ExecStart"][0]) == [
        sys.executable, "-m", "model_optimizer", "verify", str(loaded.path.resolve()),
        "--url", "http://127.0.0.1:8100", "--runs-dir", str(runs)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_timer_s_command_runs_mopt_verify(tmp_path, model_dir):
    loaded = load_recipe(write_recipe(tmp_path, model_dir))
    out = export_recipe(loaded, tmp_path / "out", tmp_path / "runs",
                        ExportOptions(("systemd",), port=free_port()))
    service = parse_unit((out.folder / f"{NAME}-verify.service").read_text())["Service"]
    ran = subprocess.run(shlex.split(service["ExecStart"][0]), capture_output=True,
                         text=True, timeout=120, check=False)
    assert ran.returncode == 2, ran.stdout + ran.stderr  # no server there: a dead --url
    assert "does not answer /v1/models" in ran.stdout + ran.stderr


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed "
                    "(Debian: apt-get install systemd)")
def test_the_timer_and_its_service_pass_systemd_analyze_verify(tmp_path, model_dir):
    out = export(keyed_recipe(tmp_path, model_dir), tmp_path, "systemd",
                 python=sys.executable)
    timer, service = out.folder / f"{NAME}-verify.timer", out.folder / f"{NAME}-verify.service"
    checked = subprocess.run([SYSTEMD_ANALYZE, "verify", "--man=no", str(timer),
                              str(service)], capture_output=True, text=True, timeout=60,
                             check=False)
    assert checked.returncode == 0 and "verify." not in checked.stderr, checked.stderr
    broken = tmp_path / "broken.timer"
    broken.write_text(timer.read_text().replace("OnCalendar=", "OnCalendar=someday "))
    assert "broken.timer" in verify_unit(broken).stderr  # the check sees a bad calendar

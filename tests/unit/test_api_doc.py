"""docs/api.md's example runs as written: apply on the mock engine, rollback, export and
report, through ``model_optimizer.usecase`` (mopt's Python API)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.unit.mock_engine import mock_recipe

ROOT = Path(__file__).resolve().parents[2]


def example() -> str:
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 1, "docs/api.md has one example"
    return blocks[0]


def test_the_api_page_example_runs(tmp_path, tiny_model_dir, monkeypatch, capsys):
    monkeypatch.setenv("MOPT_TEST_SECRET_TOKEN", "x")
    mock_recipe(tmp_path, tiny_model_dir)
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(example(), "docs/api.md", "exec"), scope)  # noqa: S102
    result, back, deployed, page = (scope[name] for name in ("result", "back", "deployed",
                                                               "page"))
    assert result.outcome.status == "ok" and result.exit_code == 0
    assert result.outcome.archive.resolve().parent == (tmp_path / "runs").resolve()
    assert back.exit_code == 0 and back.restored.revision == back.restored.previous_revision + 1
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("ok 0 ") and " req/s TTFT p50 " in printed[0]
    assert printed[1] == f"revision {back.restored.previous_revision} -> " \
                         f"{back.restored.revision} 0"
    # the restored revision, validated by its run, exported as vLLM's own config files
    assert deployed.exit_code == 0 and deployed.outcome.forced_over == []
    assert deployed.outcome.folder == (tmp_path / "deploy").resolve()
    assert all((deployed.outcome.folder / name).is_file() for name in deployed.outcome.files)
    assert printed[2] == f"{deployed.what} -> {', '.join(sorted(deployed.outcome.files))}"
    assert deployed.what.endswith(f" revision {back.restored.revision}")
    # a run's archive holds no report: one is written beside the runs, from the archive
    assert page.written and page.archive_id == result.outcome.run_id
    assert page.path == Path(f"mopt-report-{result.outcome.run_id}.html")
    assert "<html" in (tmp_path / page.path).read_text(encoding="utf-8").lower()
    assert printed[3] == f"report: {page.path}"

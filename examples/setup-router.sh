#!/usr/bin/env bash
# The router of a fleet (`mopt apply FLEET`, docs/fleet.md): LiteLLM's proxy in its own venv,
# .venv-router. It does not share .venv: litellm[proxy] would move packages vLLM's
# environment holds (rich, huggingface_hub). mopt starts .venv-router/bin/litellm (or
# $MOPT_ROUTER_BIN) as a child process and talks to it over HTTP on 127.0.0.1. Idempotent:
# a second call only checks. About 1 minute and 800 MB the first time.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
# the litellm pin lives in pyproject.toml's `router` extra
SPEC=$("$PYTHON" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["router"][0])')

if [ ! -x .venv-router/bin/python ]; then
  echo "== creating .venv-router"
  "$PYTHON" -m venv .venv-router
fi
if ! .venv-router/bin/python -c "import litellm.proxy.proxy_server" 2>/dev/null \
    || [ ! -x .venv-router/bin/litellm ]; then
  echo "== installing $SPEC into .venv-router"
  start=$(date +%s)
  # shellcheck source=examples/install.sh
  . examples/install.sh
  install_into .venv-router "$SPEC"
  echo "== installed in $(( $(date +%s) - start )) s"
fi
echo "== router ready: $(.venv-router/bin/python -c 'import importlib.metadata as m; print("litellm", m.version("litellm"))')"

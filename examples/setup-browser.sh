#!/usr/bin/env bash
# A headless Chromium for the HTML report's browser tests (Debian's chromium-headless-shell;
# needs root for apt-get). Idempotent: a second call only checks.
set -euo pipefail
if command -v chromium-headless-shell >/dev/null || command -v chromium >/dev/null; then
  exit 0
fi
echo "== installing chromium-headless-shell (Debian) for the report's browser tests"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium-headless-shell >/dev/null

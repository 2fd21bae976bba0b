#!/usr/bin/env bash
# Installs what callqa needs on a fresh machine (idempotent; fast when already done):
# Debian packages for test speech, audio tools and the report check, then a virtual
# environment with the project. Kafka jars and the MinIO binary are cached on first
# `callqa stack up` (under ~/.cache/callqa).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
for cmd in espeak-ng sox chromium; do command -v "$cmd" >/dev/null || need_apt+=("$cmd"); done
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing Debian packages: ${need_apt[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  else
    echo "setup: please install the Debian packages: ${need_apt[*]}" >&2; exit 1
  fi
fi

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.callqa-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing the project into .venv (the first time downloads torch, ~3 GB)"
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e '.[dev]'
  touch "$stamp"
fi

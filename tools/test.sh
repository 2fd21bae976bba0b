#!/usr/bin/env bash
# The test command: installs what is missing, then runs every test. Integration tests
# start their own Kafka + MinIO (see tests/conftest.py); nothing is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
exec .venv/bin/python -m pytest "$@"

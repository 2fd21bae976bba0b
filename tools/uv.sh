#!/usr/bin/env bash
# Prints the path of uv at the version pyproject.toml's dev extra pins, installing it on first use
# into a venv of its own under the cache (so the locks and check_wheel.sh use the same uv everywhere).
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(grep -oE '"uv==[0-9][^"]*"' pyproject.toml | tr -d '"' | cut -d= -f3)
[ -n "$version" ] || { echo "tools/uv.sh: pyproject.toml's dev extra must pin uv==<version>" >&2; exit 2; }
venv="${CALLQA_CACHE_DIR:-$HOME/.cache/callqa}/tools/uv-$version"
if [ ! -x "$venv/bin/uv" ]; then
  python3 -m venv "$venv" >&2 && "$venv/bin/pip" install -q "uv==$version" >&2
fi
echo "$venv/bin/uv"

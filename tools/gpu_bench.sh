#!/usr/bin/env bash
# The accelerator check in one command: engine throughput, padding and memory on a CUDA (or ROCm)
# device, then a memory soak. The corpus is made here first (it needs espeak-ng) and read there:
#
#   .venv/bin/python -m tools.bench_engine --minutes 30 --corpus bench-corpus --systems ""   # here, once
#   bash tools/gpu_bench.sh                                                               # on the GPU host
#
# The GPU host needs the project's Python dependencies and the joined Whisper weights in its cache
# (see DESIGN.md: carry them in chunks); figures are printed last and written to gpu-*.json.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
CORPUS=${CORPUS:-bench-corpus}
$PY -m tools.bench_engine --device cuda --corpus "$CORPUS" --systems "${SYSTEMS:-callqa,callqa-30s}" --out gpu-bench.json
$PY -m tools.soak_engine --device cuda --minutes "${SOAK_MINUTES:-5}" --out gpu-soak.json

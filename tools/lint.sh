#!/usr/bin/env bash
# Lint, format check and type check (run by .ci/run). Installs ruff and mypy (the dev extra's pins) if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
"$PY" -m ruff --version >/dev/null 2>&1 && "$PY" -m mypy --version >/dev/null 2>&1 \
    || "$PY" -m pip install -q "ruff==0.17.5" "mypy==2.4.1"
"$PY" -m ruff check .
# Formatted modules. The rest keeps its aligned-continuation style until its owner converts it
# (ruff format cannot keep that style; one whole-tree reformat would collide with open work).
"$PY" -m ruff format --check \
    pipeline/stages pipeline/batching.py pipeline/run/step_frame.py pipeline/asr/windows.py pipeline/chinese.py pipeline/run/worker.py pipeline/run/worker_commit.py \
    pipeline/adapters/fetch.py pipeline/adapters/file_store.py pipeline/adapters/minio_store.py \
    pipeline/adapters/faust_auth.py pipeline/run/router_markers.py pipeline/runtime/kafka_retry.py tools/bench_markers.py \
    pipeline/run/router_lanes.py pipeline/runtime/lag_kafka.py pipeline/runtime/backlog.py \
    tests/unit/test_router_markers.py tests/unit/test_faust_security.py tests/unit/test_kafka_retry.py \
    tests/integration/test_router_handover.py tests/integration/test_faust_sasl.py \
    pipeline/adapters/local_inputs.py tests/unit/test_local_inputs.py pipeline/run/progress_bar.py \
    tests/fakes.py tests/unit/test_gather.py tests/unit/test_failure_kinds.py tests/unit/test_import_boundaries.py \
    tests/unit/test_progress.py tests/unit/test_worker_commit.py tests/unit/test_qa_outcome.py \
    tests/unit/test_storage_retry.py tests/unit/test_batch_deadline.py tests/integration/test_worker_liveness.py \
    pipeline/asr/numbers.py pipeline/numbers/spoken.py pipeline/numbers/validators.py pipeline/numbers/model.py \
    pipeline/numbers/__init__.py tests/unit/test_number_regions.py pipeline/asr/presets.py pipeline/run/shipped_engine.py \
    tests/unit/asr/test_presets.py \
    tools/bench_corpus.py tools/bench_render.py tools/bench_templates.py tools/bench_score.py tools/bench_report.py \
    tools/bench_system.py tools/bench_engine.py tests/unit/test_bench_corpus.py tests/unit/test_bench_score.py \
    pipeline/simulated tools/simulate_night.py tools/night_lag.py tests/unit/test_simulate_night_lag.py tests/unit/test_simulated.py tests/integration/test_simulated_night.py \
    tests/unit/test_simulate_night_plan.py \
    pipeline/run/redact.py pipeline/run/redacted_audio.py tests/unit/test_redacted_copies.py \
    tests/unit/test_redacted_audio.py tests/integration/test_redaction_stage.py pipeline/run/redact_step.py \
    tests/unit/test_redacted_outputs.py tests/unit/test_deployed_stages.py tests/integration/test_redact_policy.py \
    tests/unit/test_bench_system.py pipeline/run/embedded_files.py pipeline/run/embedded_summary.py \
    pipeline/run/embedded_inputs.py pipeline/adapters/recordings.py \
    tools/word_calls.py tools/eval_words.py tools/eval_redaction.py tests/unit/test_replaced_originals.py \
    tests/integration/test_replace_original.py
"$PY" -m mypy  # strict on pipeline/stages, asr/packing, asr/timing ([tool.mypy] in pyproject.toml)

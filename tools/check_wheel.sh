#!/usr/bin/env bash
# The wheel as an image installs it: build it, install it NON-editable into clean venvs with its
# dependencies from deploy/locks (nothing from the project venv), and from a directory outside the
# repository import every stage's runner, run `topics apply` and a router against a local stack
# (`callqa stack up`), then upload one recording and wait for the router to put it on its bucket.
#
# Two venvs, one per lock flavour:
#   no-torch  no-torch.txt with --no-deps, as the ascend/hygon-dcu/iluvatar images install it (their base
#             brings torch): everything callqa needs but torch must be there, and the runners import
#   full      full.txt with its dependencies resolved in hash-checking mode, as the nvidia and cpu
#             images install it, then the wheel with --no-index (its own dependencies resolved against
#             what the lock installed): a dependency missing from the lock fails here, as in the image
#             build. It prepares the model (torch) and runs the router.
# Why not one venv from the full lock only: the no-torch images are the ones installed --no-deps, so
# they need their own completeness check, and it costs ~300 MB (seconds from the cache).
# Installs use uv (the locker pinned in pyproject.toml) with its cache under ~/.cache/callqa/uv: a fresh
# machine downloads torch and the CUDA libraries (about 3.5 GB) once, later runs link them from the
# cache in seconds. pip in the images and uv here read the same hashes and markers.
#
# usage: tools/check_wheel.sh [PROJECT_VENV]      (default: .venv; only its pip builds the wheel)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
project_venv=$(cd "${1:-$repo/.venv}" && pwd)
export UV_CACHE_DIR="${UV_CACHE_DIR:-${CALLQA_CACHE_DIR:-$HOME/.cache/callqa}/uv}"
uv=$(bash "$repo/tools/uv.sh")
work=$(mktemp -d)
state="$work/state"
router_pid=""
cleanup() {
  [ -n "$router_pid" ] && kill "$router_pid" 2>/dev/null && wait "$router_pid" 2>/dev/null || true
  [ -x "$work/full/bin/callqa" ] && "$work/full/bin/callqa" --state-dir "$state" stack down >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
start=$(date +%s)

"$project_venv/bin/pip" wheel -q --no-deps -w "$work/dist" "$repo"
wheel=$(ls "$work"/dist/callqa-*.whl)
for flavour in no-torch full; do
  "$project_venv/bin/python" -m venv --without-pip "$work/$flavour"  # the same base Python, none of its packages
  deps=(); [ "$flavour" = no-torch ] && deps=(--no-deps)
  "$uv" pip install -q --python "$work/$flavour/bin/python" --require-hashes "${deps[@]}" \
    -r "$repo/deploy/locks/$flavour.txt"
  "$uv" pip install -q --python "$work/$flavour/bin/python" "${deps[@]}" --no-index "$wheel"  # full: its deps resolved against the lock
  echo "check_wheel: $(basename "$wheel") and deploy/locks/$flavour.txt installed at $(( $(date +%s) - start ))s"
done

cd "$work"   # outside the repository: nothing may come from the source tree
# no-torch: every requirement of callqa and of what the lock installed is met, torch alone excepted.
"$uv" pip check --python "$work/no-torch/bin/python" > "$work/pip-check.txt" 2>&1 || true
if grep -vE "requires .torch[>=<]|^(Using|Checked|Found) " "$work/pip-check.txt" | grep -q .; then
  cat "$work/pip-check.txt"; echo "check_wheel: no-torch.txt lacks a dependency" >&2; exit 1
fi
"$uv" pip check --python "$work/full/bin/python"
for flavour in no-torch full; do
  "$work/$flavour/bin/python" - "$flavour" <<'EOF'
"""Every stage's runner imports from the installed wheel (the images' entry points)."""
import importlib, sys, sysconfig
flavour = sys.argv[1]
runners = ["pipeline.cli", "pipeline.run.router", "pipeline.run.worker", "pipeline.run.qa", "pipeline.run.embedded"]
for name in runners:
    importlib.import_module(name)
import pipeline.catalog
site = sysconfig.get_paths()["purelib"]
where = list(pipeline.__path__) + [pipeline.catalog.__file__, str(pipeline.catalog.topics_dir())]
outside = [p for p in where if not p.startswith(site)]
if outside:
    sys.exit(f"check_wheel: pipeline does not come from the installed wheel: {outside}")
if flavour == "full":
    import torch  # noqa: F401 - the full lock's torch, for the model and the worker's engine
print(f"check_wheel: {flavour}: {', '.join(runners)} import from {site}")
EOF
done
py="$work/full/bin/python"
callqa=("$work/full/bin/callqa" --state-dir "$state")
"${callqa[@]}" topics schemas
# The image's model stage: join, verify and convert the weights into a cache once.
CALLQA_CACHE_DIR="$work/model-cache" "${callqa[@]}" prepare-model

"${callqa[@]}" stack up
# A prefix of its own, so `topics apply` from the wheel has topics to create; MinIO keeps
# publishing onto the stack's audio.arrivals, which the router reads (arrivals_topic).
export CALLQA_TOPIC_PREFIX=wheelcheck. CALLQA_ARRIVALS_TOPIC=audio.arrivals CALLQA_LOG_FORMAT=json
"${callqa[@]}" topics apply --execute | tee "$work/apply.txt"
grep -q "wheelcheck.audio.bucket.short: create" "$work/apply.txt"
"${callqa[@]}" topics apply --execute | grep -q "no changes"

"${callqa[@]}" router > "$work/router.log" 2>&1 &
router_pid=$!
"${callqa[@]}" ingest --prefix wheelcheck/ "$repo/tests/fixtures/calls/sample-01-clean.wav"
"$py" - "$state/stack.env" "$router_pid" <<'EOF' || { tail -40 "$work/router.log"; exit 1; }
"""Wait for the router to route the uploaded recording onto its duration bucket."""
import os, sys, time
from confluent_kafka import Consumer

env = dict(line.split("=", 1) for line in open(sys.argv[1]).read().splitlines() if "=" in line)
consumer = Consumer({"bootstrap.servers": env["CALLQA_KAFKA_BOOTSTRAP"], "group.id": "check-wheel",
                     "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
consumer.subscribe(["^wheelcheck\\.audio\\.bucket\\..*"])
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    os.kill(int(sys.argv[2]), 0)  # the router must still be running
    msg = consumer.poll(1.0)
    if msg is not None and not msg.error():
        print(f"check_wheel: router routed {msg.key().decode()} onto {msg.topic()}")
        sys.exit(0)
sys.exit("check_wheel: nothing routed within 120 s")
EOF
echo "check_wheel: passed in $(( $(date +%s) - start ))s"

#!/usr/bin/env bash
# The wheel as an operator installs it: build it, install it NON-editable into a fresh venv, and
# from a directory outside the repository run `topics apply` and a router against a local stack
# (`callqa stack up`), then upload one recording and wait for the router to put it on its bucket.
#
# Torch and the other dependencies are not downloaded again: the fresh venv sees the project
# venv's site-packages through a .pth line (appended after its own site-packages, and without
# running that venv's .pth files, so the editable install there stays invisible). The check
# asserts that `pipeline` resolves to the installed wheel.
#
# usage: tools/check_wheel.sh [PROJECT_VENV]      (default: .venv)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
project_venv=$(cd "${1:-$repo/.venv}" && pwd)
work=$(mktemp -d)
state="$work/state"
router_pid=""
cleanup() {
  [ -n "$router_pid" ] && kill "$router_pid" 2>/dev/null && wait "$router_pid" 2>/dev/null || true
  [ -x "$work/venv/bin/callqa" ] && "$work/venv/bin/callqa" --state-dir "$state" stack down >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
start=$(date +%s)

"$project_venv/bin/pip" wheel -q --no-deps -w "$work/dist" "$repo"
wheel=$(ls "$work"/dist/callqa-*.whl)
"$project_venv/bin/python" -m venv "$work/venv"
site_new=$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
site_old=$("$project_venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$site_old" > "$site_new/project-venv-deps.pth"
"$work/venv/bin/pip" install -q --no-deps --no-index "$wheel"
echo "check_wheel: built and installed $(basename "$wheel") in $(( $(date +%s) - start ))s"

cd "$work"   # outside the repository: nothing may come from the source tree
py="$work/venv/bin/python"
callqa=("$work/venv/bin/callqa" --state-dir "$state")
"$py" - "$site_new" <<'EOF'
import sys
import pipeline.catalog
site = sys.argv[1]
where = list(pipeline.__path__) + [pipeline.catalog.__file__, str(pipeline.catalog.topics_dir())]
outside = [p for p in where if not p.startswith(site)]
if outside:
    sys.exit(f"check_wheel: pipeline does not come from the installed wheel: {outside}")
print(f"check_wheel: pipeline from {site}")
EOF
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

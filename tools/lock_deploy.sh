#!/usr/bin/env bash
# The image lock files in deploy/locks/ (hash-pinned, for `pip install --require-hashes`), resolved
# from pyproject.toml's runtime dependencies alone by `uv pip compile`:
#   full.txt      every runtime dependency, PyPI's torch included (nvidia and cpu images)
#   no-torch.txt  the same pins without torch, triton and the nvidia-* CUDA libraries, for images
#                 whose base brings the vendor's torch (ascend, hygon-dcu, iluvatar)
# Universal (every platform and Python >= 3.11: the images are linux x86_64 and aarch64, Python 3.11).
#
# Reproducible: uv's version is the one pinned in pyproject.toml's dev extra, and the resolver sees
# only what PyPI had published before EXCLUDE_NEWER, so the same pyproject.toml gives the same locks
# on any machine and any day. To take newer releases, move EXCLUDE_NEWER forward, delete
# deploy/locks/*.txt and regenerate (existing pins are kept otherwise).
#
#   tools/lock_deploy.sh            regenerate deploy/locks/
#   tools/lock_deploy.sh --check    regenerate into a temporary folder and fail (exit 1) if the committed
#                                   locks differ, or if a dependency pyproject.toml names is not in them
# Needs PyPI only for metadata (resolution downloads no wheels); a few seconds when uv's cache is warm.
set -euo pipefail
cd "$(dirname "$0")/.."
EXCLUDE_NEWER=2026-12-02T00:00:00Z
mode=${1:-write}
case "$mode" in write|--check) ;; *) echo "usage: tools/lock_deploy.sh [--check]" >&2; exit 2 ;; esac

uv=$(bash tools/uv.sh)  # the version pinned in pyproject.toml's dev extra

work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
# uv keeps an output file's pins where pyproject.toml still allows them: seeded with the committed
# locks, a package index that gained a newer release since does not read as drift (a mirror served
# filelock 4.3.2 a day after the locks took 4.3.1, both dated before EXCLUDE_NEWER)
cp deploy/locks/full.txt deploy/locks/no-torch.txt "$work"/ 2>/dev/null || true
compile=("$uv" pip compile pyproject.toml --universal --python-version 3.11 --generate-hashes --quiet
         --exclude-newer "$EXCLUDE_NEWER" --custom-compile-command tools/lock_deploy.sh)
"${compile[@]}" -o "$work/full.txt"
skip=()
for name in $(grep -oE '^(torch|triton|nvidia-[a-z0-9-]+)==' "$work/full.txt" | tr -d '='); do
  skip+=(--no-emit-package "$name")
done
"${compile[@]}" "${skip[@]}" -o "$work/no-torch.txt"

# Every runtime dependency pyproject.toml names must be pinned (no-torch: all but torch), whatever uv
# did: the images install no-torch.txt with --no-deps, so a name missing there is an import error.
# (The images install no extras: dev and bench are for CI and benchmarks.)
complete() {
python3 - "$1" <<'EOF'
import re, sys, tomllib
from pathlib import Path

def canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()

deps = tomllib.loads(Path("pyproject.toml").read_text())["project"]["dependencies"]
wanted = {canon(re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", d).group()) for d in deps}
missing = []
for lock, leave_out in (("full.txt", set()), ("no-torch.txt", {"torch"})):
    text = (Path(sys.argv[1]) / lock).read_text()
    pinned = {canon(m) for m in re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==", text, re.M)}
    missing += [f"{lock}: {n}" for n in sorted(wanted - leave_out - pinned)]
if missing:
    sys.exit(f"lock_deploy: pyproject.toml dependencies not in {sys.argv[1]}: " + ", ".join(missing))
EOF
}
complete "$work"

if [ "$mode" = --check ]; then
  drift=0
  complete deploy/locks || drift=1
  for lock in full no-torch; do
    python3 - "$work/$lock.txt" "deploy/locks/$lock.txt" <<'EOF' || drift=1
"""Fails on any difference; prints the pins that differ (not every hash line) to say why."""
import re, sys
from pathlib import Path

new, old = (Path(p).read_text() for p in sys.argv[1:])
if new == old:
    sys.exit(0)
pins = lambda text: set(re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*==\S+(?: ;[^\\\n]*)?)", text, re.M))
added, removed = sorted(pins(new) - pins(old)), sorted(pins(old) - pins(new))
print(f"lock_deploy: {sys.argv[2]} is not what pyproject.toml resolves to (run tools/lock_deploy.sh):")
for pin in removed:
    print(f"  - {pin.strip()}")
for pin in added:
    print(f"  + {pin.strip()}")
if not added and not removed:
    print("  (same pins; hashes, annotations or header differ)")
sys.exit(1)
EOF
  done
  [ "$drift" = 0 ] && echo "lock_deploy: deploy/locks match pyproject.toml"
  exit "$drift"
fi
cp "$work/full.txt" "$work/no-torch.txt" deploy/locks/
grep -c '==' deploy/locks/full.txt deploy/locks/no-torch.txt

#!/usr/bin/env bash
# Builds the callqa image for one accelerator target (run from anywhere; needs docker buildx).
#   deploy/build-image.sh nvidia|cpu|ascend|hygon-dcu|iluvatar [extra docker build args...]
# Override the defaults with BASE_IMAGE=..., TORCH_PIP=..., IMAGE=..., LOCK=..., PLATFORM=... (ascend:
# linux/arm64 by default, its Kunpeng hosts; PLATFORM=linux/arm64,linux/amd64 builds both, see the
# ascend overlay's arch.yaml).
# Vendor targets need BASE_IMAGE: the vendor's image matching the driver / firmware on your nodes
# (deploy/README.md, "Images", says where each comes from and what it must contain).
set -euo pipefail
target=${1:?usage: build-image.sh TARGET [docker build args]}; shift
repo=$(cd "$(dirname "$0")/.." && pwd)
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/pyproject.toml")
lock=no-torch; torch_pip=""; check=torch; base=""
case "$target" in
  nvidia)    lock=full; base=python:3.11-slim-bookworm ;;
  # CPU: no CUDA torch (about 3 GB of nvidia-* libraries that never run): the no-torch lock, then torch
  # from PyTorch's CPU wheel index (x86_64 and aarch64). Version = the full lock's torch.
  cpu)       base=python:3.11-slim-bookworm
             torch_pip="torch==$(sed -n 's/^torch==\([^ ]*\).*/\1/p' "$repo/deploy/locks/full.txt") --index-url https://download.pytorch.org/whl/cpu" ;;
  ascend)    torch_pip="torch==2.14.0 torch-npu==2.14.0"; check=torch_npu ;;   # CANN base image
  hygon-dcu) ;;                                                                 # DTK base with its torch
  iluvatar)  ;;                                                                 # CoreX base with its torch
  *) echo "unknown target $target (nvidia, cpu, ascend, hygon-dcu, iluvatar)" >&2; exit 2 ;;
esac
base=${BASE_IMAGE:-$base}
[ -n "$base" ] || { echo "target $target needs BASE_IMAGE=<the vendor's image> (see deploy/README.md)" >&2; exit 2; }
[ "$target" = ascend ] && PLATFORM=${PLATFORM:-linux/arm64}
image=${IMAGE:-callqa:$version-$target}
docker buildx build "$repo" -f "$repo/deploy/Dockerfile" -t "$image" \
  ${PLATFORM:+--platform "$PLATFORM"} \
  --build-arg BASE_IMAGE="$base" --build-arg LOCK="${LOCK:-$lock}" \
  --build-arg TORCH_PIP="${TORCH_PIP:-$torch_pip}" --build-arg CHECK_IMPORT="$check" "$@"
echo "built $image"

#!/usr/bin/env bash
# Validates deploy/ without a cluster or a container engine (installs its own tools, cached):
#  1. kustomize (built with `go install` at a pinned version) renders every overlay;
#  2. kubernetes-validate --strict checks each rendered object against the Kubernetes JSON schemas
#     (offline, bundled; KEDA's custom resources have no schema there and are checked by step 3);
#  3. tools/check_manifests.py checks what schemas cannot: KEDA vs the topic catalog, probes,
#     security contexts, devices, container args against the real CLI, setting names;
#  4. check-jsonschema validates the compose files against the compose-spec schema (bundled).
# usage: tools/check_deploy.sh [PROJECT_VENV]     (default: .venv)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=$(cd "${1:-$repo/.venv}" && pwd)
KUSTOMIZE_VERSION=v5.8.1          # builds with this machine's Go (v5.8.3's API needs a newer one)
K8S_VERSIONS="1.30.0 1.37.0"      # oldest cluster we support, newest schemas bundled
tools="${CALLQA_CACHE_DIR:-$HOME/.cache/callqa}/tools"
start=$(date +%s)

kustomize="$tools/kustomize-$KUSTOMIZE_VERSION"
if [ ! -x "$kustomize" ]; then
  mkdir -p "$tools/gobin"
  GOBIN="$tools/gobin" GOFLAGS=-mod=mod go install "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION"
  mv "$tools/gobin/kustomize" "$kustomize"
fi
checkers="$tools/deploy-venv"
if [ ! -x "$checkers/bin/check-jsonschema" ]; then
  python3 -m venv "$checkers"
  "$checkers/bin/pip" install -q kubernetes-validate==1.37.0 check-jsonschema==0.39.0
fi
echo "check_deploy: tools ready in $(( $(date +%s) - start ))s ($("$kustomize" version))"

# Render from a copy, with the operator-written secret files filled from their templates.
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cp -r "$repo/deploy/kubernetes" "$work/kubernetes"
for f in secrets kafka-auth; do cp "$work/kubernetes/base/$f.env.example" "$work/kubernetes/base/$f.env"; done
rendered=()
for dir in "$work"/kubernetes/overlays/*/; do
  overlay=$(basename "$dir")
  "$kustomize" build "$dir" > "$work/$overlay.yaml"
  for k in $K8S_VERSIONS; do
    out=$("$checkers/bin/kubernetes-validate" --strict --quiet -k "$k" "$work/$overlay.yaml" 2>&1) \
      || { echo "$out" >&2; echo "check_deploy: $overlay does not validate against Kubernetes $k" >&2; exit 1; }
    echo "$out" | grep -v "Couldn't find schema for kind [A-Za-z]* with api version keda.sh/" || true
  done
  rendered+=("$overlay=$work/$overlay.yaml")
done
[ ${#rendered[@]} -eq 5 ] || { echo "check_deploy: expected 5 overlays, found ${#rendered[@]}" >&2; exit 1; }
(cd "$repo" && "$venv/bin/python" -m tools.check_manifests "${rendered[@]}" --compose deploy/compose.yaml)
"$checkers/bin/check-jsonschema" --builtin-schema vendor.compose-spec \
  "$repo/deploy/compose.yaml" "$repo/deploy/compose.gpu.yaml"
# No secret values in the repository: the operator-written files stay untracked.
if git -C "$repo" ls-files --error-unmatch deploy/kubernetes/base/secrets.env deploy/kubernetes/base/kafka-auth.env \
     deploy/callqa.env >/dev/null 2>&1; then
  echo "check_deploy: an operator secrets file is committed" >&2; exit 1
fi
echo "check_deploy: passed in $(( $(date +%s) - start ))s"

#!/usr/bin/env bash
# Validates deploy/ without a cluster or a container engine (installs its own tools, cached):
#  1. kustomize (built with `go install` at a pinned version) renders every overlay;
#  2. kubernetes-validate --strict checks each rendered object against the Kubernetes JSON schemas
#     (offline, bundled); tools/check_crds.py checks the custom resources (KEDA; the Prometheus
#     operator's PrometheusRule) against their CRDs' schemas, strictly, from the KEDA and
#     prometheus-operator Go modules at pinned versions (`go mod download`, cached);
#  3. tools/check_manifests.py checks what schemas cannot: KEDA vs the topic catalog and sizing,
#     grace periods, disruption budgets, node selectors, probes, security contexts, devices,
#     container args against the real CLI, setting names;
#  4. check-jsonschema validates the compose files against the compose-spec schema (bundled).
# Besides the five overlays it renders nvidia with the replay-worker component (runbook, deploy/README.md).
# usage: tools/check_deploy.sh [PROJECT_VENV]     (default: .venv)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=$(cd "${1:-$repo/.venv}" && pwd)
KUSTOMIZE_VERSION=v5.8.1          # builds with this machine's Go (v5.8.3's API needs a newer one)
K8S_VERSIONS="1.30.0 1.37.0"      # oldest cluster we support, newest schemas bundled
KEDA_MODULE=github.com/kedacore/keda/v2@v2.21.0                                   # config/crd/bases
PROM_OPERATOR_MODULE=github.com/prometheus-operator/prometheus-operator@v0.85.0  # example/prometheus-operator-crd
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
crd_dirs=""
for module in "$KEDA_MODULE:config/crd/bases" "$PROM_OPERATOR_MODULE:example/prometheus-operator-crd"; do
  dir=$(GOFLAGS=-mod=mod go mod download -json "${module%%:*}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$dir/${module#*:}" ] || { echo "check_deploy: no CRDs in ${module%%:*} (${module#*:})" >&2; exit 1; }
  crd_dirs="${crd_dirs:+$crd_dirs,}$dir/${module#*:}"
done
echo "check_deploy: tools ready in $(( $(date +%s) - start ))s ($("$kustomize" version))"

# Render from a copy, with the operator-written secret files filled from their templates.
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cp -r "$repo/deploy/kubernetes" "$work/kubernetes"
for f in secrets kafka-auth redact-secrets; do cp "$work/kubernetes/base/$f.env.example" "$work/kubernetes/base/$f.env"; done
# The replay worker is an opt-in component: render it on top of one overlay, as the runbook does.
mkdir -p "$work/kubernetes/overlays-replay"
cp -r "$work/kubernetes/overlays/nvidia" "$work/kubernetes/overlays-replay/nvidia"
echo "components: [../../components/replay-worker]" >> "$work/kubernetes/overlays-replay/nvidia/kustomization.yaml"
rendered=()
for dir in "$work"/kubernetes/overlays/*/ "$work"/kubernetes/overlays-replay/*/; do
  overlay=$(basename "$dir"); out_file="$work/$overlay.yaml"
  case "$dir" in *overlays-replay*) out_file="$work/$overlay+replay.yaml" ;; esac
  "$kustomize" build "$dir" > "$out_file"
  for k in $K8S_VERSIONS; do
    out=$("$checkers/bin/kubernetes-validate" --strict --quiet -k "$k" "$out_file" 2>&1) \
      || { echo "$out" >&2; echo "check_deploy: $overlay does not validate against Kubernetes $k" >&2; exit 1; }
    # custom resources: tools/check_crds.py below
    echo "$out" | grep -v "Couldn't find schema for kind [A-Za-z]* with api version \(keda.sh\|monitoring.coreos.com\)/" || true
  done
  rendered+=("$overlay=$out_file")
done
[ ${#rendered[@]} -eq 6 ] || { echo "check_deploy: expected 5 overlays and a replay render, found ${#rendered[@]}" >&2; exit 1; }
"$checkers/bin/python" "$repo/tools/check_crds.py" "$crd_dirs" "${rendered[@]#*=}"
(cd "$repo" && "$venv/bin/python" -m tools.check_manifests "${rendered[@]}" --compose deploy/compose.yaml)
"$checkers/bin/check-jsonschema" --builtin-schema vendor.compose-spec \
  "$repo/deploy/compose.yaml" "$repo/deploy/compose.gpu.yaml"
# No secret values in the repository: the operator-written files stay untracked.
for f in deploy/kubernetes/base/secrets.env deploy/kubernetes/base/kafka-auth.env \
         deploy/kubernetes/base/redact-secrets.env deploy/callqa.env deploy/redact.env deploy/admin.env; do
  if git -C "$repo" ls-files --error-unmatch "$f" >/dev/null 2>&1; then
    echo "check_deploy: an operator secrets file is committed: $f" >&2; exit 1
  fi
done
echo "check_deploy: passed in $(( $(date +%s) - start ))s"

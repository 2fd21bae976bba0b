"""Checks of the rendered manifests' scaling and placement (used by tools/check_manifests.py).

- KEDA: workers scale from 0 on a cron window plus their group's audio backlog, queried as
  ``max by (group)`` (every replica exports the whole group's gauge: a sum would count it once per
  replica); the threshold is the audio one worker transcribes in the usable window at the target's
  RTFx (deploy/kubernetes/sizing.yaml). The router keeps Kafka lag (its input has no transaction
  markers); QA and the redaction stage scale on their messages gauges.
- Grace periods: a worker's terminationGracePeriodSeconds covers the longest batch its bucket allows
  at the target's RTFx, with the safety factor and commit time of sizing.yaml.
- A PodDisruptionBudget for every stage workload.
- Placement: node selectors only on labels the target's device plugin (or the kubelet) sets.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import yaml

SIZING = Path(__file__).resolve().parent.parent / "deploy" / "kubernetes" / "sizing.yaml"

# Node labels a worker may select, per overlay: what the device plugin's own DaemonSet selects or
# its labeller sets (deploy/README.md, "Device plugins"), plus the kubelet's kubernetes.io/arch.
WORKER_NODE_LABELS = {
    "nvidia": {"nvidia.com/gpu.present": "true"},  # GPU feature discovery
    "ascend": {"accelerator": "huawei-Ascend910", "kubernetes.io/arch": "arm64"},
    "hygon": {"hygon.com/dcu": "true"},  # DCU node labeller
    "iluvatar": {},  # the plugin labels nothing
    "cpu": {},
}
# The Ascend image is built for arm64 (deploy/build-image.sh): every pod of that overlay pins the arch.
ARCH_PINNED = {"ascend": "arm64"}


def load_sizing(path: Path = SIZING) -> dict[str, Any]:
    sizing: dict[str, Any] = yaml.safe_load(path.read_text())
    return sizing


def longest_batch_s(upper_s: float, max_calls: int, max_audio_s: float) -> float:
    """Audio seconds of the longest micro-batch a bucket allows: calls of at most ``upper_s`` each,
    up to ``max_calls`` and ``max_audio_s`` together, except that one call longer than
    ``max_audio_s`` forms a batch of its own (pipeline.batching.BatchBudget)."""
    return min(max_calls * upper_s, max(max_audio_s, upper_s))


def grace_needed_s(upper_s: float, rtfx: float, sizing: dict[str, Any]) -> int:
    batch_s = longest_batch_s(upper_s, sizing["max_calls"], sizing["max_audio_s"])
    return math.ceil(float(sizing["safety"]) * batch_s / rtfx + float(sizing["commit_s"]))


def threshold_audio_s(rtfx: float, sizing: dict[str, Any]) -> float:
    return rtfx * float(sizing["window_s"]) * (1 - float(sizing["margin"]))


def _query(expr: str) -> str:
    return re.sub(r"\s+", "", expr)


def check_scaling(
    overlay: str,
    by_kind: dict[str, dict[str, dict[str, Any]]],
    uppers: dict[str, float],
    errors: list[str],
    sizing: dict[str, Any] | None = None,
) -> None:
    """``uppers``: each bucket's longest call (its upper edge; the last bucket's is max_duration_s)."""
    sizing = sizing or load_sizing()
    rtfx = float(sizing["rtfx"][overlay])
    scaled = {so["spec"]["scaleTargetRef"]["name"]: so for so in by_kind.get("ScaledObject", {}).values()}
    for bucket, upper in uppers.items():
        name = f"callqa-worker-{bucket}"
        so = scaled.get(name)
        if so is not None:
            check_worker_triggers(f"{overlay}: {name}", so, f"asr-{bucket}", threshold_audio_s(rtfx, sizing), errors)
        sts = by_kind.get("StatefulSet", {}).get(name)
        if sts is not None:
            grace = sts["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
            need = grace_needed_s(upper, rtfx, sizing)
            if grace < need:
                errors.append(
                    f"{overlay}: {name}: terminationGracePeriodSeconds {grace} < {need} s (longest batch "
                    f"{longest_batch_s(upper, sizing['max_calls'], sizing['max_audio_s']):.0f} audio s "
                    f"at RTFx {rtfx:g})"
                )
    for stage in ("callqa-qa", "callqa-redact"):  # asr.transcripts in its own group: the messages gauge
        so = scaled.get(stage)
        if so is not None:
            want = _query(f'max by (group) (callqa_backlog_messages{{group="{stage}"}})')
            if [_query(t["metadata"].get("query", "")) for t in so["spec"]["triggers"]] != [want]:
                errors.append(f"{overlay}: {stage}: scale on {want} alone")
    check_pdbs(overlay, by_kind, errors)


def check_worker_triggers(where: str, so: dict[str, Any], group: str, threshold: float, errors: list[str]) -> None:
    spec = so["spec"]
    if spec.get("minReplicaCount", 0) != 0:
        errors.append(f"{where}: minReplicaCount {spec.get('minReplicaCount')}: workers must scale to 0")
    by_type: dict[str, list[dict[str, Any]]] = {}
    for trigger in spec["triggers"]:
        by_type.setdefault(trigger["type"], []).append(trigger["metadata"])
    if set(by_type) != {"cron", "prometheus"} or len(by_type["cron"]) != 1 or len(by_type["prometheus"]) != 1:
        errors.append(f"{where}: triggers {sorted(by_type)}: want one cron and one prometheus (no kafka lag)")
        return
    cron, prom = by_type["cron"][0], by_type["prometheus"][0]
    if not {"timezone", "start", "end"} <= set(cron) or int(cron.get("desiredReplicas", "0")) < 1:
        errors.append(f"{where}: cron trigger {cron}: needs timezone, start, end and desiredReplicas >= 1")
    want = _query(f'max by (group) (callqa_backlog_audio_seconds{{group="{group}"}})')
    if _query(prom.get("query", "")) != want:
        errors.append(f"{where}: query {prom.get('query')!r}: want {want} (one value per group, replicas not summed)")
    if not math.isclose(float(prom.get("threshold", "nan")), threshold, rel_tol=1e-6):
        errors.append(f"{where}: threshold {prom.get('threshold')} audio s: sizing.yaml gives {threshold:.0f}")


def check_pdbs(overlay: str, by_kind: dict[str, dict[str, dict[str, Any]]], errors: list[str]) -> None:
    selectors = [
        pdb["spec"].get("selector", {}).get("matchLabels", {})
        for pdb in by_kind.get("PodDisruptionBudget", {}).values()
    ]
    for kind in ("Deployment", "StatefulSet"):
        for name, obj in by_kind.get(kind, {}).items():
            labels = obj["spec"]["template"]["metadata"].get("labels", {})
            covering = [s for s in selectors if s and s.items() <= labels.items()]
            if len(covering) != 1:
                errors.append(f"{overlay}: {kind} {name}: {len(covering)} PodDisruptionBudgets select it (want 1)")


def check_placement(overlay: str, by_kind: dict[str, dict[str, dict[str, Any]]], errors: list[str]) -> None:
    arch = ARCH_PINNED.get(overlay)
    for kind in ("Deployment", "StatefulSet", "Job"):
        for name, obj in by_kind.get(kind, {}).items():
            pod = obj["spec"]["template"]["spec"]
            selector = pod.get("nodeSelector", {})
            is_worker = obj["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "worker"
            if is_worker and selector != WORKER_NODE_LABELS[overlay]:
                errors.append(
                    f"{overlay}: {kind} {name}: nodeSelector {selector}, the device plugin's nodes "
                    f"carry {WORKER_NODE_LABELS[overlay]}"
                )
            if arch and selector.get("kubernetes.io/arch") != arch:
                errors.append(f"{overlay}: {kind} {name}: the image is {arch}-only; pin kubernetes.io/arch: {arch}")

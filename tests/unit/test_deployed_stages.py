"""Every stage callqa runs is deployed: a compose service, a Kubernetes workload with its KEDA
ScaledObject and disruption budget, and a Prometheus scrape target (from deploy/ as written, no
kustomize: tools/check_deploy.sh renders and checks the overlays)."""

from __future__ import annotations

from pathlib import Path

import yaml

from tools.check_manifests import check_compose

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
STAGES = ("router", "qa", "redact")  # the Faust stages; the workers are one per bucket
BUCKETS = ("short", "medium", "long", "xlong")


def base_objects() -> dict[tuple[str, str], dict]:
    objects = {}
    for path in (DEPLOY / "kubernetes" / "base").glob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and "kind" in doc and doc["kind"] != "Kustomization":
                objects[(doc["kind"], doc["metadata"]["name"])] = doc
    return objects


def test_compose_passes_the_manifest_checks() -> None:
    errors: list[str] = []
    check_compose(DEPLOY / "compose.yaml", errors)
    assert errors == []


def test_every_stage_has_a_compose_service_and_a_scrape_target() -> None:
    services = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    scrape = yaml.safe_load((DEPLOY / "prometheus" / "compose-prometheus.yml").read_text())
    targets = {t for job in scrape["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]}
    for name in [*STAGES, *(f"worker-{b}" for b in BUCKETS)]:
        assert name in services, name
        assert f"{name}:9100" in targets, name
    assert services["redact"]["command"] == ["redact"]


def test_every_stage_has_a_workload_a_scaled_object_and_a_disruption_budget() -> None:
    objects = base_objects()
    resources = yaml.safe_load((DEPLOY / "kubernetes" / "base" / "kustomization.yaml").read_text())["resources"]
    for stage in STAGES:
        name = f"callqa-{stage}"
        deployment = objects[("Deployment", name)]
        assert deployment["spec"]["template"]["spec"]["containers"][0]["args"][0] == stage
        assert objects[("ScaledObject", name)]["spec"]["scaleTargetRef"]["name"] == name
        assert ("PodDisruptionBudget", name) in objects
        assert f"{stage}.yaml" in resources


def test_the_redaction_user_can_write_only_its_copies() -> None:
    import json

    policy = json.loads((DEPLOY / "minio" / "callqa-redact-policy.json").read_text())
    writes = [s for s in policy["Statement"] if any(a.startswith("s3:Put") for a in s["Action"])]
    assert [s["Resource"] for s in writes] == [["arn:aws:s3:::REDACT_BUCKET/REDACT_PREFIX*"]]
    pipeline = json.loads((DEPLOY / "minio" / "callqa-pipeline-policy.json").read_text())
    assert not [a for s in pipeline["Statement"] for a in s["Action"] if not a.startswith(("s3:Get", "s3:List"))]

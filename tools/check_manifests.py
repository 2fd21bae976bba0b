"""What a schema cannot see in the rendered deploy manifests: checked against the code and the catalog.

usage: python -m tools.check_manifests OVERLAY=RENDERED.yaml ... --compose deploy/compose.yaml

Kubernetes (each overlay, as `kustomize build` renders it):
- every configured bucket has a worker StatefulSet and a KEDA ScaledObject; router, QA and redaction
  have one too;
- maxReplicaCount <= the input topic's partitions (topics/catalog.yaml, with the overlay's
  CALLQA_TOPIC_PARTITIONS); a kafka trigger names the
  stage's real consumer group and topic, offsetResetPolicy "earliest" (what the stages use) and a
  TriggerAuthentication; triggers, grace periods, PodDisruptionBudgets and node selectors as
  tools/check_scaling.py says;
- every container: non-root, no privilege escalation, all capabilities dropped, read-only root
  filesystem, CPU and memory requests; stage containers: probes on /healthz and /readyz, port 9100;
- workers: CALLQA_ASR_THREADS from the CPU limit, the overlay's device resource and torch device;
- container args parse with the real `callqa` CLI; every CALLQA_* key is a real setting;
- the redaction stage runs as its own MinIO user (callqa-redact-secrets), the others as the pipeline's.
Compose: the same CLI and settings checks, a worker per bucket, stages waiting on the topics service,
the redaction stage with its own MinIO user (redact.env) and its bucket and policy in minio-setup.
Run with the project's Python (it imports pipeline).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import typer
import yaml

from pipeline.catalog import load_catalog
from pipeline.cli import app
from pipeline.config import Settings
from tools.check_scaling import check_placement, check_scaling

DEVICE = {  # overlay -> (device resource, torch device)
    "nvidia": ("nvidia.com/gpu", "cuda:0"),
    "ascend": ("huawei.com/Ascend910", "npu:0"),
    "hygon": ("hygon.com/dcu", "cuda:0"),
    "iluvatar": ("iluvatar.com/gpu", "cuda:0"),
    "cpu": (None, "cpu"),
}
STAGE_GROUPS = {
    "callqa-router": ("callqa-router", "audio.arrivals"),
    "callqa-qa": ("callqa-qa", "asr.transcripts"),
    "callqa-redact": ("callqa-redact", "asr.transcripts"),
}
STAGES = ("router", "qa", "redact")  # the compose services (and callqa-<name> Deployments) besides the workers
REDACT_SECRET = "callqa-redact-secrets"
REDACT_POLICY = "callqa-redact-policy.json"
SETTINGS_KEYS = {f"CALLQA_{name.upper()}" for name in Settings.model_fields}
CLI = typer.main.get_command(app)


def check_args(args: list[str], where: str, errors: list[str]) -> None:
    """Parse container args with the real CLI (no command runs); $(VAR) stands for any value."""
    argv = [re.sub(r"\$\((\w+)\)", "x", a) for a in args]
    if "--device" in argv:
        argv[argv.index("--device") + 1] = "cpu"
    # Typer bundles its own copy of click: use the command objects' own classes, not click's.
    try:
        command, name, rest = CLI, "callqa", argv
        ctx = CLI.context_class(CLI, info_name="callqa")
        while hasattr(command, "resolve_command"):  # a group, e.g. `topics apply`
            resolved, sub, rest = command.resolve_command(ctx, rest)
            if sub is None:
                raise ValueError(f"no command {resolved!r}")
            name, command = str(resolved), sub
            ctx = sub.context_class(sub, info_name=name, parent=ctx)
        command.make_context(name, list(rest), parent=ctx.parent)
    except Exception as exc:  # the parser's usage errors (NoSuchOption, BadParameter, ...)
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        errors.append(f"{where}: args {args} do not parse: {message}")


def check_env_keys(keys: list[str], where: str, errors: list[str]) -> None:
    unknown = sorted(k for k in keys if k.startswith("CALLQA_") and k not in SETTINGS_KEYS)
    if unknown:
        errors.append(f"{where}: not settings: {unknown}")


def check_overlay(overlay: str, docs: list[dict[str, Any]], errors: list[str]) -> None:
    by_kind: dict[str, dict[str, dict[str, Any]]] = {}
    for doc in docs:
        by_kind.setdefault(doc["kind"], {})[doc["metadata"]["name"]] = doc
    settings_cm = next(v for k, v in by_kind["ConfigMap"].items() if k.startswith("callqa-settings"))
    check_env_keys(list(settings_cm["data"]), f"{overlay}: ConfigMap callqa-settings", errors)
    buckets = tuple(yaml.safe_load(settings_cm["data"]["CALLQA_BUCKET_NAMES"]))
    overrides = yaml.safe_load(settings_cm["data"].get("CALLQA_TOPIC_PARTITIONS", "null")) or {}
    partitions = {spec.name: spec.partitions for spec in load_catalog(buckets, partitions=overrides)}
    if any(
        s.get("stringData") or any(s.get("data", {}).values())
        for s in by_kind.get("Secret", {}).values()
        if not s["metadata"]["name"].startswith(("callqa-secrets-", "callqa-kafka-auth-", f"{REDACT_SECRET}-"))
    ):
        errors.append(f"{overlay}: a Secret with values outside the secretGenerator")
    expected = dict(STAGE_GROUPS, **{f"callqa-worker-{b}": (f"asr-{b}", f"audio.bucket.{b}") for b in buckets})
    scaled = {so["spec"]["scaleTargetRef"]["name"]: so for so in by_kind.get("ScaledObject", {}).values()}
    auths = set(by_kind.get("TriggerAuthentication", {}))
    for target, (group, topic) in expected.items():
        so = scaled.get(target)
        if so is None:
            errors.append(f"{overlay}: no ScaledObject for {target}")
            continue
        workload = by_kind.get(so["spec"]["scaleTargetRef"]["kind"], {}).get(target)
        if workload is None:
            errors.append(f"{overlay}: ScaledObject {target} targets a missing {so['spec']['scaleTargetRef']['kind']}")
        for trigger in (t for t in so["spec"]["triggers"] if t["type"] == "kafka"):
            meta = trigger["metadata"]
            if (meta.get("consumerGroup"), meta.get("topic")) != (group, topic):
                errors.append(
                    f"{overlay}: {target} scales on {meta.get('consumerGroup')}/{meta.get('topic')}, "
                    f"the stage is {group}/{topic}"
                )
            if meta.get("offsetResetPolicy") != "earliest":
                errors.append(f"{overlay}: {target}: offsetResetPolicy must be earliest, as in the stages")
            if trigger.get("authenticationRef", {}).get("name") not in auths:
                errors.append(f"{overlay}: {target}: no TriggerAuthentication")
        if so["spec"]["maxReplicaCount"] > partitions.get(topic, 0):
            errors.append(
                f"{overlay}: {target}: maxReplicaCount {so['spec']['maxReplicaCount']} > "
                f"{partitions.get(topic)} partitions of {topic}"
            )
    for kind in ("Deployment", "StatefulSet", "Job"):
        for name, obj in by_kind.get(kind, {}).items():
            check_pod(overlay, f"{kind} {name}", obj["spec"]["template"]["spec"], kind != "Job", errors)
    for name in (f"callqa-{s}" for s in STAGES):
        if name not in by_kind.get("Deployment", {}):
            errors.append(f"{overlay}: no Deployment {name}")
    check_redact_user(overlay, by_kind, errors)
    edges = yaml.safe_load(settings_cm["data"].get("CALLQA_BUCKET_EDGES_S", "null")) or Settings().bucket_edges_s
    max_duration = float(settings_cm["data"].get("CALLQA_MAX_DURATION_S", Settings().max_duration_s))
    check_scaling(overlay, by_kind, dict(zip(buckets, [*map(float, edges), max_duration])), errors)
    check_placement(overlay, by_kind, errors)
    resource, device = DEVICE[overlay]
    replay = [n.removeprefix("callqa-worker-") for n in by_kind.get("StatefulSet", {}) if n == "callqa-worker-replay"]
    for b in [*buckets, *replay]:
        sts = by_kind.get("StatefulSet", {}).get(f"callqa-worker-{b}")
        if sts is None:
            errors.append(f"{overlay}: no worker StatefulSet for bucket {b}")
            continue
        container = sts["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e for e in container.get("env", [])}
        threads = env.get("CALLQA_ASR_THREADS", {}).get("valueFrom", {}).get("resourceFieldRef", {})
        if threads.get("resource") != "limits.cpu":
            errors.append(f"{overlay}: worker {b}: CALLQA_ASR_THREADS is not the CPU limit")
        if env.get("TORCH_DEVICE", {}).get("value") != device:
            errors.append(f"{overlay}: worker {b}: device {env.get('TORCH_DEVICE')} is not {device}")
        limits = container["resources"].get("limits", {})
        if resource and str(limits.get(resource)) != "1":
            errors.append(f"{overlay}: worker {b}: no {resource}: 1 limit")
        if container["args"][:3] != ["worker", "--bucket", "$(REPLAY_BUCKET)" if b == "replay" else b]:
            errors.append(f"{overlay}: worker {b}: args {container['args']}")


def check_redact_user(overlay: str, by_kind: dict[str, dict[str, dict[str, Any]]], errors: list[str]) -> None:
    """The redaction stage takes its S3 credentials from its own Secret (the only user that may write
    objects); no other workload reads that Secret."""
    for kind in ("Deployment", "StatefulSet", "Job"):
        for name, obj in by_kind.get(kind, {}).items():
            for c in obj["spec"]["template"]["spec"]["containers"]:
                env = {e["name"]: e for e in c.get("env", [])}
                refs = {
                    key: env.get(key, {}).get("valueFrom", {}).get("secretKeyRef", {}).get("name", "")
                    for key in ("CALLQA_S3_ACCESS_KEY", "CALLQA_S3_SECRET_KEY")
                }
                own = [k for k, ref in refs.items() if ref.startswith(f"{REDACT_SECRET}-")]
                if name == "callqa-redact" and len(own) != len(refs):
                    errors.append(f"{overlay}: {kind} {name}: S3 credentials {refs} are not from {REDACT_SECRET}")
                if name != "callqa-redact" and own:
                    errors.append(f"{overlay}: {kind} {name} reads the redaction stage's MinIO user ({REDACT_SECRET})")


def check_pod(overlay: str, where: str, pod: dict[str, Any], serves_http: bool, errors: list[str]) -> None:
    where = f"{overlay}: {where}"
    if not pod.get("securityContext", {}).get("runAsNonRoot"):
        errors.append(f"{where}: runAsNonRoot not set")
    for c in pod["containers"]:
        sc = c.get("securityContext", {})
        if (
            sc.get("allowPrivilegeEscalation") is not False
            or sc.get("readOnlyRootFilesystem") is not True
            or sc.get("capabilities", {}).get("drop") != ["ALL"]
        ):
            errors.append(f"{where}: container {c['name']}: securityContext {sc}")
        requests = c.get("resources", {}).get("requests", {})
        if not {"cpu", "memory"} <= set(requests):
            errors.append(f"{where}: container {c['name']}: requests {requests}")
        check_args(c.get("args", []), where, errors)
        check_env_keys([e["name"] for e in c.get("env", [])], where, errors)
        if serves_http:
            paths = {p: c.get(p, {}).get("httpGet", {}) for p in ("livenessProbe", "readinessProbe", "startupProbe")}
            want = {"livenessProbe": "/healthz", "readinessProbe": "/readyz", "startupProbe": "/healthz"}
            if any(paths[p].get("path") != want[p] or paths[p].get("port") != "metrics" for p in want):
                errors.append(f"{where}: probes {paths}")
            if {"name": "metrics", "containerPort": 9100} not in c.get("ports", []):
                errors.append(f"{where}: no metrics port 9100")


def check_compose(path: Path, errors: list[str]) -> None:
    compose = yaml.safe_load(path.read_text())
    services = compose["services"]
    buckets = Settings.model_fields["bucket_names"].default
    for b in buckets:
        if f"worker-{b}" not in services:
            errors.append(f"compose: no worker for bucket {b}")
    for name in [*STAGES, *(f"worker-{b}" for b in buckets)]:
        svc = services.get(name, {})
        if svc.get("depends_on", {}).get("topics", {}).get("condition") != "service_completed_successfully":
            errors.append(f"compose: {name} does not wait for the topics service")
        if "build" not in svc:
            errors.append(f"compose: {name} has no build")
    for name, svc in services.items():
        if svc.get("image", "").startswith("callqa") or "build" in svc:
            check_args(svc.get("command", []), f"compose: {name}", errors)
            check_env_keys(list(svc.get("environment", {}) or {}), f"compose: {name}", errors)
    check_compose_ops(services, errors)
    check_compose_redact(services, errors)
    example = path.parent / "callqa.env.example"
    keys = [ln.split("=", 1)[0] for ln in example.read_text().splitlines() if "=" in ln and not ln.startswith("#")]
    check_env_keys(keys, f"compose: {example.name}", errors)


def check_compose_ops(services: dict[str, Any], errors: list[str]) -> None:
    """Images that are published, a healthcheck on every long-running stage, Prometheus and Grafana
    with the dashboard, MinIO's root credentials kept away from the pipeline."""
    for name, svc in services.items():
        image = str(svc.get("image", ""))
        default = image.split(":-", 1)[-1].rstrip("}") if image.startswith("${") else image
        if default.endswith(":latest") or default.split(":")[0] in ("minio/minio", "minio/mc"):
            errors.append(f"compose: {name}: image {default} (unpinned, or gone from Docker Hub)")
        long_running = "build" in svc and svc.get("restart") != "no"
        test = " ".join(svc.get("healthcheck", {}).get("test", []))
        if long_running and "/healthz" not in test:
            errors.append(f"compose: {name}: no healthcheck on /healthz")
        if long_running and str(svc.get("environment", {}).get("CALLQA_METRICS_PORT")) != "9100":
            errors.append(f"compose: {name}: CALLQA_METRICS_PORT is not 9100 (no /metrics, no /healthz)")
    mounts = " ".join(str(v) for v in services.get("grafana", {}).get("volumes", []))
    if "prometheus" not in services or "callqa-dashboard.json" not in mounts:
        errors.append("compose: no Prometheus, or no Grafana with deploy/grafana/callqa-dashboard.json")
    for name in (*STAGES, "worker-short"):
        env_files = services.get(name, {}).get("env_file", [])
        if "admin.env" in ([env_files] if isinstance(env_files, str) else env_files):
            errors.append(f"compose: {name} reads MinIO's root credentials")


def check_compose_redact(services: dict[str, Any], errors: list[str]) -> None:
    """The redaction stage runs as its own MinIO user (redact.env, read after callqa.env so that its
    credentials win); minio-setup creates the copies' bucket and that user's policy."""
    env_files = services.get("redact", {}).get("env_file", [])
    env_files = [env_files] if isinstance(env_files, str) else env_files
    if not env_files or env_files[-1] != "redact.env":
        errors.append(f"compose: redact: env_file {env_files}: redact.env (its own MinIO user) must come last")
    for name, svc in services.items():
        files = svc.get("env_file", [])
        if name != "redact" and "redact.env" in ([files] if isinstance(files, str) else files):
            errors.append(f"compose: {name} reads the redaction stage's MinIO user (redact.env)")
    script = " ".join(str(line) for line in services.get("minio-setup", {}).get("command", []))
    for needed in ("CALLQA_REDACT_BUCKET", "CALLQA_REDACT_PREFIX", REDACT_POLICY, "policy attach local callqa-redact"):
        if needed not in script:
            errors.append(f"compose: minio-setup does not set up the redaction stage ({needed})")


def main(argv: list[str]) -> int:
    errors: list[str] = []
    compose = None
    if "--compose" in argv:
        i = argv.index("--compose")
        compose, argv = Path(argv[i + 1]), argv[:i] + argv[i + 2 :]
    for item in argv:
        overlay, _, rendered = item.partition("=")
        docs = [d for d in yaml.safe_load_all(Path(rendered).read_text()) if d]
        check_overlay(overlay, docs, errors)
        print(f"check_manifests: {overlay}: {len(docs)} objects checked")
    if compose:
        check_compose(compose, errors)
        print(f"check_manifests: {compose} checked")
    for e in errors:
        print(f"ERROR {e}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

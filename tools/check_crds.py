"""Validates rendered custom resources (KEDA's ScaledObject, TriggerAuthentication, ...; the Prometheus
operator's PrometheusRule) against the openAPIV3Schema of their CustomResourceDefinitions.

usage: python tools/check_crds.py CRD_DIR[,CRD_DIR...] RENDERED.yaml ...

Strict like ``kubernetes-validate --strict``: an object schema with ``properties`` and neither
``additionalProperties`` nor ``x-kubernetes-preserve-unknown-fields`` refuses unknown fields (the API
server would silently prune them: a misspelt ``minReplicaCout`` would be lost). Objects whose kind no
given CRD defines are left to kubernetes-validate. Needs PyYAML and jsonschema (tools/check_deploy.sh
runs it in its checkers' venv); imports nothing of the project.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import jsonschema
import yaml


class _Loader(yaml.SafeLoader):
    """SafeLoader reading a bare ``=`` as the string it is (PyYAML's YAML 1.1 "value" tag has no
    constructor; the Prometheus operator's CRDs list "=" among label-matcher operators)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:value"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def strict(schema: Any) -> Any:
    """A copy of an OpenAPI v3 schema that refuses fields it does not declare."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items()}
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def load_crds(dirs: list[Path]) -> dict[tuple[str, str], Any]:
    """(apiVersion, kind) -> strict JSON schema, from every CRD file in ``dirs``."""
    schemas: dict[tuple[str, str], Any] = {}
    for d in dirs:
        for path in sorted(d.glob("*.yaml")):
            for crd in yaml.load_all(path.read_text(), Loader=_Loader):
                if not crd or crd.get("kind") != "CustomResourceDefinition":
                    continue
                group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
                for version in crd["spec"]["versions"]:
                    schema = strict(version["schema"]["openAPIV3Schema"])
                    schemas[(f"{group}/{version['name']}", kind)] = schema
    return schemas


def main(argv: list[str]) -> int:
    dirs, rendered = [Path(p) for p in argv[0].split(",")], argv[1:]
    schemas = load_crds(dirs)
    if not schemas:
        print(f"check_crds: no CustomResourceDefinition in {argv[0]}", file=sys.stderr)
        return 1
    failures = checked = 0
    for path in rendered:
        for doc in yaml.safe_load_all(Path(path).read_text()):
            schema = schemas.get((doc.get("apiVersion"), doc.get("kind"))) if doc else None
            if schema is None:
                continue
            checked += 1
            where = f"{Path(path).name}: {doc['kind']} {doc['metadata']['name']}"
            for error in jsonschema.Draft7Validator(schema).iter_errors(doc):
                failures += 1
                at = "/".join(str(p) for p in error.absolute_path)
                print(f"ERROR {where}: {at}: {error.message}", file=sys.stderr)
    print(f"check_crds: {checked} custom resources checked against {len(schemas)} CRD schemas")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

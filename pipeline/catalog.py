"""The topic catalog (``topics/catalog.yaml``) and the JSON Schemas of the events, as data.

Pure logic: load and expand the catalog for the configured duration buckets, and
compute what must change to make a live cluster match it. The Kafka admin calls
live in :mod:`pipeline.adapters.kafka_admin`.

``topics/`` at the top of the repository is the source of truth; the package ships an
identical copy as package data (``pipeline/_topics``, kept equal by
``tests/unit/test_package_data.py``) and reads only that copy, through
:mod:`importlib.resources`, so a non-editable install finds it too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Literal

import orjson
import yaml

from pipeline.config import Settings
from pipeline.errors import ConfigError
from pipeline.events import EVENT_TYPES

PACKAGE_DATA = "pipeline._topics"  # a regular package: namespace packages give no resource reader on 3.11
SOURCE_TOPICS_DIR = Path(__file__).resolve().parent.parent / "topics"  # exists in a source checkout only


@dataclass(frozen=True)
class TopicSpec:
    name: str  # the catalog name, before the prefix
    partitions: int
    replication_factor: int
    config: dict[str, str]
    key: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class LiveTopic:
    partitions: int
    replication_factor: int
    config: dict[str, str]


TopicAction = Literal["create", "add_partitions", "alter_config", "cannot_shrink", "replication_differs"]


@dataclass(frozen=True)
class TopicChange:
    topic: str  # physical name
    action: TopicAction
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def applicable(self) -> bool:
        return self.action in ("create", "add_partitions", "alter_config")


def topics_dir() -> Traversable:
    """The catalog and schemas shipped with the package (source checkout and installed wheel alike)."""
    return resources.files(PACKAGE_DATA)


def load_catalog(
    bucket_names: tuple[str, ...], replication_factor: int | None = None,
    path: Path | Traversable | None = None, partitions: Mapping[str, int] | None = None,
) -> list[TopicSpec]:
    """The catalog expanded for these duration buckets, with a deployment's ``partitions`` per topic
    over the catalog's (settings: topic_partitions); bad entries and overrides raise ConfigError.

    An entry with ``partitions_of: <topic>`` has that topic's partitions, overridden or not: a marker
    or a redrive lives on its arrival's partition number, so those topics never differ from it."""
    path = path or topics_dir() / "catalog.yaml"
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read topic catalog {path}: {exc}") from exc
    entries = raw.get("topics", [])
    counts = _partition_counts(entries, bucket_names, dict(partitions or {}))
    default_rf = int(raw.get("defaults", {}).get("replication_factor", 1))
    specs = []
    for entry in entries:
        names = _expand(entry, bucket_names)
        unknown = set(entry.get("values", [])) - set(EVENT_TYPES) - {"minio_event", "routed_marker", "handled_marker"}
        if unknown:
            raise ConfigError(f"topic {entry['name']}: unknown value types {sorted(unknown)}")
        for name in names:
            specs.append(
                TopicSpec(
                    name=name,
                    partitions=counts[name],
                    replication_factor=replication_factor or int(entry.get("replication_factor", default_rf)),
                    config={k: str(v) for k, v in (entry.get("config") or {}).items()},
                    key=str(entry.get("key", "")),
                    values=tuple(entry.get("values", [])),
                )
            )
    return specs


def _expand(entry: dict[str, Any], bucket_names: tuple[str, ...]) -> list[str]:
    name = str(entry["name"])
    return [name.format(bucket=b) for b in bucket_names] if "{bucket}" in name else [name]


def _partition_counts(
    entries: list[dict[str, Any]], bucket_names: tuple[str, ...], overrides: dict[str, int]
) -> dict[str, int]:
    """Each expanded topic's partitions: the catalog's, then the overrides, then the followers."""
    counts: dict[str, int] = {}
    follows: dict[str, str] = {}
    for entry in entries:
        for name in _expand(entry, bucket_names):
            if "partitions_of" in entry:
                follows[name] = str(entry["partitions_of"])
            else:
                counts[name] = int(entry["partitions"])
    for name, count in overrides.items():
        if name in follows:
            raise ConfigError(f"topic_partitions: {name} has the partitions of {follows[name]}; set {follows[name]}")
        if name not in counts:
            raise ConfigError(f"topic_partitions: no topic {name} in the catalog (known: {sorted(counts)})")
        if not isinstance(count, int) or count < 1:
            raise ConfigError(f"topic_partitions: {name} needs a whole number of partitions >= 1, got {count!r}")
        counts[name] = count
    for name, leader in follows.items():
        if leader not in counts:
            raise ConfigError(f"topic {name}: partitions_of names no topic: {leader}")
        counts[name] = counts[leader]
    return counts


def settings_catalog(settings: Settings) -> list[TopicSpec]:
    """The catalog as this deployment's settings shape it: buckets, replication and partitions."""
    return load_catalog(settings.bucket_names, settings.replication_factor, partitions=settings.topic_partitions)


def plan_changes(specs: list[TopicSpec], live: dict[str, LiveTopic], prefix: str = "") -> list[TopicChange]:
    """What must change so the cluster matches the catalog. Kafka cannot shrink partitions
    or change replication in place: those differences are reported, not applied."""
    changes = []
    for spec in specs:
        topic = prefix + spec.name
        current = live.get(topic)
        if current is None:
            changes.append(TopicChange(topic, "create", {"partitions": spec.partitions,
                                                         "replication_factor": spec.replication_factor,
                                                         "config": dict(spec.config)}))
            continue
        if current.partitions < spec.partitions:
            changes.append(
                TopicChange(topic, "add_partitions", {"from": current.partitions, "to": spec.partitions})
            )
        elif current.partitions > spec.partitions:
            changes.append(
                TopicChange(topic, "cannot_shrink", {"live": current.partitions, "catalog": spec.partitions})
            )
        if current.replication_factor != spec.replication_factor:
            changes.append(
                TopicChange(
                    topic,
                    "replication_differs",
                    {"live": current.replication_factor, "catalog": spec.replication_factor},
                )
            )
        drift = {k: v for k, v in spec.config.items() if not same_config_value(k, v, current.config.get(k))}
        if drift:
            changes.append(TopicChange(topic, "alter_config",
                                       {"set": drift, "was": {k: current.config.get(k) for k in drift}}))
    return changes


_LIST_CONFIGS = frozenset({"cleanup.policy"})  # list-valued topic configs: the order carries no meaning


def same_config_value(key: str, catalog: str, live: str | None) -> bool:
    """Whether a live topic config value is the catalog's (``compact,delete`` = ``delete,compact``)."""
    if live is None:
        return False
    if key in _LIST_CONFIGS:
        return sorted(v.strip() for v in catalog.split(",")) == sorted(v.strip() for v in live.split(","))
    return catalog == live


def schema_path(event_type: str) -> Traversable:
    return topics_dir() / "schemas" / f"{event_type}.v1.json"


def generated_schema(event_type: str) -> dict[str, Any]:
    """The JSON Schema of an event, as generated from its model."""
    schema = EVENT_TYPES[event_type].model_json_schema(mode="serialization")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"callqa/{event_type}.v1.json"
    return schema


def load_schema(event_type: str) -> dict[str, Any]:
    try:
        return orjson.loads(schema_path(event_type).read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read the {event_type} schema: {exc}") from exc


def write_schemas() -> list[Path]:
    """Rewrite the schemas in ``topics/`` and in the package copy (a source checkout only)."""
    package_copy = Path(str(resources.files(PACKAGE_DATA)))
    if not SOURCE_TOPICS_DIR.is_dir():
        raise ConfigError("writing schemas needs a source checkout (topics/ beside pipeline/)")
    written = []
    for event_type in EVENT_TYPES:
        data = orjson.dumps(generated_schema(event_type), option=orjson.OPT_INDENT_2) + b"\n"
        for root in (SOURCE_TOPICS_DIR, package_copy):
            path = root / "schemas" / f"{event_type}.v1.json"
            path.write_bytes(data)
            written.append(path)
    return written

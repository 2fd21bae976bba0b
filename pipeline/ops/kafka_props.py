"""``--bootstrap-server`` and ``--command-config`` (pure): per-command Kafka client settings.

The file is a librdkafka properties file as ``kafka-consumer-groups --command-config`` and
``kcat -F`` take: ``key=value`` lines, ``#`` comments, blank lines. Its properties are laid over
the settings' ``kafka_config`` for one command; ``bootstrap.servers`` in it sets the bootstrap
unless ``--bootstrap-server`` is given too. Values are never quoted in errors: they may be secrets.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.config import Settings
from pipeline.errors import ConfigError


def parse_properties(text: str, source: str = "properties") -> dict[str, str]:
    props: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"{source} line {number}: expected key=value")
        props[key] = value.strip()
    return props


def read_properties(path: Path) -> dict[str, str]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read command config {path}: {exc.strerror or exc}") from None
    return parse_properties(text, str(path))


def with_kafka(settings: Settings, bootstrap_server: str | None = None,
               properties: dict[str, str] | None = None) -> Settings:
    """The settings with this command's bootstrap and client properties laid over them."""
    props = dict(properties or {})
    bootstrap = bootstrap_server or props.pop("bootstrap.servers", None) or settings.kafka_bootstrap
    props.pop("bootstrap.servers", None)
    if bootstrap == settings.kafka_bootstrap and not props:
        return settings
    return settings.model_copy(update={"kafka_bootstrap": bootstrap,
                                       "kafka_config": {**settings.kafka_config, **props}})

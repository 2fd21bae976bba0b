"""Options every Kafka-facing operator command shares, as ``kafka-consumer-groups`` has them:
``--bootstrap-server``, ``--command-config``, and ``--dry-run`` (the default) / ``--execute``."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Optional

import typer

from pipeline.config import Settings
from pipeline.ops.kafka_props import read_properties, with_kafka
from pipeline.ops.times import FORMS, parse_time, zone_label

# The zone the commands print in and read zone-less times in (UTC in the containers).
LOCAL_ZONE = zone_label(datetime.now().astimezone())
TIME_HELP = f"{FORMS}; without a zone: local time, here {LOCAL_ZONE}"

BootstrapOpt = Annotated[Optional[str], typer.Option(
    "--bootstrap-server", help="Kafka bootstrap servers for this command (default: the settings' kafka_bootstrap).")]
CommandConfigOpt = Annotated[Optional[Path], typer.Option(
    "--command-config", dir_okay=False,
    help="librdkafka properties file (key=value lines, # comments) laid over the settings' kafka_config "
         "for this command; its values are never printed.")]
ExecuteOpt = Annotated[bool, typer.Option("--execute", help="Make the change; without it this is a dry run.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Show what would change and change nothing (the default).")]


def kafka_settings(settings: Settings, bootstrap_server: str | None, command_config: Path | None) -> Settings:
    props = read_properties(command_config) if command_config is not None else None
    return with_kafka(settings, bootstrap_server, props)


def acting(execute: bool, dry_run: bool) -> bool:
    """Whether to make the change: only with ``--execute``."""
    if execute and dry_run:
        raise typer.BadParameter("give --execute or --dry-run, not both")
    return execute


def when(value: str, option: str) -> datetime:
    try:
        return parse_time(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint=option) from exc

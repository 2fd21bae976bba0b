"""Options every Kafka-facing operator command shares, as ``kafka-consumer-groups`` has them:
``--bootstrap-server``, ``--command-config``, and ``--dry-run`` (the default) / ``--execute``;
and what those commands share besides: their settings, JSON output and time parsing (used by
pipeline/cli.py, ops/cli.py and ops/replay_cli.py, which import none of each other for them)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from pipeline.config import Settings, load_settings
from pipeline.logs import configure_logging
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


def operator_settings(bootstrap_server: str | None = None, command_config: Path | None = None) -> Settings:
    """An operator command's settings with its Kafka options laid over; it logs warnings and up
    unless the settings ask for debug (its output is the table or JSON it prints)."""
    cfg = load_settings()
    configure_logging(cfg.log_format, "warning" if cfg.log_level == "info" else cfg.log_level)
    return kafka_settings(cfg, bootstrap_server, command_config)


def echo_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, default=str))


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

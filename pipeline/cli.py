"""The ``callqa`` command line: the edge where settings are read and logging is set up."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from pipeline.config import Settings, load_settings
from pipeline.errors import CallQAError
from pipeline.logs import configure_logging

app = typer.Typer(help="callqa: transcribe and compliance-check call recordings at scale.",
                  no_args_is_help=True, pretty_exceptions_enable=False)
stack_app = typer.Typer(help="The local Kafka + MinIO stack.", no_args_is_help=True)
topics_app = typer.Typer(help="The topic catalog.", no_args_is_help=True)
app.add_typer(stack_app, name="stack")
app.add_typer(topics_app, name="topics")


@app.callback()
def main(
    state_dir: Annotated[Optional[Path], typer.Option(help="Where the local stack keeps its state.")] = None,
    config: Annotated[Optional[Path], typer.Option(help="Settings file (TOML or YAML).")] = None,
) -> None:
    # The one place the process environment is shaped; Settings reads it once per command.
    if state_dir is not None:
        os.environ["CALLQA_STATE_DIR"] = str(state_dir)
    if config is not None:
        os.environ["CALLQA_CONFIG"] = str(config)


def settings() -> Settings:
    loaded = load_settings()
    configure_logging(loaded.log_format, loaded.log_level)
    return loaded


def echo_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, default=str))


# --- stack ------------------------------------------------------------------------------

@stack_app.command("up")
def stack_up(
    kafka_port: Annotated[Optional[int], typer.Option(help="Kafka port (default: a free one).")] = None,
    minio_port: Annotated[Optional[int], typer.Option(help="MinIO port (default: a free one).")] = None,
) -> None:
    """Start Kafka and MinIO (building/downloading them into the cache on first use)."""
    from pipeline import stack

    state = stack.up(settings(), kafka_port, minio_port)
    typer.echo(f"kafka   127.0.0.1:{state.kafka_port} (pid {state.kafka_pid})")
    typer.echo(f"minio   127.0.0.1:{state.minio_port} (pid {state.minio_pid})")
    typer.echo(f"settings written to {Path(state.state_dir) / 'stack.env'}; start-up {state.timings_s}")


@stack_app.command("down")
def stack_down() -> None:
    """Stop the servers this state directory started."""
    from pipeline import stack

    stopped = stack.down(settings())
    typer.echo(f"stopped: {', '.join(stopped) or 'nothing was running'}")


@stack_app.command("status")
def stack_status() -> None:
    """What runs where."""
    from pipeline import stack

    info = stack.status(settings())
    echo_json(info)
    raise typer.Exit(0 if info["running"] else 1)


# --- topics -----------------------------------------------------------------------------

@topics_app.command("apply")
def topics_apply() -> None:
    """Create or update the catalog's topics; a second run changes nothing."""
    from pipeline.catalog import load_catalog
    from pipeline.kafka_admin import apply_catalog

    cfg = settings()
    changes = apply_catalog(cfg, load_catalog(cfg.bucket_names, cfg.replication_factor))
    if not changes:
        typer.echo("no changes: the cluster matches the catalog")
    for change in changes:
        mark = "applied" if change.applicable else "NOT APPLIED (manual step)"
        typer.echo(f"{change.topic}: {change.action} {change.detail} [{mark}]")


@topics_app.command("describe")
def topics_describe() -> None:
    """Live topic state beside the catalog."""
    from pipeline.catalog import load_catalog
    from pipeline.kafka_admin import describe

    cfg = settings()
    echo_json(describe(cfg, load_catalog(cfg.bucket_names, cfg.replication_factor)))


@topics_app.command("schemas")
def topics_schemas(write: Annotated[bool, typer.Option(help="Rewrite topics/schemas from the models.")] = False) -> None:
    """Check (or rewrite) the event JSON Schemas against the models."""
    from pipeline.catalog import generated_schema, load_schema, write_schemas
    from pipeline.events import EVENT_TYPES

    if write:
        for path in write_schemas():
            typer.echo(f"wrote {path}")
        return
    stale = [t for t in EVENT_TYPES if load_schema(t) != generated_schema(t)]
    if stale:
        typer.echo(f"stale schemas: {stale} (run: callqa topics schemas --write)")
        raise typer.Exit(1)
    typer.echo("schemas match the models")


# --- upstream side and the router ----------------------------------------------------------

@app.command("ingest")
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Recordings, or folders searched recursively.")],
    prefix: Annotated[str, typer.Option(help="Object key prefix in the recordings bucket.")] = "",
    agent_id: Annotated[Optional[str], typer.Option(help="Agent id stored with every recording.")] = None,
    roles: Annotated[Optional[str], typer.Option(help="Channel roles, e.g. left=agent,right=customer.")] = None,
    start_time: Annotated[Optional[str], typer.Option(help="Call start time (ISO 8601).")] = None,
    meta: Annotated[Optional[list[str]], typer.Option(help="Extra metadata key=value (repeatable).")] = None,
    publish_only: Annotated[bool, typer.Option(help="Objects are already stored: only publish arrivals.")] = False,
    workers: Annotated[int, typer.Option(help="Concurrent uploads.")] = 8,
) -> None:
    """Upload recordings with their metadata; MinIO then emits each arrival itself."""
    from pipeline import arrivals
    from pipeline.events import ObjectRef
    from pipeline.storage import storage_client

    cfg = settings()
    common = {k: v for k, v in {"agent-id": agent_id, "roles": roles, "start-time": start_time}.items() if v}
    for item in meta or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise typer.BadParameter(f"--meta expects key=value, got {item!r}")
        common[key.strip().lower()] = value.strip()
    files = arrivals.find_recordings(paths)
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise typer.BadParameter(f"not found: {missing}")
    recordings = arrivals.plan_uploads(files, prefix, common)
    if publish_only:
        publisher = arrivals.ArrivalPublisher(cfg)
        for rec in recordings:
            publisher.publish(ObjectRef(bucket=cfg.recordings_bucket, key=rec.key), rec.metadata)
        publisher.flush()
        typer.echo(f"published {len(recordings)} arrivals to {publisher.topic}")
        return
    with typer.progressbar(length=len(recordings), label="uploading") as bar:
        counts = arrivals.upload_all(storage_client(cfg), cfg.recordings_bucket, recordings, workers,
                                     on_done=lambda rec, status: bar.update(1))
    typer.echo(f"uploaded {counts['uploaded']}, unchanged {counts['unchanged']}, failed {counts['failed']}")
    if counts["failed"]:
        raise typer.Exit(1)


@app.command("router")
def router_cmd(app_id: Annotated[str, typer.Option(help="Faust app id (the consumer group).")] = "callqa-router") -> None:
    """Run the Faust router: audio.arrivals → duration-bucket topics (several processes share the work)."""
    import faust

    from pipeline.router import create_app

    cfg = settings()
    faust_app = create_app(cfg, app_id)
    faust.Worker(faust_app, loglevel=cfg.log_level.upper(), quiet=True).execute_from_commandline()


def run() -> None:
    try:
        app()
    except CallQAError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    run()

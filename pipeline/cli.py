"""The ``callqa`` command line: the edge where settings are read and logging is set up."""

from __future__ import annotations

import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from pipeline.config import Settings, load_settings
from pipeline.errors import CallQAError
from pipeline.logs import configure_logging
from pipeline.ops.cli_common import (
    BootstrapOpt,
    CommandConfigOpt,
    DryRunOpt,
    ExecuteOpt,
    acting,
    echo_json,
    kafka_settings,
)

if TYPE_CHECKING:
    from pipeline.stages.replay_bound import ReplayTally, StopOffsets

app = typer.Typer(help="callqa: transcribe and compliance-check call recordings at scale.",
                  no_args_is_help=True, pretty_exceptions_enable=False)
stack_app = typer.Typer(help="The local Kafka + MinIO stack.", no_args_is_help=True)
topics_app = typer.Typer(help="The topic catalog.", no_args_is_help=True)
app.add_typer(stack_app, name="stack")
app.add_typer(topics_app, name="topics")

from pipeline.ops.cli import register as _register_ops  # noqa: E402 - after the app exists

_register_ops(app)


def _print_version(value: bool) -> None:
    if value:
        from pipeline.runtime.versions import version_line

        typer.echo(version_line(load_settings().asr_model))
        raise typer.Exit()


@app.callback()
def main(
    state_dir: Annotated[Optional[Path], typer.Option(help="Where the local stack keeps its state.")] = None,
    config: Annotated[Optional[Path], typer.Option(help="Settings file (TOML or YAML).")] = None,
    version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_print_version,
                                          help="Print the package, model and schema versions.")] = False,
) -> None:
    # The one place the process environment is shaped; Settings reads it once per command.
    if state_dir is not None:
        os.environ["CALLQA_STATE_DIR"] = str(state_dir)
    if config is not None:
        os.environ["CALLQA_CONFIG"] = str(config)


def settings() -> Settings:
    loaded = load_settings()
    configure_logging(loaded.log_format, loaded.log_level)
    from pipeline.logs import get_logger

    get_logger("callqa").debug("settings_loaded", settings=loaded.redacted())  # never the raw settings
    return loaded


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
def topics_apply(execute: ExecuteOpt = False, dry_run: DryRunOpt = False,
                 bootstrap_server: BootstrapOpt = None, command_config: CommandConfigOpt = None) -> None:
    """Show how the cluster differs from the catalog (a dry run, the default); with --execute create or
    update the topics. A second --execute changes nothing."""
    from pipeline.adapters.kafka_admin import apply_catalog, plan_catalog
    from pipeline.catalog import settings_catalog
    from pipeline.ops.topic_diff import diff_lines

    act = acting(execute, dry_run)
    cfg = kafka_settings(settings(), bootstrap_server, command_config)
    specs = settings_catalog(cfg)
    if not act:
        planned = plan_catalog(cfg, specs)
        for line in diff_lines(planned):
            typer.echo(line)
        typer.echo("no changes: the cluster matches the catalog" if not planned else
                   f"dry run: {sum(c.applicable for c in planned)} change(s) to apply; add --execute to apply")
        return
    changes = apply_catalog(cfg, specs)
    if not changes:
        typer.echo("no changes: the cluster matches the catalog")
    for change in changes:
        mark = "applied" if change.applicable else "NOT APPLIED (manual step)"
        for line in diff_lines([change]):
            typer.echo(f"{line} [{mark}]")
    if any(not c.applicable for c in changes):
        typer.echo("the cluster still differs from the catalog (see NOT APPLIED above)", err=True)
        raise typer.Exit(1)


@topics_app.command("describe")
def topics_describe(bootstrap_server: BootstrapOpt = None, command_config: CommandConfigOpt = None) -> None:
    """Live topic state beside the catalog."""
    from pipeline.adapters.kafka_admin import describe
    from pipeline.catalog import settings_catalog

    cfg = kafka_settings(settings(), bootstrap_server, command_config)
    echo_json(describe(cfg, settings_catalog(cfg)))


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
    roles: Annotated[Optional[str], typer.Option(
        help="Who speaks on each channel, as left=agent,right=customer (the default for stereo; "
             "mono files are one 'mixed' speaker).")] = None,
    start_time: Annotated[Optional[str], typer.Option(help="Call start time (ISO 8601).")] = None,
    meta: Annotated[Optional[list[str]], typer.Option(help="Extra metadata key=value (repeatable).")] = None,
    publish_only: Annotated[bool, typer.Option(help="Objects are already stored: only publish arrivals.")] = False,
    workers: Annotated[int, typer.Option(help="Concurrent uploads.")] = 8,
) -> None:
    """Upload recordings with their metadata; MinIO then emits each arrival itself."""
    from pipeline.adapters import publisher as arrivals
    from pipeline.adapters.minio_store import storage_client
    from pipeline.adapters.recordings import plan_uploads, recording_names
    from pipeline.events import ObjectRef

    cfg = settings()
    common = {k: v for k, v in {"agent-id": agent_id, "roles": roles, "start-time": start_time}.items() if v}
    for item in meta or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise typer.BadParameter(f"--meta expects key=value, got {item!r}")
        common[key.strip().lower()] = value.strip()
    named = recording_names(paths)
    missing = [str(f) for f, _ in named if not f.is_file()]
    if missing:
        raise typer.BadParameter(f"not found: {missing}")
    recordings = plan_uploads(named, prefix, common)
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


SimStorageOpt = Annotated[bool, typer.Option(
    "--simulated-storage", hidden=True,
    help="LOAD TESTS ONLY: serve the synthetic recordings of tools.simulate_night instead of MinIO.")]


@app.command("router")
def router_cmd(app_id: Annotated[str, typer.Option(help="Faust app id (the consumer group).")] = "callqa-router",
               simulated_storage: SimStorageOpt = False) -> None:
    """Run the Faust router: audio.arrivals → duration-bucket topics (several processes share the work)."""
    import faust

    from pipeline.run.router import create_app
    from pipeline.runtime.endpoint import start_endpoint
    from pipeline.runtime.lag_kafka import StageSpec

    cfg = settings()
    health = start_endpoint(cfg, "router", [StageSpec("router", app_id, cfg.arrivals, False)])
    faust_app = create_app(cfg, app_id, health, store=_simulated_store() if simulated_storage else None)
    faust.Worker(faust_app, loglevel=cfg.log_level.upper(), quiet=True).execute_from_commandline()


def _simulated_store():
    from pipeline.logs import get_logger
    from pipeline.simulated.storage import SimulatedStore

    get_logger("callqa").warning("simulated_storage", note="load test: synthetic recordings, not the object store")
    return SimulatedStore()


# --- ASR workers, QA stage, embedded mode -----------------------------------------------------

def load_engine(cfg: Settings, device: str = "auto"):
    """The shipped engine (:mod:`pipeline.asr.presets`, with the rule packs' prompt and agent phrases)."""
    from pipeline.run.shipped_engine import load_engine as load_shipped

    return load_shipped(cfg, device)


@app.command("prepare-model")
def prepare_model_cmd() -> None:
    """Join, verify and convert the configured model into the cache once (image builds, init containers),
    so stage processes start from the cache and need no writable model directory."""
    from pipeline.asr.convert import load_converted
    from pipeline.asr.registry import lookup, resolve_files

    cfg = settings()
    files = resolve_files(lookup(cfg.asr_model), cfg.cache_dir / "models")
    load_converted(files)
    typer.echo(f"model {cfg.asr_model} ready in {files.directory} (sha256 {files.sha256[:12]})")


StopAtOpt = Annotated[Optional[str], typer.Option(
    help="A bounded replay: stop at these offsets of the input (TOPIC:P=OFFSET,..., as `replay group` prints them); "
         "exit 0 with a summary once the whole group has reached them.")]


@app.command("worker")
def worker_cmd(
    bucket: Annotated[str, typer.Option(help="Duration bucket to consume (group asr-<bucket>).")],
    device: Annotated[str, typer.Option(help="cpu | cuda[:N] | npu[:N] | mps | auto")] = "auto",
    instance_id: Annotated[Optional[str], typer.Option(help="Static member id (default: host-device-bucket).")] = None,
    window_ms: Annotated[int, typer.Option(help="Micro-batch window.")] = 50,
    max_calls: Annotated[int, typer.Option(help="Calls per micro-batch.")] = 16,
    max_audio_s: Annotated[float, typer.Option(help="Audio seconds per micro-batch.")] = 1800.0,
    max_windows: Annotated[Optional[int], typer.Option(
        help="Estimated 30 s model windows per micro-batch (default: the most whole model batches of the "
             "engine that --max-audio-s fills; 0: no window cap).", min=0)] = None,
    memory_watermark_gb: Annotated[Optional[float], typer.Option(
        help="Stop prefetching while device memory is above this (GiB).")] = None,
    group: Annotated[Optional[str], typer.Option(
        help="Consumer group (default asr-<bucket>); another one replays, tagged with --replay-id or its name.")] = None,
    replay_id: Annotated[Optional[str], typer.Option(help="Add this replay id to every transcript's lineage.")] = None,
    stop_at: StopAtOpt = None,
    engine_spec: Annotated[Optional[str], typer.Option(
        "--engine", hidden=True,
        help="LOAD TESTS ONLY: simulated:rtfx=R[,scale=S,max_items=N,min_fill=F] sleeps instead of transcribing.")] = None,
    simulated_storage: SimStorageOpt = False,
) -> None:
    """Run one ASR worker: audio.bucket.<bucket> → asr.transcripts, exactly once."""
    import signal

    from pipeline.lineage import check_replay_id
    from pipeline.run.worker import AsrWorker, WorkerOptions
    from pipeline.runtime.endpoint import start_endpoint
    from pipeline.runtime.lag_kafka import StageSpec
    from pipeline.stages.replay_bound import StopOffsets

    cfg = settings()
    if bucket not in cfg.bucket_names:
        raise typer.BadParameter(f"unknown bucket {bucket!r}; configured: {list(cfg.bucket_names)}")
    if replay_id is not None:
        check_replay_id(replay_id)
    bound = StopOffsets.parse(stop_at) if stop_at else None
    if bound is not None:
        bound.check_topic(cfg.topic(f"audio.bucket.{bucket}"))
    if engine_spec is not None:
        from pipeline.simulated.engine import SimulatedEngine, SimulatedEngineOptions

        try:
            engine = SimulatedEngine(SimulatedEngineOptions.parse(engine_spec))
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--engine") from exc
        from pipeline.logs import get_logger

        get_logger("callqa").warning("simulated_engine", spec=engine_spec, note="load test: sleeps, transcribes nothing")
        device = "simulated"
    else:
        engine = load_engine(cfg, device)
        device = engine.device.kind
    opts = WorkerOptions(bucket=bucket, device=device, instance_id=instance_id,
                         window_ms=window_ms, max_calls=max_calls, max_audio_s=max_audio_s,
                         max_windows=max_windows,
                         memory_watermark_bytes=int(memory_watermark_gb * 2**30) if memory_watermark_gb else None,
                         group=group, replay_id=replay_id, stop_at=bound)
    health = start_endpoint(cfg, f"asr-{bucket}", [StageSpec(f"asr-{bucket}", opts.group_id(cfg), opts.input_topic(cfg), True)],
                            model_version=engine.model_version)
    worker = AsrWorker(cfg, opts, engine, health, store=_simulated_store() if simulated_storage else None)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: worker.stopping.set())
    worker.run()
    if bound is not None:
        _replay_ended(opts.group_id(cfg), bound, worker.tally)


def _replay_ended(group: str, bound: StopOffsets, tally: ReplayTally) -> None:
    """A bounded replay's last word: the summary and exit 0, or where it stopped short and exit 1."""
    from pipeline.stages.replay_bound import summary, unfinished

    if tally.finished:
        typer.echo(summary(group, bound, tally))
        raise typer.Exit(0)
    typer.echo(unfinished(group, bound, tally), err=True)
    raise typer.Exit(1)


@app.command("qa")
def qa_cmd(
    app_id: Annotated[str, typer.Option("--app-id",
                                        help="Faust app id = the live stage's consumer group.")] = "callqa-qa",
    group: Annotated[Optional[str], typer.Option(
        help="A replay group (instead of --app-id): its results are tagged with --replay-id, default the group.")] = None,
    replay_id: Annotated[Optional[str], typer.Option(help="Add this replay id to every result's lineage.")] = None,
    stop_at: StopAtOpt = None,
) -> None:
    """Run the QA stage: asr.transcripts → qa.findings (rule packs, PII redaction, scores)."""
    import os
    import signal

    import faust

    from pipeline.lineage import check_replay_id
    from pipeline.run.qa import create_app
    from pipeline.runtime.endpoint import start_endpoint
    from pipeline.runtime.lag_kafka import StageSpec
    from pipeline.stages.replay_bound import ReplayTally, StopOffsets

    cfg = settings()
    if group is not None:  # a replay's output is always tagged: untagged it would pass for the live results
        app_id, replay_id = group, replay_id or group
    if replay_id is not None:
        check_replay_id(replay_id)
    bound = StopOffsets.parse(stop_at) if stop_at else None
    if bound is not None:
        bound.check_topic(cfg.topic("asr.transcripts"))
    tally = ReplayTally()
    health = start_endpoint(cfg, "qa", [StageSpec("qa", app_id, cfg.topic("asr.transcripts"), False)])
    # Done: stop the way an operator's SIGTERM does (Faust's graceful shutdown), then report below.
    faust_app = create_app(cfg, app_id, health, replay_id, bound, tally,
                           on_done=lambda: os.kill(os.getpid(), signal.SIGTERM))
    try:
        faust.Worker(faust_app, loglevel=cfg.log_level.upper(), quiet=True).execute_from_commandline()
    except SystemExit as exc:
        if bound is None or exc.code not in (0, None):
            raise
        _replay_ended(app_id, bound, tally)


@app.command("redact")
def redact_cmd(
    group: Annotated[str, typer.Option(
        help="Faust app id = the stage's consumer group (another one replays; its copies overwrite the same keys)."
    )] = "callqa-redact",
    bucket: Annotated[Optional[str], typer.Option(help="Bucket of the redacted copies (default: redact_bucket).")] = None,
    prefix: Annotated[Optional[str], typer.Option(help="Key prefix of the copies (default: redact_prefix).")] = None,
    redact_with: Annotated[Optional[RedactWith], typer.Option(
        help="What replaces the PII audio (default: redact_with, silence).")] = None,
    replace_original: Annotated[Optional[bool], typer.Option(
        "--replace-original/--keep-original",
        help="Also write each copy over its original recording (same key, only while it is the transcribed "
             "content) and remove the original's version: the unredacted audio is gone for good. Not for "
             "converted copies (lossy originals are kept). Default: redact_replace_original, off. The stage's "
             "MinIO user needs write and delete-version rights on the recordings bucket (deploy/README.md).")] = None,
    bootstrap_server: BootstrapOpt = None,
    command_config: CommandConfigOpt = None,
) -> None:
    """Run the redaction stage: asr.transcripts → a redacted copy of each recording with PII in the object
    store + its audio.redacted event (bad input: redact.dlq); with --replace-original the copy also
    replaces the original."""
    import faust

    from pipeline.run.redact import check_target, create_app
    from pipeline.runtime.endpoint import start_endpoint
    from pipeline.runtime.lag_kafka import StageSpec

    cfg = kafka_settings(settings(), bootstrap_server, command_config)
    overrides = {k: v for k, v in {"redact_bucket": bucket, "redact_prefix": prefix,
                                   "redact_with": redact_with.value if redact_with else None,
                                   "redact_replace_original": replace_original}.items() if v is not None}
    if overrides:
        cfg = load_settings(**{**cfg.model_dump(), **overrides})  # validated as any setting is
    check_target(cfg)
    health = start_endpoint(cfg, "redact", [StageSpec("redact", group, cfg.topic("asr.transcripts"), False)])
    faust_app = create_app(cfg, group, health)
    faust.Worker(faust_app, loglevel=cfg.log_level.upper(), quiet=True).execute_from_commandline()


@app.command("report")
def report_cmd(
    findings: Annotated[Path, typer.Argument(help="findings.jsonl (QAResult events, one per line).",
                                             exists=True, dir_okay=False, readable=True)],
    out: Annotated[Path, typer.Option(help="HTML file to write.")] = Path("report.html"),
) -> None:
    """Write the self-contained HTML compliance report."""
    from pipeline.qa import CallTextError, read_results_jsonl, write_report

    try:
        results = read_results_jsonl(findings.read_text().splitlines())
    except CallTextError as exc:
        raise CallQAError(f"{findings}: {exc} (expected the findings.jsonl of a run)") from exc
    typer.echo(f"wrote {write_report(out, results)} ({len(results)} calls)")


class RedactWith(StrEnum):
    silence = "silence"
    tone = "tone"  # 1 kHz at -20 dBFS: a listener hears where something was cut


@app.command("run")
def run_cmd(
    paths: Annotated[list[str], typer.Argument(help="Files, folders (recursive) or s3://bucket/prefix.")],
    out: Annotated[Path, typer.Option(help="Output folder.")] = Path("callqa-out"),
    roles: Annotated[Optional[str], typer.Option(
        help="Who speaks on each channel, as left=agent,right=customer (the default for stereo; "
             "mono files are one 'mixed' speaker).")] = None,
    agent_id: Annotated[Optional[str], typer.Option(help="Agent id for every call.")] = None,
    device: Annotated[str, typer.Option(help="cpu | cuda[:N] | npu[:N] | mps | auto")] = "auto",
    max_calls: Annotated[int, typer.Option(help="Calls per batch.")] = 16,
    max_audio_s: Annotated[float, typer.Option(help="Audio seconds per batch.")] = 600.0,
    qa: Annotated[bool, typer.Option(help="Run the compliance rules too.")] = True,
    allow_dead_letters: Annotated[bool, typer.Option(
        help="Exit 0 even when some inputs could not be processed (listed in dead_letters.jsonl).")] = False,
    redact_audio: Annotated[bool, typer.Option(
        help="Write a copy of each call with PII under OUT/redacted/, its PII spans (plus 80 ms) replaced "
             "on the speaker's channel, in the recording's own format (else a PCM_16 WAV).")] = False,
    redact_with: Annotated[RedactWith, typer.Option(help="What replaces the PII audio.")] = RedactWith.silence,
) -> None:
    """Embedded mode: transcribe and check recordings in this process (no broker, no object store).

    Reads WAV (PCM 8-32 bit, float, u-law, A-law), FLAC, OGG/Vorbis/Opus, MP3, AIFF, AU and CAF;
    folders are searched recursively. A rerun into the same --out skips calls already done.
    Exit status: 0 when every input was processed; 3 when some could not be (each is listed
    with its reason in dead_letters.jsonl and summary.txt); 2 for a bad path or option;
    130 when interrupted (Ctrl-C; rerun the same command to resume).
    """
    from pipeline.adapters.local_inputs import scan_local_inputs
    from pipeline.run.embedded import run_paths
    from pipeline.stages.audio_limits import MAX_CHANNELS
    from pipeline.stages.routing import parse_roles

    cfg = settings()
    parse_roles(roles, MAX_CHANNELS)  # before the model loads: bad --roles or a wrong path fails at once
    for note in scan_local_inputs(paths).notes():
        typer.echo(note, err=True)
    try:
        summary = run_paths(cfg, paths, out, {k: v for k, v in {"roles": roles, "agent-id": agent_id}.items() if v},
                            load_engine(cfg, device), max_calls, max_audio_s, qa,
                            redact_with.value if redact_audio else None)
    except KeyboardInterrupt:  # every finished call is already on disk (one synced line each)
        typer.echo(f"\ninterrupted: the calls finished so far are in {out}/; the same command resumes", err=True)
        raise typer.Exit(130) from None
    for line in summary.repaired:
        typer.echo(f"repaired {line}", err=True)
    typer.echo((out / "summary.txt").read_text())
    typer.echo(f"outputs in {out}/ (transcripts.jsonl, findings.jsonl, dead_letters.jsonl, report.html)")
    failed = sum(summary.reasons.values())
    if failed and not allow_dead_letters:
        typer.echo(f"{failed} input(s) not processed (see dead_letters.jsonl; --allow-dead-letters to exit 0)",
                   err=True)
        raise typer.Exit(3)


@app.command("pipeline")
def pipeline_cmd(
    device: Annotated[str, typer.Option(help="Device for every worker.")] = "cpu",
    bucket: Annotated[Optional[list[str]], typer.Option(help="Only these buckets' workers (repeatable).")] = None,
    redact: Annotated[bool, typer.Option(help="Also run the redaction stage (callqa redact).")] = False,
) -> None:
    """Run router + one worker per bucket + QA stage locally, until Ctrl-C (logs under <state_dir>/logs)."""
    from pipeline.run.local import run_local

    raise typer.Exit(run_local(settings(), device, buckets=bucket, redact=redact))


def run() -> None:
    try:
        app()
    except CallQAError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    run()

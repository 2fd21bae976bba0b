"""``callqa replay reset | group | reroute`` (see :mod:`pipeline.ops.replay` for the three modes)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Optional

import typer

from pipeline.config import Settings

replay_app = typer.Typer(help="Re-run part of a night: reset a stopped group, replay into a new group, "
                              "or re-route arrivals past the de-dup markers.", no_args_is_help=True)

BucketOpt = Annotated[Optional[str], typer.Option(help="The duration bucket's topic (audio.bucket.<bucket>).")]
ArrivalsOpt = Annotated[bool, typer.Option("--arrivals", help="The arrivals topic.")]
TranscriptsOpt = Annotated[bool, typer.Option("--transcripts", help="asr.transcripts (the QA stage's input).")]
PartitionOpt = Annotated[Optional[list[int]], typer.Option(help="Only this partition (repeatable; default all).")]
FromOpt = Annotated[Optional[str], typer.Option("--from", help="Start time, ISO 8601 (local time without a zone).")]
OffsetOpt = Annotated[Optional[int], typer.Option(help="Start offset (instead of --from).")]
ExecuteOpt = Annotated[bool, typer.Option(help="Apply; without it this is a dry run.")]


def _time(value: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise typer.BadParameter(f"not an ISO 8601 time: {value!r}") from exc
    return parsed if parsed.tzinfo else parsed.astimezone()


def _topic(cfg: Settings, bucket: Optional[str], arrivals: bool, transcripts: bool) -> str:
    if sum([bucket is not None, arrivals, transcripts]) != 1:
        raise typer.BadParameter("choose one of --bucket, --arrivals, --transcripts")
    if bucket is not None and bucket not in cfg.bucket_names:
        raise typer.BadParameter(f"unknown bucket {bucket!r}; configured: {list(cfg.bucket_names)}")
    return cfg.arrivals if arrivals else cfg.topic("asr.transcripts") if transcripts else cfg.topic(f"audio.bucket.{bucket}")


def _targets(cfg: Settings, tps: list, start: Optional[str], offset: Optional[int]) -> dict:
    from pipeline.ops.replay_kafka import offsets_at

    if (start is None) == (offset is None):
        raise typer.BadParameter("give one of --from or --offset")
    return offsets_at(cfg, tps, _time(start)) if start else {tp: offset for tp in tps}


@replay_app.command("reset")
def reset(
    group: Annotated[str, typer.Option(help="The consumer group to move (it must be stopped).")],
    bucket: BucketOpt = None, arrivals: ArrivalsOpt = False, transcripts: TranscriptsOpt = False,
    partition: PartitionOpt = None, start: FromOpt = None, offset: OffsetOpt = None, execute: ExecuteOpt = False,
) -> None:
    """Move a stopped group's committed offsets to a time or an offset (dry run unless --execute)."""
    from pipeline.ops.cli import _settings
    from pipeline.ops.replay import describe_move, plan_moves
    from pipeline.ops.replay_kafka import GroupActive, commit_offsets, partitions_of, positions

    cfg = _settings()
    tps = partitions_of(cfg, _topic(cfg, bucket, arrivals, transcripts), partition)
    current, bounds = positions(cfg, group, tps)
    moves = plan_moves(current, _targets(cfg, tps, start, offset), bounds)
    for move in moves:
        typer.echo(describe_move(move))
    if not execute:
        typer.echo(f"dry run: {sum(m.changes for m in moves)} partition(s) would move; add --execute to apply")
        return
    try:
        commit_offsets(cfg, group, moves)
    except GroupActive as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from exc
    typer.echo(f"applied: {sum(m.changes for m in moves)} partition(s) moved for group {group}")


@replay_app.command("group")
def new_group(
    group: Annotated[str, typer.Option(help="The new consumer group to replay into.")],
    bucket: BucketOpt = None, transcripts: TranscriptsOpt = False,
    partition: PartitionOpt = None, start: FromOpt = None, offset: OffsetOpt = None,
    replay_id: Annotated[Optional[str], typer.Option(help="Tag of the replay's output (default: the group).")] = None,
) -> None:
    """Start a new consumer group at a time (unselected partitions start at their end), then print how to run it."""
    from pipeline.ops.cli import _settings
    from pipeline.ops.replay import describe_move, plan_moves
    from pipeline.ops.replay_kafka import commit_offsets, partitions_of, positions

    from pipeline.lineage import check_replay_id
    from pipeline.stages.replay_bound import StopOffsets

    cfg = _settings()
    check_replay_id(replay_id or group)
    topic = _topic(cfg, bucket, False, transcripts)
    everything = partitions_of(cfg, topic)
    chosen = partitions_of(cfg, topic, partition)
    current, bounds = positions(cfg, group, everything)
    if any(v is not None for v in current.values()):
        typer.echo(f"group {group} already has offsets on {topic}: use `replay reset` or a new name", err=True)
        raise typer.Exit(1)
    targets = {tp: bounds[tp][1] for tp in everything} | _targets(cfg, chosen, start, offset)
    moves = plan_moves(current, targets, bounds)
    commit_offsets(cfg, group, moves)
    for move in moves:
        typer.echo(describe_move(move))
    tag = replay_id or group
    # The end offsets read with the start: the replay stops there (later records are the live group's).
    stop = StopOffsets(topic, {p: end for (_, p), (_, end) in sorted(bounds.items())}).flag()
    run = (f"callqa worker --bucket {bucket} --group {group} --replay-id {tag} --stop-at {stop}" if bucket
           else f"callqa qa --group {group} --replay-id {tag} --stop-at {stop}")
    typer.echo(f"group {group} starts at the moves above and stops at {stop}; run: {run}")


@replay_app.command("reroute")
def reroute_cmd(
    generation: Annotated[int, typer.Option(min=1, help="Replay generation: re-routed once per generation.")],
    start: FromOpt = None,
    until: Annotated[Optional[str], typer.Option("--to", help="End time, exclusive (default: now).")] = None,
    partition: PartitionOpt = None, execute: ExecuteOpt = False,
    time_limit_s: Annotated[float, typer.Option(min=0, help="Stop re-sending after this many seconds.")] = 300.0,
) -> None:
    """Send arrivals in a time range to the router again, past its de-dup markers (dry run unless --execute)."""
    from pipeline.ops.cli import _settings
    from pipeline.ops.replay_kafka import offsets_at, partitions_of, reroute

    cfg = _settings()
    if start is None:
        raise typer.BadParameter("--from is required")
    tps = partitions_of(cfg, cfg.arrivals, partition)
    first = offsets_at(cfg, tps, _time(start))
    last = offsets_at(cfg, tps, _time(until) if until else datetime.now().astimezone())
    total = sum(max(0, last[tp] - first[tp]) for tp in tps)
    for tp in tps:
        typer.echo(f"{tp[0]}[{tp[1]}]: offsets {first[tp]}..{last[tp]}")
    if not execute:
        typer.echo(f"dry run: up to {total} arrival(s) would be re-routed as generation {generation}; add --execute")
        return
    done = reroute(cfg, tps, first, last, generation, time_limit_s)
    if done.left:
        where = ", ".join(f"{t}[{p}] from offset {nxt}" for (t, p), (nxt, _) in done.left.items())
        typer.echo(f"time limit ({time_limit_s:g} s): re-routed {done.sent} arrival(s) as generation {generation}, "
                   f"up to {done.left_count} left ({where}); run the same command again: the router skips "
                   "those already re-routed in this generation", err=True)
        raise typer.Exit(1)
    typer.echo(f"re-routed {done.sent} arrival(s) as generation {generation} (replay id gen{generation})")

"""``callqa replay reset | group | reroute`` (see :mod:`pipeline.ops.replay` for the three modes)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Optional

import typer

from pipeline.config import Settings
from pipeline.ops.cli_common import (TIME_HELP, BootstrapOpt, CommandConfigOpt, DryRunOpt, ExecuteOpt, acting,
                                     operator_settings, when)

replay_app = typer.Typer(help="Re-run part of a night: reset a stopped group, replay into a new group, "
                              "or re-route arrivals past the de-dup markers.", no_args_is_help=True)

BucketOpt = Annotated[Optional[str], typer.Option(help="The duration bucket's topic (audio.bucket.<bucket>).")]
ArrivalsOpt = Annotated[bool, typer.Option("--arrivals", help="The arrivals topic.")]
TranscriptsOpt = Annotated[bool, typer.Option("--transcripts", help="asr.transcripts (the QA stage's input).")]
PartitionOpt = Annotated[Optional[list[int]], typer.Option(help="Only this partition (repeatable; default all).")]
FromOpt = Annotated[Optional[str], typer.Option("--from", help=f"Start time: {TIME_HELP}.")]
OffsetOpt = Annotated[Optional[int], typer.Option(help="Start offset (instead of --from).")]


def _time(value: str) -> datetime:
    return when(value, "--from/--to")


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
    partition: PartitionOpt = None, start: FromOpt = None, offset: OffsetOpt = None,
    to_earliest: Annotated[bool, typer.Option("--to-earliest", help="To the oldest offset each partition holds.")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest", help="To the end of each partition.")] = False,
    shift_by: Annotated[Optional[int], typer.Option(
        help="Move each committed offset by N (negative: back), within what the partition holds.")] = None,
    from_file: Annotated[Optional[Path], typer.Option(
        dir_okay=False, help="To the offsets in this topic,partition,offset file (an --export; restores a reset).")] = None,
    export: Annotated[Optional[Path], typer.Option(
        dir_okay=False, help="Write the group's current offsets here first (topic,partition,offset), to undo with "
                             "--from-file; in a dry run too.")] = None,
    execute: ExecuteOpt = False, dry_run: DryRunOpt = False,
    bootstrap_server: BootstrapOpt = None, command_config: CommandConfigOpt = None,
) -> None:
    """Move a stopped group's committed offsets (dry run unless --execute). Give one target: --from,
    --offset, --to-earliest, --to-latest, --shift-by or --from-file."""
    from pipeline.ops.replay import describe_move, plan_moves
    from pipeline.ops.replay_kafka import GroupActive, commit_offsets, positions

    act = acting(execute, dry_run)
    chosen = [start is not None, offset is not None, to_earliest, to_latest, shift_by is not None, from_file is not None]
    if sum(chosen) != 1:
        raise typer.BadParameter("give one of --from, --offset, --to-earliest, --to-latest, --shift-by, --from-file")
    cfg = operator_settings(bootstrap_server, command_config)
    tps, restore = _reset_partitions(cfg, bucket, arrivals, transcripts, partition, from_file)
    current, bounds = positions(cfg, group, tps)
    if export is not None:
        _export(export, current)
    if restore is not None:
        targets = restore
    elif to_earliest or to_latest:
        targets = {tp: bounds[tp][0 if to_earliest else 1] for tp in tps}
    elif shift_by is not None:
        unset = [f"{t}[{p}]" for (t, p), o in current.items() if o is None]
        if unset:
            raise typer.BadParameter(f"group {group} has no committed offset to shift on {', '.join(unset)}",
                                     param_hint="--shift-by")
        targets = {tp: o + shift_by for tp, o in current.items() if o is not None}
    else:
        targets = _targets(cfg, tps, start, offset)
    moves = plan_moves(current, targets, bounds)
    for move in moves:
        typer.echo(describe_move(move))
    if not act:
        typer.echo(f"dry run: {sum(m.changes for m in moves)} partition(s) would move; add --execute to apply")
        return
    try:
        commit_offsets(cfg, group, moves)
    except GroupActive as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from exc
    typer.echo(f"applied: {sum(m.changes for m in moves)} partition(s) moved for group {group}")


def _reset_partitions(cfg: Settings, bucket: Optional[str], arrivals: bool, transcripts: bool,
                      partition: Optional[list[int]], from_file: Optional[Path]) -> tuple[list, Optional[dict]]:
    """The partitions a reset moves, and the offsets of --from-file (None without one)."""
    from pipeline.ops.offsets_file import parse_offsets
    from pipeline.ops.replay_kafka import partitions_of

    if from_file is None:
        return partitions_of(cfg, _topic(cfg, bucket, arrivals, transcripts), partition), None
    try:
        restore = parse_offsets(from_file.read_text(), str(from_file))
    except OSError as exc:
        raise typer.BadParameter(f"cannot read {from_file}: {exc.strerror}", param_hint="--from-file") from exc
    if bucket is not None or arrivals or transcripts:  # a topic named too: only its rows
        topic = _topic(cfg, bucket, arrivals, transcripts)
        restore = {tp: o for tp, o in restore.items() if tp[0] == topic}
    restore = {tp: o for tp, o in restore.items() if not partition or tp[1] in partition}
    if not restore:
        raise typer.BadParameter(f"{from_file} has no offsets for the partitions chosen", param_hint="--from-file")
    for topic in sorted({t for t, _ in restore}):
        partitions_of(cfg, topic, [p for t, p in restore if t == topic])  # each one exists
    return sorted(restore), restore


def _export(path: Path, current: dict) -> None:
    from pipeline.ops.offsets_file import format_offsets

    known = {tp: o for tp, o in current.items() if o is not None}
    path.write_text(format_offsets(known))
    unset = [f"{t}[{p}]" for (t, p), o in sorted(current.items()) if o is None]
    typer.echo(f"exported {len(known)} offset(s) to {path}"
               + (f"; no committed offset on {', '.join(unset)} (a restore leaves those where the reset puts them)"
                  if unset else ""))


@replay_app.command("group")
def new_group(
    group: Annotated[str, typer.Option(help="The new consumer group to replay into.")],
    bucket: BucketOpt = None, transcripts: TranscriptsOpt = False,
    partition: PartitionOpt = None, start: FromOpt = None, offset: OffsetOpt = None,
    replay_id: Annotated[Optional[str], typer.Option(help="Tag of the replay's output (default: the group).")] = None,
    execute: ExecuteOpt = False, dry_run: DryRunOpt = False,
    bootstrap_server: BootstrapOpt = None, command_config: CommandConfigOpt = None,
) -> None:
    """Start a new consumer group at a time (unselected partitions start at their end), then print how to run it
    (dry run unless --execute)."""
    from pipeline.ops.replay import describe_move, plan_moves
    from pipeline.ops.replay_kafka import commit_offsets, partitions_of, positions

    from pipeline.lineage import check_replay_id
    from pipeline.stages.replay_bound import StopOffsets

    act = acting(execute, dry_run)
    cfg = operator_settings(bootstrap_server, command_config)
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
    for move in moves:
        typer.echo(describe_move(move))
    if not act:
        typer.echo(f"dry run: group {group} not created; add --execute to commit these offsets")
        return
    commit_offsets(cfg, group, moves)
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
    until: Annotated[Optional[str], typer.Option("--to", help="End time, exclusive, as --from (default: now).")] = None,
    partition: PartitionOpt = None, execute: ExecuteOpt = False, dry_run: DryRunOpt = False,
    time_limit_s: Annotated[float, typer.Option(min=0, help="Stop re-sending after this many seconds.")] = 300.0,
    bootstrap_server: BootstrapOpt = None, command_config: CommandConfigOpt = None,
) -> None:
    """Send arrivals in a time range to the router again, past its de-dup markers (dry run unless --execute)."""
    from pipeline.ops.replay_kafka import offsets_at, partitions_of, reroute

    act = acting(execute, dry_run)
    cfg = operator_settings(bootstrap_server, command_config)
    if start is None:
        raise typer.BadParameter("--from is required")
    tps = partitions_of(cfg, cfg.arrivals, partition)
    first = offsets_at(cfg, tps, _time(start))
    last = offsets_at(cfg, tps, _time(until) if until else datetime.now().astimezone())
    total = sum(max(0, last[tp] - first[tp]) for tp in tps)
    for tp in tps:
        typer.echo(f"{tp[0]}[{tp[1]}]: offsets {first[tp]}..{last[tp]}")
    if not act:
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

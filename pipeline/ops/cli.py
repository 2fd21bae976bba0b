"""``callqa lag | dlq | replay | plan``: the operator's commands (registered on the main app)."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from pipeline.errors import CallQAError
from pipeline.ops.lag import EXIT_UNKNOWN
from pipeline.ops.plan import DEFAULT_ROUTE_WITHIN_S, ROUTER_ARRIVALS_PER_S, ROUTER_CPU_MS_PER_CALL
from pipeline.ops.cli_common import (
    TIME_HELP,
    BootstrapOpt,
    CommandConfigOpt,
    DryRunOpt,
    ExecuteOpt,
    acting,
    echo_json,
    operator_settings,
    when,
)


def lag(
    watch: Annotated[bool, typer.Option(help="Redraw the table until Ctrl-C.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    window_end: Annotated[Optional[str], typer.Option(help=(
        "End of the night window: HH:MM in the local zone, or with a zone: 06:00+08:00, 06:00Z, "
        "'06:00 Asia/Shanghai'."))] = None,
    interval_s: Annotated[float, typer.Option(help="Seconds between redraws with --watch.")] = 5.0,
    rate_window_s: Annotated[float, typer.Option(help="Throughput is measured over this many seconds.")] = 300.0,
    sample_s: Annotated[float, typer.Option(
        help="With no recent history, measure again after this many seconds for a rate (0: do not).")] = 5.0,
    router_group: Annotated[str, typer.Option(help="The router's consumer group (its app id).")] = "callqa-router",
    qa_group: Annotated[str, typer.Option(help="The QA stage's consumer group (its app id).")] = "callqa-qa",
    bucket: Annotated[Optional[list[str]], typer.Option(help="Only these buckets (repeatable).")] = None,
    partitions: Annotated[bool, typer.Option(help="Show partition rows.")] = True,
    group: Annotated[Optional[list[str]], typer.Option(
        help="Also show this group (a replay): STAGE=GROUP, or GROUP to find its stage (repeatable).")] = None,
    transaction_timeout_s: Annotated[float, typer.Option(
        help="A transaction holding back a partition longer than this is a stall.")] = 300.0,
    bootstrap_server: BootstrapOpt = None, command_config: CommandConfigOpt = None,
) -> None:
    """Backlog per stage and partition: messages and audio seconds behind, throughput, ETA vs the window.

    Exit status (without --watch), the worst over the groups shown: 0 done, on track or no window
    given; 1 at risk; 2 stalled; 3 unknown: no rate measured yet (work is behind, nothing to judge
    it by) or the backlog could not be read. A bad option exits 2, as for every command.
    """
    try:
        _lag(watch, as_json, window_end, interval_s, rate_window_s, sample_s, router_group, qa_group, bucket,
             partitions, group, transaction_timeout_s, bootstrap_server, command_config)
    except CallQAError as exc:  # unknown, not "stalled": cron must not page on a read that failed
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_UNKNOWN) from exc


def _lag(watch: bool, as_json: bool, window_end: str | None, interval_s: float, rate_window_s: float,  # noqa: PLR0913
         sample_s: float, router_group: str, qa_group: str, bucket: list[str] | None, partitions: bool,
         group: list[str] | None, transaction_timeout_s: float, bootstrap_server: str | None,
         command_config: Path | None) -> None:
    from rich.console import Console
    from rich.live import Live

    from pipeline.ops import lag_view
    from pipeline.ops.lag import exit_code, record_members, record_samples, summarize
    from pipeline.runtime.lag_kafka import OffsetsReader, group_specs, stage_specs
    from pipeline.ops.times import next_clock_time

    cfg = operator_settings(bootstrap_server, command_config)
    if window_end:
        try:
            next_clock_time(window_end, datetime.now().astimezone())
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--window-end") from exc
    specs = stage_specs(cfg, router_group, qa_group, bucket)
    history = cfg.state_dir / "ops" / "lag-samples.json"
    tracker = lag_view.load_tracker(history, rate_window_s)
    reader = OffsetsReader(cfg)
    try:
        specs += group_specs(reader, specs, group or [])
    except CallQAError:
        reader.close()
        raise

    def measure() -> tuple[list, list, datetime, Any, float]:
        started = time.perf_counter()
        rows = reader.backlog(specs)
        sampled_at = time.time()
        record_samples(tracker, rows, sampled_at)
        record_members(tracker, reader.members({r.group for r in rows}), sampled_at)
        took = time.perf_counter() - started
        now = datetime.now().astimezone()
        end = next_clock_time(window_end, now) if window_end else None
        return rows, summarize(rows, tracker, now, end, transaction_timeout_s), now, end, took

    try:
        rows, summaries, now, end, took = measure()
        if not watch and sample_s > 0 and tracker.oldest_span_s(time.time()) < tracker.min_span_s:
            time.sleep(sample_s)  # no history to measure a rate against: take a second sample
            rows, summaries, now, end, took = measure()
        lag_view.save_tracker(history, tracker)
        code = exit_code(s.verdict.status for s in summaries)
        if as_json and not watch:
            echo_json(lag_view.as_json(rows, summaries, tracker, now, end, took))
            raise typer.Exit(code)
        console = Console()
        if not console.is_terminal:
            console = Console(width=max(console.width, 132))  # piped or logged: do not squeeze the table
        if not watch:
            console.print(lag_view.table(rows, summaries, tracker, now, end, took, partitions))
            raise typer.Exit(code)
        with Live(lag_view.table(rows, summaries, tracker, now, end, took, partitions), console=console,
                  auto_refresh=False) as live:
            while True:
                time.sleep(interval_s)
                rows, summaries, now, end, took = measure()
                lag_view.save_tracker(history, tracker)
                live.update(lag_view.table(rows, summaries, tracker, now, end, took, partitions), refresh=True)
    except KeyboardInterrupt:
        pass
    finally:
        reader.close()




# --- dead letters ----------------------------------------------------------------------------

dlq_app = typer.Typer(help="Dead letters: list, show, redrive (or park).", no_args_is_help=True)


def _selection(ids, reason, key, since, until, include_handled: bool):  # noqa: ANN001, ANN202
    from pipeline.ops.dlq import Selection

    return Selection(ids=frozenset(ids or ()), reasons=frozenset(reason or ()), key_patterns=tuple(key or ()),
                     since=when(since, "--since") if since else None, until=when(until, "--until") if until else None,
                     include_handled=include_handled)


ReasonOpt = Annotated[Optional[list[str]], typer.Option(help="Only this reason code (repeatable).")]
KeyOpt = Annotated[Optional[list[str]], typer.Option(help="Only original keys matching this glob (repeatable).")]
SinceOpt = Annotated[Optional[str], typer.Option(help=f"Failed at or after this time: {TIME_HELP}.")]
UntilOpt = Annotated[Optional[str], typer.Option(help="Failed before this time (as --since).")]
StageOpt = Annotated[Optional[list[str]], typer.Option(help="router | asr | qa | redact (repeatable; default all).")]


@dlq_app.command("list")
def dlq_list(
    reason: ReasonOpt = None, key: KeyOpt = None, since: SinceOpt = None, until: UntilOpt = None,
    stage: StageOpt = None,
    all_: Annotated[bool, typer.Option("--all", help="Include letters already redriven or parked.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    bootstrap_server: BootstrapOpt = None, command_config: CommandConfigOpt = None,
) -> None:
    """Dead letters by topic, reason and time (open ones unless --all; times in the local zone)."""
    from rich.console import Console
    from rich.table import Table

    from pipeline.ops.dlq import summary_row
    from pipeline.ops.dlq_kafka import read_letters

    cfg = operator_settings(bootstrap_server, command_config)
    selection = _selection(None, reason, key, since, until, all_)
    rows = [summary_row(s) for s in read_letters(cfg, tuple(stage or ("router", "asr", "qa", "redact"))) if selection.matches(s)]
    if as_json:
        echo_json(rows)
        return
    table = Table(title=f"{len(rows)} dead letter(s)", title_justify="left")
    for column in ("id", "reason", "attempts", "key", "failed_at", "state", "message"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(row["id"], row["reason"], str(row["attempts"]), row["key"] or "", row["failed_at"],
                      row["state"], row["message"][:80])
    Console().print(table)


@dlq_app.command("show")
def dlq_show(letter_id: Annotated[str, typer.Argument(help="<dlq topic>:<partition>:<offset>, as listed.")],
             bootstrap_server: BootstrapOpt = None, command_config: CommandConfigOpt = None) -> None:
    """One letter, with its original payload decoded."""
    from pipeline.ops.dlq import decoded_payload, summary_row
    from pipeline.ops.dlq_kafka import read_letters

    cfg = operator_settings(bootstrap_server, command_config)
    found = [s for s in read_letters(cfg) if s.id == letter_id]
    if not found:
        typer.echo(f"no letter {letter_id}", err=True)
        raise typer.Exit(1)
    echo_json({**summary_row(found[0]), "original_payload": decoded_payload(found[0].letter)})


@dlq_app.command("redrive")
def dlq_redrive(
    letter_id: Annotated[Optional[list[str]], typer.Option("--id", help="This letter (repeatable).")] = None,
    reason: ReasonOpt = None, key: KeyOpt = None, since: SinceOpt = None, until: UntilOpt = None,
    stage: StageOpt = None,
    max_attempts: Annotated[Optional[int], typer.Option(help="Park at this many attempts (default: settings).")] = None,
    execute: ExecuteOpt = False, dry_run: DryRunOpt = False,
    bootstrap_server: BootstrapOpt = None, command_config: CommandConfigOpt = None,
) -> None:
    """Send the selected letters' payloads to the failing group's retry topic (or park them at the maximum).

    A dry run (the default) lists what would be redriven, parked or skipped; --execute does it."""
    from pipeline.ops.dlq import plan_redrive
    from pipeline.ops.dlq_kafka import execute as carry_out
    from pipeline.ops.dlq_kafka import read_letters

    act = acting(execute, dry_run)
    if not (letter_id or reason or key or since or until):
        raise typer.BadParameter("select letters: --id, --reason, --key, --since or --until")
    cfg = operator_settings(bootstrap_server, command_config)
    selection = _selection(letter_id, reason, key, since, until, False)
    actions = plan_redrive(read_letters(cfg, tuple(stage or ("router", "asr", "qa", "redact"))), selection,
                           max_attempts or cfg.dlq_max_attempts, cfg.topic_prefix)
    for action in actions:
        where = "" if action.partition is None else f"[{action.partition}]"
        target = f" -> {cfg.topic(action.topic or '')}{where}" if action.kind == "redrive" else ""
        typer.echo(f"{action.kind}: {action.stored.id} ({action.stored.letter.reason}, "
                   f"key {action.stored.letter.original_key}){target}: {action.why}")
    counts = {k: sum(a.kind == k for a in actions) for k in ("redrive", "park", "skip")}
    if not act:
        typer.echo(f"dry run: would redrive {counts['redrive']}, park {counts['park']}, skip {counts['skip']}; "
                   "add --execute to apply")
        return
    carry_out(cfg, actions)
    typer.echo(f"redriven {counts['redrive']}, parked {counts['park']}, skipped {counts['skip']}")


# --- capacity planning -------------------------------------------------------------------------

def _metric_sums(url: str) -> dict[str, float]:
    """Every sample of a /metrics page summed by name over its labels."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310 - an operator-given URL
        text = resp.read().decode()
    sums: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            sums[sample.name] = sums.get(sample.name, 0.0) + sample.value
    return sums


def plan_cmd(
    hours_per_day: Annotated[float, typer.Option(help="Audio hours recorded per day.")],
    window: Annotated[str, typer.Option(help="The night window, e.g. 6h or 6h30m.")] = "6h",
    rtfx_per_device: Annotated[Optional[float], typer.Option(help="Measured audio s per wall s of one device.")] = None,
    from_metrics: Annotated[Optional[str], typer.Option(help="A running worker's /metrics URL to measure RTFx.")] = None,
    margin: Annotated[float, typer.Option(help="Share of the window kept spare.")] = 0.3,
    mix: Annotated[Optional[str], typer.Option(help="Audio share per bucket, e.g. short=0.1,medium=0.35,...")] = None,
    calls_per_day: Annotated[Optional[int], typer.Option(help="Calls per day: sizes the routers.")] = None,
    route_within_s: Annotated[float, typer.Option(help="The day's calls arrive as one burst, routed within "
                                                       "this many seconds.")] = DEFAULT_ROUTE_WITHIN_S,
    arrivals_over: Annotated[Optional[str], typer.Option(help="Instead of a burst: the calls arrive evenly "
                                                             "over this time (e.g. 6h).")] = None,
    router_arrivals_per_s: Annotated[float, typer.Option(help="Arrivals/s one router process routes "
                                                              "(tools/bench_router.py).")] = ROUTER_ARRIVALS_PER_S,
    router_cpu_ms_per_call: Annotated[float, typer.Option(help="Router CPU ms per routed call "
                                                               "(tools/bench_router.py).")] = ROUTER_CPU_MS_PER_CALL,
    arrivals_partitions: Annotated[Optional[int], typer.Option(help="The arrivals topic's partitions "
                                                                    "(default: the topic catalog's).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Workers, accelerators and partitions per bucket to finish a day's audio inside the window;
    with --calls-per-day, the router processes (and their CPU) to route the day's arrivals."""
    import json
    from dataclasses import asdict

    from pipeline.catalog import settings_catalog
    from pipeline.ops.plan import (
        bucket_cost_factors,
        parse_mix,
        parse_window,
        partition_warnings,
        partitions_setting,
        plan,
        plan_routers,
        rtfx_from_metrics,
    )

    cfg = operator_settings()
    if (rtfx_per_device is None) == (from_metrics is None):
        raise typer.BadParameter("give one of --rtfx-per-device or --from-metrics")
    try:
        rtfx = rtfx_per_device or rtfx_from_metrics(_metric_sums(from_metrics))
        # the benchmark's RTFx is that of full batches: add the batching costs; a worker's measured
        # audio ÷ busy seconds already holds them
        factors = bucket_cost_factors(cfg.bucket_edges_s, cfg.bucket_names, rtfx) if from_metrics is None else None
        result = plan(hours_per_day, parse_window(window), rtfx, parse_mix(mix, cfg.bucket_names), margin, factors)
        routers = None
        if calls_per_day is not None:
            partitions = arrivals_partitions or next(
                t.partitions for t in settings_catalog(cfg) if t.name == "audio.arrivals"
            )
            within = parse_window(arrivals_over) if arrivals_over else route_within_s
            routers = plan_routers(calls_per_day, within, partitions, router_arrivals_per_s, router_cpu_ms_per_call)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    catalog = {t.name: t.partitions for t in settings_catalog(cfg)}
    have = {b: catalog[f"audio.bucket.{b}"] for b in cfg.bucket_names}
    warnings = partition_warnings(result, have)
    setting = partitions_setting(result, have, cfg.topic_partitions)
    if as_json:
        echo_json({
            **asdict(result), "busy_s": result.busy_s, "utilisation": result.utilisation,
            "partition_warnings": warnings, "topic_partitions": setting,
            "routers": routers and {**asdict(routers), "arrivals_per_s_needed": routers.arrivals_per_s_needed,
                                    "cpu_cores": routers.cpu_cores, "burst": arrivals_over is None},
        })
        return
    typer.echo(f"{hours_per_day:g} audio h/day in a {window} window with {margin:.0%} spare, "
               f"RTFx {rtfx:.1f} per device{' (measured from ' + from_metrics + ')' if from_metrics else ''}")
    for b in result.buckets:
        typer.echo(f"  {b.bucket:<7} {b.audio_h:>10.1f} audio h  {b.workers:>4} worker(s)/device(s)  "
                   f"{b.partitions:>4} partitions  x{b.cost_factor:.2f} batching")
    typer.echo(f"total: {result.devices} device(s), one worker each; busiest bucket done in "
               f"{result.busy_s / 3600:.2f} h ({result.utilisation:.0%} of the window)")
    for warning in warnings:
        typer.echo(f"warning: {warning}")
    if warnings:
        typer.echo(f"all of them: CALLQA_TOPIC_PARTITIONS='{json.dumps(setting)}', then callqa topics apply --execute")
    if routers is None:
        typer.echo("routers: give --calls-per-day to size them")
        return
    arriving = f"evenly over {arrivals_over}" if arrivals_over else f"as one burst, routed within {route_within_s:g} s"
    busy = "the burst is routed in" if arrivals_over is None else "the routers are busy for"
    typer.echo(f"routers: {routers.arrivals} calls arriving {arriving}: {routers.arrivals_per_s_needed:.1f} arrivals/s")
    typer.echo(f"  {routers.routers} router process(es) at {routers.per_router_arrivals_per_s:g} arrivals/s each, "
               f"{routers.cpu_cores:.2f} core(s) while routing ({routers.cpu_ms_per_call:g} ms CPU per call)")
    typer.echo(f"  {routers.partitions_needed} arrivals partition(s) needed, {routers.arrivals_partitions} in the topic; "
               f"{busy} {routers.routed_in_s:.0f} s")
    if routers.warning:
        typer.echo(f"warning: {routers.warning}")


def register(app: typer.Typer) -> None:
    app.command("lag")(lag)
    app.add_typer(dlq_app, name="dlq")
    app.command("plan")(plan_cmd)
    from pipeline.ops.replay_cli import replay_app

    app.add_typer(replay_app, name="replay")

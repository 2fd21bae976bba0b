"""``callqa lag | dlq | replay | plan``: the operator's commands (registered on the main app)."""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Annotated, Any, Optional

import typer

from pipeline.config import Settings, load_settings
from pipeline.logs import configure_logging


def _settings() -> Settings:
    cfg = load_settings()
    configure_logging(cfg.log_format, "warning" if cfg.log_level == "info" else cfg.log_level)
    return cfg


def _echo_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, default=str))


def lag(
    watch: Annotated[bool, typer.Option(help="Redraw the table until Ctrl-C.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    window_end: Annotated[Optional[str], typer.Option(help="End of the night window, HH:MM local time.")] = None,
    interval_s: Annotated[float, typer.Option(help="Seconds between redraws with --watch.")] = 5.0,
    rate_window_s: Annotated[float, typer.Option(help="Throughput is measured over this many seconds.")] = 300.0,
    sample_s: Annotated[float, typer.Option(
        help="With no recent history, measure again after this many seconds for a rate (0: do not).")] = 5.0,
    router_group: Annotated[str, typer.Option(help="The router's consumer group (its app id).")] = "callqa-router",
    qa_group: Annotated[str, typer.Option(help="The QA stage's consumer group (its app id).")] = "callqa-qa",
    bucket: Annotated[Optional[list[str]], typer.Option(help="Only these buckets (repeatable).")] = None,
    partitions: Annotated[bool, typer.Option(help="Show partition rows.")] = True,
) -> None:
    """Backlog per stage and partition: messages and audio seconds behind, throughput, ETA vs the window."""
    from rich.console import Console
    from rich.live import Live

    from pipeline.ops import lag_view
    from pipeline.ops.lag import record_samples, summarize
    from pipeline.ops.lag import window_end as next_end
    from pipeline.ops.lag_kafka import OffsetsReader, stage_specs

    cfg = _settings()
    specs = stage_specs(cfg, router_group, qa_group, bucket)
    history = cfg.state_dir / "ops" / "lag-samples.json"
    tracker = lag_view.load_tracker(history, rate_window_s)
    reader = OffsetsReader(cfg)

    def measure() -> tuple[list, list, datetime, Any, float]:
        started = time.perf_counter()
        rows = reader.backlog(specs)
        took = time.perf_counter() - started
        record_samples(tracker, rows, time.time())
        now = datetime.now().astimezone()
        end = next_end(window_end, now) if window_end else None
        return rows, summarize(rows, tracker, now, end), now, end, took

    try:
        rows, summaries, now, end, took = measure()
        if not watch and sample_s > 0 and tracker.oldest_span_s(time.time()) < tracker.min_span_s:
            time.sleep(sample_s)  # no history to measure a rate against: take a second sample
            rows, summaries, now, end, took = measure()
        lag_view.save_tracker(history, tracker)
        if as_json and not watch:
            _echo_json(lag_view.as_json(rows, summaries, tracker, now, end, took))
            return
        console = Console()
        if not watch:
            console.print(lag_view.table(rows, summaries, tracker, now, end, took, partitions))
            return
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


def register(app: typer.Typer) -> None:
    app.command("lag")(lag)

"""Offsets files (pure): ``topic,partition,offset`` lines, as ``kafka-consumer-groups --export``
writes them, so ``replay reset --export`` output restores with ``--from-file`` (or with Kafka's tool)."""

from __future__ import annotations

import csv
import io

from pipeline.errors import ConfigError

TP = tuple[str, int]


def format_offsets(offsets: dict[TP, int]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for (topic, partition), offset in sorted(offsets.items()):
        writer.writerow([topic, partition, offset])
    return out.getvalue()


def parse_offsets(text: str, source: str = "offsets file") -> dict[TP, int]:
    offsets: dict[TP, int] = {}
    for number, row in enumerate(csv.reader(io.StringIO(text)), 1):
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if len(row) != 3:
            raise ConfigError(f"{source} line {number}: expected topic,partition,offset")
        topic, partition, offset = (cell.strip() for cell in row)
        try:
            tp, value = (topic, int(partition)), int(offset)
        except ValueError:
            raise ConfigError(f"{source} line {number}: partition and offset must be integers") from None
        if not topic or tp[1] < 0 or value < 0:
            raise ConfigError(f"{source} line {number}: needs a topic and a partition and offset >= 0")
        if tp in offsets:
            raise ConfigError(f"{source} line {number}: {topic}[{tp[1]}] given twice")
        offsets[tp] = value
    return offsets

"""What ``topics apply`` would change, one line per difference (pure)."""

from __future__ import annotations

from pipeline.catalog import TopicChange

MANUAL = " (manual step: Kafka cannot do this in place)"


def diff_lines(changes: list[TopicChange]) -> list[str]:
    lines = []
    for c in changes:
        d = c.detail
        if c.action == "create":
            config = "".join(f", {k}={v}" for k, v in sorted(d.get("config", {}).items()))
            lines.append(f"{c.topic}: create ({d['partitions']} partitions, replication "
                         f"{d.get('replication_factor', '?')}{config})")
        elif c.action == "add_partitions":
            lines.append(f"{c.topic}: partitions {d['from']} -> {d['to']}")
        elif c.action == "cannot_shrink":
            lines.append(f"{c.topic}: partitions {d['live']} -> {d['catalog']}{MANUAL}")
        elif c.action == "replication_differs":
            lines.append(f"{c.topic}: replication {d['live']} -> {d['catalog']}{MANUAL}")
        elif c.action == "alter_config":
            was = d.get("was", {})
            lines.extend(f"{c.topic}: config {k} {was.get(k) or '(unset)'} -> {v}" for k, v in sorted(d["set"].items()))
        else:
            lines.append(f"{c.topic}: {c.action} {d}")
    return lines

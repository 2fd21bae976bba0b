"""Routing decisions, pure: which duration bucket, which partition, which call id and roles.

No Kafka, no storage: the router adapter asks these questions and acts on the answers.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from pipeline.errors import CallQAError

DEFAULT_STEREO_ROLES = {"0": "agent", "1": "customer"}
_CHANNEL_ALIASES = {"left": "0", "l": "0", "right": "1", "r": "1", "mono": "0"}


class RoutingError(CallQAError):
    pass


@dataclass(frozen=True)
class Buckets:
    """Duration buckets: ``edges_s`` [30, 120, 600] make short < 30 <= medium < 120 <= long < 600 <= xlong."""

    edges_s: tuple[float, ...]
    names: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(self.names) != len(self.edges_s) + 1:
            raise RoutingError(f"{len(self.edges_s)} edges need {len(self.edges_s) + 1} bucket names")

    def bucket_for(self, duration_s: float) -> str:
        return self.names[bisect.bisect_right(self.edges_s, duration_s)]


@dataclass
class PartitionBalancer:
    """Duration-aware partitioner: each call goes to the partition of its bucket topic
    with the fewest audio seconds assigned so far, so partitions carry about equal work
    (not equal message counts) and no consumer gets all the hour-long calls."""

    load_s: dict[str, list[float]] = field(default_factory=dict)

    def choose(self, bucket: str, partitions: int, duration_s: float) -> int:
        loads = self.load_s.setdefault(bucket, [0.0] * partitions)
        if len(loads) < partitions:  # partitions were added while running
            loads.extend([0.0] * (partitions - len(loads)))
        partition = min(range(partitions), key=loads.__getitem__)
        loads[partition] += duration_s
        return partition


def call_id_for(key: str, metadata: dict[str, str]) -> str:
    """The upstream's call id, else the object key without its extension: unique per stored
    object (``a/call.wav`` and ``b/call.wav`` are two calls)."""
    explicit = metadata.get("call-id") or metadata.get("call_id")
    if explicit:
        return explicit
    path = PurePosixPath(key)
    return str(path.with_suffix("")) if path.name and path.stem else key


def parse_roles(text: str | None, channels: int) -> dict[str, str]:
    """``"left=agent,right=customer"`` or ``"0=agent,1=customer"`` → {"0": "agent", "1": "customer"}.

    Without a map, stereo means agent left and customer right (the telephony convention)
    and mono is one mixed speaker.
    """
    if channels == 1 and not (text and re.search(r"(^|[,;])\s*(0|mono)\s*=", text)):
        return {"0": "mixed"}  # a stereo convention given for a whole folder does not apply to mono files
    if not text:
        return {str(c): DEFAULT_STEREO_ROLES.get(str(c), f"speaker{c}") for c in range(channels)}
    roles: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in re.split(r"[,;]", text))):
        channel, sep, role = part.partition("=")
        channel = _CHANNEL_ALIASES.get(channel.strip().lower(), channel.strip())
        if not sep or not channel.isdigit() or not role.strip():
            raise RoutingError(f"bad channel role {part!r} (expected e.g. left=agent,right=customer)")
        if int(channel) >= channels:
            raise RoutingError(f"role for channel {channel} but the recording has {channels} channel(s)")
        roles[channel] = role.strip().lower()
    for c in range(channels):
        roles.setdefault(str(c), "mixed" if channels == 1 else f"speaker{c}")
    return roles

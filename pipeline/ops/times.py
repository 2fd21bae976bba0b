"""Times given on the command line (pure): one reading for every operator command.

Accepted: ISO 8601 with an offset or ``Z`` (``2026-11-30T22:00+08:00``), or followed by an IANA
zone name (``2026-11-30T22:00 Asia/Shanghai``). A time without a zone is read in the zone the
commands print their times in: the process's local zone (``TZ`` or /etc/localtime; UTC in the
containers, which set neither). Clock times (``lag --window-end``) take the same zones:
``06:00``, ``06:00+08:00``, ``06:00Z``, ``06:00 Asia/Shanghai``.
"""

from __future__ import annotations

from datetime import datetime, time, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

FORMS = "ISO 8601, e.g. 2026-11-30T22:00, 2026-11-30T22:00+08:00, 2026-11-30T14:00Z or 2026-11-30T22:00 Asia/Shanghai"
CLOCK_FORMS = "HH:MM, e.g. 06:00, 06:00+08:00, 06:00Z or 06:00 Asia/Shanghai"


def local_zone() -> tzinfo:
    """The zone the commands print in and read zone-less times in."""
    zone = datetime.now().astimezone().tzinfo
    assert zone is not None  # astimezone() always attaches one
    return zone


def zone_label(when: datetime) -> str:
    """``UTC+08:00 (CST)``-style name of a time's zone, for help and output."""
    offset = when.strftime("%z")
    name = when.tzname() or ""
    label = f"UTC{offset[:3]}:{offset[3:]}" if offset else "local"
    return f"{label} ({name})" if name and not name.startswith(("UTC", "+", "-")) else label


def _split_zone(text: str) -> tuple[str, tzinfo | None]:
    """``'22:00 Asia/Shanghai'`` -> (``'22:00'``, the zone); text without a zone name is returned whole."""
    head, sep, tail = text.strip().rpartition(" ")
    if not sep or not tail or tail[0].isdigit() or tail[0] in "+-":
        return text.strip(), None
    try:
        return head.strip(), ZoneInfo(tail)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {tail!r} (an IANA name, e.g. Asia/Shanghai or UTC)") from exc


def _in_zone(naive: datetime, zone: tzinfo | None) -> datetime:
    # astimezone() on a naive time reads it as local time, daylight saving included
    return naive.replace(tzinfo=zone) if zone is not None else naive.astimezone()


def parse_time(text: str, zone: tzinfo | None = None) -> datetime:
    """An aware datetime; a time without a zone is in ``zone`` (default: the local zone)."""
    body, named = _split_zone(text)
    try:
        parsed = datetime.fromisoformat(body)
    except ValueError as exc:
        raise ValueError(f"not a time: {text!r} ({FORMS})") from exc
    if parsed.tzinfo is not None:
        if named is not None:
            raise ValueError(f"{text!r} gives both an offset and a zone name: give one")
        return parsed
    return _in_zone(parsed, named or zone)


def next_clock_time(text: str, now: datetime) -> datetime:
    """The next ``HH:MM`` at or after ``now`` in the time's zone (``06:00`` asked at 23:00 is tomorrow's).
    A full date-time is taken as it is. ``now`` must be aware."""
    body, named = _split_zone(text)
    try:
        at = time.fromisoformat(body)
    except ValueError:
        try:
            return parse_time(text)
        except ValueError:
            raise ValueError(f"not a clock time: {text!r} ({CLOCK_FORMS})") from None
    if at.tzinfo is not None and named is not None:
        raise ValueError(f"{text!r} gives both an offset and a zone name: give one")
    zone = at.tzinfo or named
    day = (now.astimezone(zone) if zone is not None else now.astimezone()).date()
    for days in (0, 1, 2):  # 2: a wall time skipped by a daylight-saving change today and tomorrow
        end = _in_zone(datetime.combine(day + timedelta(days=days), at.replace(tzinfo=None)), zone)
        if end >= now:
            return end
    raise AssertionError("unreachable: a day later is always later")

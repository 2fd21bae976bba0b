"""Packed windows: one channel's speech regions joined into windows of up to 30 s, silence removed.

Pure sample arithmetic (no torch). In a two-party call each channel's speech is
broken by the other party's turns; padding one turn at a time to Whisper's
30 s context wastes most of the encoder and gives the decoder one turn of
context. Instead the regions are concatenated, with a short fixed gap between
them, into windows filled up to ``max_window_s``. Each window keeps an offset
map (:class:`Piece` list) from window time back to call time, so segments the
model times inside the window land on the call's clock.

Regions closer than ``gap_s`` in the call are kept as one piece with their
real pause; every join in a window therefore stands for a pause longer than
the gap, which is where segments may be split (:func:`PackedWindow.split_points`).
"""

from __future__ import annotations

from dataclasses import dataclass

RATE = 16_000


@dataclass(frozen=True)
class Piece:
    """Call samples ``[src_start, src_end)`` placed at window sample ``dst_start``; ``voiced``
    samples of it are speech per the VAD (the rest are short pauses kept in place)."""

    src_start: int
    src_end: int
    dst_start: int
    voiced: int

    @property
    def length(self) -> int:
        return self.src_end - self.src_start

    @property
    def dst_end(self) -> int:
        return self.dst_start + self.length


@dataclass(frozen=True)
class PackedWindow:
    """Speech of one channel laid out for the model: pieces in call order with gaps between.

    speech_s counts the voiced region seconds (VAD) inside; duration_s the whole
    window the model computes on (speech, kept pauses and the joins' gaps).
    """

    pieces: tuple[Piece, ...]

    @property
    def speech_s(self) -> float:
        return sum(p.voiced for p in self.pieces) / RATE

    @property
    def length(self) -> int:
        return self.pieces[-1].dst_end

    @property
    def duration_s(self) -> float:
        return self.length / RATE

    @property
    def start_s(self) -> float:
        return self.pieces[0].src_start / RATE

    @property
    def end_s(self) -> float:
        return self.pieces[-1].src_end / RATE

    def to_call_s(self, t_s: float, side: str) -> float:
        """Window time -> call time. A time in a join's gap snaps to the next piece's
        start (``side="start"``) or the previous piece's end (``side="end"``)."""
        t = t_s * RATE
        for i, p in enumerate(self.pieces):
            if t < p.dst_start:  # inside the gap before piece i
                if side == "start" or i == 0:
                    return p.src_start / RATE
                return self.pieces[i - 1].src_end / RATE
            if t <= p.dst_end:
                return (p.src_start + t - p.dst_start) / RATE
        return self.pieces[-1].src_end / RATE

    def piece_of(self, start_s: float, end_s: float) -> int | None:
        """Index of the piece a window span overlaps most (None: it lies in a join's gap)."""
        lo, hi = start_s * RATE, end_s * RATE
        overlaps = [min(hi, p.dst_end) - max(lo, p.dst_start) for p in self.pieces]
        best = max(range(len(self.pieces)), key=overlaps.__getitem__)
        return best if overlaps[best] > 0 else None

    def span_to_call_s(self, start_s: float, end_s: float) -> tuple[float, float]:
        """Window span -> call span inside the one piece it overlaps most. A join stands for a
        pause, so no word runs across one: a word whose frames reach over a join (the path hands a
        gap's frames to the word before or after it) lies in the piece holding most of it, and
        its other end is cut at that piece's edge rather than mapped into another turn."""
        best = self.piece_of(start_s, end_s)
        if best is None:  # inside a gap: the nearest speech, as to_call_s does
            a = self.to_call_s(start_s, "start")
            return a, max(a, self.to_call_s(end_s, "end"))
        p = self.pieces[best]
        lo, hi = max(start_s * RATE, p.dst_start), min(end_s * RATE, p.dst_end)
        a, b = (p.src_start + lo - p.dst_start) / RATE, (p.src_start + hi - p.dst_start) / RATE
        return a, max(a, b)

    def joins_within(self, start_s: float, end_s: float, min_pause_s: float) -> list[int]:
        """Indices i of joins (between piece i-1 and i) strictly inside window times
        (start_s, end_s) whose pause in the call exceeds min_pause_s."""
        out = []
        for i in range(1, len(self.pieces)):
            prev, cur = self.pieces[i - 1], self.pieces[i]
            if start_s < self.join_s(i) < end_s and (cur.src_start - prev.src_end) / RATE > min_pause_s:
                out.append(i)
        return out

    def join_s(self, i: int) -> float:
        """Window time of the middle of the gap before piece i."""
        return (self.pieces[i - 1].dst_end + self.pieces[i].dst_start) / 2 / RATE

    def after(self, t_s: float) -> PackedWindow | None:
        """The rest of this window from window time t_s on, laid out from 0 (None: no audio left).

        Pieces keep their gaps; a piece t_s falls inside is cut there (its voiced share
        shrinks in proportion)."""
        t = int(round(t_s * RATE))
        rest: list[Piece] = []
        for p in self.pieces:
            if p.dst_end <= t:
                continue
            cut = max(0, t - p.dst_start)
            voiced = p.voiced * (p.length - cut) // max(1, p.length)
            rest.append(Piece(p.src_start + cut, p.src_end, p.dst_start + cut, voiced))
        if not rest:
            return None
        base = rest[0].dst_start
        return PackedWindow(tuple(Piece(p.src_start, p.src_end, p.dst_start - base, p.voiced) for p in rest))

    def only(self, indices: tuple[int, ...], gap_s: float) -> PackedWindow:
        """Pieces ``indices`` (in order) laid out again from 0, joined with ``gap_s``: the speech
        a decode passed over, as a window of its own."""
        out: list[Piece] = []
        for i in indices:
            p = self.pieces[i]
            at = out[-1].dst_end + int(gap_s * RATE) if out else 0
            out.append(Piece(p.src_start, p.src_end, at, p.voiced))
        return PackedWindow(tuple(out))

    def unpacked(self) -> list[PackedWindow]:
        """Each piece as a window of its own (the fallback when a packed window decodes badly)."""
        return [PackedWindow((Piece(p.src_start, p.src_end, 0, p.voiced),)) for p in self.pieces]


def _split_long(regions: list[tuple[int, int]], max_len: int) -> list[tuple[int, int]]:
    """Hard-cut regions longer than max_len (callers ask the VAD to cut at pauses first)."""
    out = []
    for start, end in regions:
        while end - start > max_len:
            out.append((start, start + max_len))
            start += max_len
        if end > start:
            out.append((start, end))
    return out


def _pieces(regions: list[tuple[int, int]], gap: int, max_len: int) -> list[tuple[int, int, int]]:
    """Merge regions whose pause is at most ``gap`` into (start, end, voiced) spans."""
    spans: list[tuple[int, int, int]] = []
    for start, end in regions:
        if spans and start - spans[-1][1] <= gap and end - spans[-1][0] <= max_len:
            s, _, voiced = spans[-1]
            spans[-1] = (s, end, voiced + end - start)
        else:
            spans.append((start, end, end - start))
    return spans


def pack_regions(regions: list[tuple[int, int]], max_window_s: float = 30.0, gap_s: float = 0.3,
                 balance: bool = True) -> list[PackedWindow]:
    """Sorted speech regions (16 kHz samples, call time) -> packed windows of at most max_window_s.

    Windows fill in call order; a span that would overflow the current window starts the
    next one, so no span is ever cut except one longer than the limit itself. With
    ``balance``, the channel keeps the fewest windows greedy filling needs, but their
    lengths are evened out (the smallest limit that needs no more windows): 34 s of speech
    becomes two 17 s windows rather than 30 s and a 4 s stub, which pads badly and gives
    the model little context.
    """
    max_len, gap = int(max_window_s * RATE), int(gap_s * RATE)
    spans = _pieces(_split_long(sorted(regions), max_len), gap, max_len)
    windows = _fill(spans, max_len, gap)
    if balance and len(windows) > 1:
        low, high = max(end - start for start, end, _ in spans), max_len
        while low < high:  # greedy filling is exact for "does limit L need at most n windows?"
            mid = (low + high) // 2
            if len(_fill(spans, mid, gap)) <= len(windows):
                high = mid
            else:
                low = mid + 1
        windows = _fill(spans, low, gap)
    return windows


def _fill(spans: list[tuple[int, int, int]], limit: int, gap: int) -> list[PackedWindow]:
    """Greedy in call order: windows of at most ``limit`` samples, spans joined with ``gap``."""
    windows: list[PackedWindow] = []
    current: list[Piece] = []
    for start, end, voiced in spans:
        at = current[-1].dst_end + gap if current else 0
        if current and at + end - start > limit:
            windows.append(PackedWindow(tuple(current)))
            current, at = [], 0
        current.append(Piece(start, end, at, voiced))
    if current:
        windows.append(PackedWindow(tuple(current)))
    return windows

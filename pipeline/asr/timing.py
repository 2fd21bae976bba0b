"""From timestamped tokens of a packed window to call-time segments; the loop check. Pure (no torch).

The decoder emits ``<|t0|> text <|t1|><|t2|> text <|t3|>``: each pair of
timestamps brackets one segment in window time. :func:`timed_spans` cuts the
tokens there; :func:`call_segments` maps each span back to call time through
the window's offset map and splits a span that runs across a join between
regions far apart in the call (the other party spoke in between), sharing its
text between the parts in proportion to their time.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from pipeline.asr.packing import RATE, PackedWindow
from pipeline.numbers.normalize import is_cjk

MIN_PART_S = 0.4  # a split part with less audio than this gets no text
CLAUSE_END = frozenset(",.?!;:，。？！；：、")
# Text written into (almost) no audio: faster than anyone speaks. Whisper does this when it starts
# reading its window again from the top at the end of it.
MAX_TOKENS_PER_S = 30.0
MIN_RATE_TOKENS = 8  # shorter texts may sit between two close timestamps honestly
MIN_REPEAT_CHARS = 12  # an earlier span's text inside a later one, at least this long: a restart
# A piece of speech that the kept spans pass over: Whisper transcribes the voice it locked on to and
# may step over a second, quieter or slower voice in the same window (a mono mix), timing the next
# span after it. At least this long, and covered by spans for less than this share of its length.
MIN_SKIPPED_S = 0.5
MAX_SKIPPED_COVER = 0.25


@dataclass(frozen=True)
class TimedSpan:
    """Text tokens between two timestamps, times in seconds from the window's start."""

    start_s: float
    end_s: float
    tokens: tuple[int, ...]
    closed: bool = True  # False: no closing timestamp (the window ended, or the token cap cut it)


@dataclass(frozen=True)
class TimedText:
    """A piece of one window's transcript on the call's clock."""

    start_s: float
    end_s: float
    text: str


def timed_spans(tokens: list[int], timestamp_begin: int, step_s: float, window_s: float) -> list[TimedSpan]:
    """Cut decoder output (no end-of-text) into spans at timestamp pairs.

    Text after the last timestamp (the token cap cut the window) runs to the
    window's end; times are clamped to the window.
    """
    spans: list[TimedSpan] = []
    start: float | None = None
    text: list[int] = []
    for tok in tokens:
        if tok < timestamp_begin:
            text.append(tok)
            continue
        t = min((tok - timestamp_begin) * step_s, window_s)
        if start is not None and text:
            spans.append(TimedSpan(start, max(t, start), tuple(text)))
            start, text = None, []
        else:
            start = t  # an opening timestamp (or one that replaces an empty pair's)
    if text:
        begin = start if start is not None else 0.0
        spans.append(TimedSpan(begin, max(window_s, begin), tuple(text), closed=False))
    return spans


@dataclass(frozen=True)
class Coverage:
    """How much of a window its decode transcribed well.

    kept: how many leading spans are kept (a loop or a cut-off span and all after it are not; counted,
        not timed: a loop can start at the window's very end, where its span lasts no time at all).
    resume_s: where to decode the window again from (None: nothing left to do).
    skipped: pieces before the resume point (or in the whole window) that no kept span covers:
        speech the decode stepped over, to be decoded again on its own.
    rewound: the decode read a stretch of its window again (:func:`_reads_back`) with audio still
        ahead: the model's clock ran ahead of the audio, so the kept spans' times (and which
        pieces they cover) cannot be trusted either.
    """

    kept: int
    resume_s: float | None
    skipped: tuple[int, ...] = ()
    rewound: bool = False
    mid_turn: bool = False  # it stopped while still reading speech (a loop or a cut-off), not at an early end


def coverage(spans: list[tuple[TimedSpan, str]], window: PackedWindow, complete: bool,
             max_compression: float, min_rest_s: float) -> Coverage:
    """Good spans run up to the first that loops (:func:`_loops`) or was cut off by the token
    cap; decoding resumes after them. A window the model ended early, with more than min_rest_s
    of audio after its last span, resumes too.

    A last span the model ended without a closing timestamp runs to the window's end: a packed
    window ends at a pause, never inside a word (Whisper, cutting audio every 30 s, re-decodes
    such a span instead; on Mandarin it often writes no timestamps at all)."""
    good_end = 0.0
    earlier: list[str] = []
    for kept, (span, text) in enumerate(spans):
        cut = not span.closed and not complete
        if cut or _loops(span, text, earlier, max_compression):
            rewound = _reads_back(spans[kept:], earlier) and _audio_s(window, span.start_s, window.duration_s) > min_rest_s
            return Coverage(kept, good_end, skipped_pieces(spans[:kept], window, good_end), rewound, True)
        good_end = span.end_s
        earlier.append(text.strip())
    if not complete:
        return Coverage(len(spans), good_end, skipped_pieces(spans, window, good_end), mid_turn=True)
    rest = _audio_s(window, good_end, window.duration_s)
    resume = good_end if rest > min_rest_s else None
    return Coverage(len(spans), resume, skipped_pieces(spans, window, window.duration_s if resume is None else good_end))


def skipped_pieces(spans: list[tuple[TimedSpan, str]], window: PackedWindow, upto_s: float) -> tuple[int, ...]:
    """Indices of the window's pieces that end by ``upto_s`` (later audio is decoded again
    anyway) and that the spans with words cover for less than MAX_SKIPPED_COVER of their length."""
    timed = [(span.start_s * RATE, span.end_s * RATE) for span, text in spans if has_words(text)]
    out = []
    for i, p in enumerate(window.pieces):
        if p.dst_end > upto_s * RATE + 1 or p.voiced < MIN_SKIPPED_S * RATE:
            continue
        covered = sum(max(0.0, min(b, p.dst_end) - max(a, p.dst_start)) for a, b in timed)
        if covered < MAX_SKIPPED_COVER * p.length:
            out.append(i)
    return tuple(out)


def _loops(span: TimedSpan, text: str, earlier: list[str], max_compression: float) -> bool:
    """A span that repeats the one before, compresses like a loop, holds an earlier span's text
    again (the window read from the top once more), or is written faster than speech."""
    stripped = text.strip()
    if earlier and stripped == earlier[-1]:
        return True
    if compression_ratio(text) > max_compression:
        return True
    if any(len(e) >= MIN_REPEAT_CHARS and e in stripped for e in earlier):
        return True
    n = len(span.tokens)
    return n >= MIN_RATE_TOKENS and n > MAX_TOKENS_PER_S * (span.end_s - span.start_s)


def _reads_back(spans: list[tuple[TimedSpan, str]], earlier: list[str]) -> bool:
    """The first two spans (each of some duration) hold two earlier kept texts again, in their
    order, neither of them the last: the model went back over a stretch of its window. One
    sentence said again is not enough (calls repeat themselves), nor is a rushed span at the
    window's end (:func:`_loops` ends those)."""
    if len(spans) < 2:
        return False
    at = []
    for span, text in spans[:2]:
        stripped = text.strip()
        found = [i for i, e in enumerate(earlier[:-1]) if len(e) >= MIN_REPEAT_CHARS and e in stripped]
        if span.end_s - span.start_s < MIN_PART_S or not found:
            return False
        at.append(found[0])
    return at[0] < at[1]


def _units(text: str) -> tuple[list[str], str]:
    """Words of spaced text (or one word: "Hello." is not five letters to share out), characters of
    unspaced Chinese text, and the joiner."""
    text = text.strip()
    if " " in text or not any(map(is_cjk, text)):
        return text.split(), " "
    return list(text), ""


def call_segments(span: TimedSpan, text: str, window: PackedWindow, min_pause_s: float) -> list[TimedText]:
    """One span of ``window`` -> call-time pieces, split at joins whose call pause exceeds min_pause_s."""
    joins = window.joins_within(span.start_s, span.end_s, min_pause_s)
    edges = [span.start_s, *(window.join_s(i) for i in joins), span.end_s]
    # share the text by the audio each part really holds; a sliver at a join (the model's
    # timestamp a little early or late) gets none
    weights = [_audio_s(window, edges[k], edges[k + 1]) for k in range(len(edges) - 1)]
    weights = [w if w >= MIN_PART_S else 0.0 for w in weights]
    out: list[TimedText] = []
    for k, part in enumerate(share_text(text, weights)):
        if part:
            start = window.to_call_s(edges[k], "start")
            end = max(window.to_call_s(edges[k + 1], "end"), start)
            out.append(TimedText(start, end, part))
    return out


def share_text(text: str, weights: list[float]) -> list[str]:
    """``text`` cut into one piece per weight (words, or characters of Chinese), in proportion to
    the weights, each cut moved to the nearest clause end; the last piece takes the rest. A piece
    may be empty."""
    total = sum(weights) or 1.0
    units, joiner = _units(text)
    out: list[str] = []
    taken, cumulative = 0, 0.0
    for k, weight in enumerate(weights):
        cumulative += weight
        upto = len(units) if k == len(weights) - 1 else _snap(units, round(len(units) * cumulative / total))
        out.append(joiner.join(units[taken:upto]).strip())
        taken = max(taken, upto)
    return out


def _snap(units: list[str], at: int) -> int:
    """Move a text split point to the nearest clause end (punctuation) close to it: the time
    share only estimates where the words fall, the model's punctuation marks the pause."""
    if at <= 0 or at >= len(units):  # all text on one side: nothing to move
        return at
    reach = max(2, len(units) // 4)
    ends = [i for i in range(max(1, at - reach), min(len(units), at + reach + 1)) if units[i - 1][-1:] in CLAUSE_END]
    return min(ends, key=lambda i: abs(i - at)) if ends else at


def _audio_s(window: PackedWindow, start_s: float, end_s: float) -> float:
    """Seconds of window time in (start_s, end_s) covered by pieces (joins' gaps excluded)."""
    lo, hi = start_s * RATE, end_s * RATE
    return sum(max(0.0, min(hi, p.dst_end) - max(lo, p.dst_start)) for p in window.pieces) / RATE


def compression_ratio(text: str) -> float:
    """Bytes of text ÷ bytes compressed: high for repetition loops (Whisper's test, 2.4)."""
    data = text.encode("utf-8")
    return len(data) / len(zlib.compress(data)) if data else 0.0


def has_words(text: str) -> bool:
    """False for text of punctuation and spaces only (what a model writes for breath or noise)."""
    return any(ch.isalnum() for ch in text)


def window_texts(spans: list[tuple[TimedSpan, str]], window: PackedWindow, min_pause_s: float) -> list[TimedText]:
    """The call-time pieces of one window's (kept) spans; consecutive repeats and word-less texts dropped."""
    out: list[TimedText] = []
    previous = None
    for span, text in spans:
        if has_words(text) and text != previous:
            out.extend(call_segments(span, text, window, min_pause_s))
        previous = text
    return out

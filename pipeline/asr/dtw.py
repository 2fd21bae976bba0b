"""Word times from cross-attention: normalisation, dynamic time warping, word grouping. Pure (numpy).

The decoder's alignment heads (a few cross-attention heads whose weights follow the audio,
listed per checkpoint) attend, for each text token, to the encoder frames where it is said.
Teacher-forcing a window's final text and reading those heads gives a (heads, tokens, frames)
score tensor; :func:`alignment_matrix` turns it into one (tokens, frames) weight matrix the way
Whisper does (softmax over frames, standardise each frame over the tokens, median filter along
time, mean over heads), and :func:`dtw` finds the monotonic path through its negation: each
token's first and last frame. :func:`group_words` joins token pieces into words (spaces for
spaced scripts, one character per word for Chinese) with their times.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MEDIAN_WIDTH = 7  # frames (20 ms each): Whisper's filter width


@dataclass(frozen=True)
class Word:
    """One word in seconds (window or call time, per the caller)."""

    start_s: float
    end_s: float
    text: str


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def median_filter(x: np.ndarray, width: int) -> np.ndarray:
    """Running median along the last axis, edges padded by reflection (width odd)."""
    if width <= 1 or x.shape[-1] < width:
        return x
    half = width // 2
    padded = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(half, half)], mode="reflect")
    return np.median(np.lib.stride_tricks.sliding_window_view(padded, width, axis=-1), axis=-1)


STD_AXIS = -2


def alignment_matrix(scores: np.ndarray, width: int = MEDIAN_WIDTH) -> np.ndarray:
    """Scaled attention scores (heads, tokens, frames) -> weights (tokens, frames), higher where a
    token is said. Standardising each frame over the tokens keeps a frame every token attends to a
    little (silence, the window's start) from pulling the path."""
    if scores.ndim != 3 or scores.shape[1] == 0 or scores.shape[2] == 0:
        raise ValueError(f"scores must be (heads, tokens, frames) with tokens and frames, got {scores.shape}")
    weights = _softmax(scores.astype(np.float64), axis=-1)
    mean = weights.mean(axis=STD_AXIS, keepdims=True)
    std = weights.std(axis=STD_AXIS, keepdims=True)
    weights = (weights - mean) / np.maximum(std, 1e-10)
    return median_filter(weights, width).mean(axis=0)


def dtw(cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cheapest monotonic path through cost (tokens, frames) from (0, 0) to the last cell, by
    steps of one token, one frame, or both -> per token its first and last frame (inclusive).

    Each row is one vectorised pass: within a row D[j] = min(a[j], c[j] + D[j-1]) with a[j] the
    best entry from the row above, which is the running minimum of a[k] - S[k] plus S[j] for
    the row's cumulative cost S.
    """
    n, m = cost.shape
    if n == 0 or m == 0:
        raise ValueError(f"cost must have tokens and frames, got {cost.shape}")
    if m < n:
        raise ValueError(f"fewer frames ({m}) than tokens ({n}): no path gives each token a frame")
    total = np.full((n, m), np.inf)
    move = np.zeros((n, m), dtype=np.int8)  # 0 diagonal, 1 from the row above, 2 from the left
    csum = np.cumsum(cost[0])
    total[0] = csum
    move[0, 1:] = 2
    for i in range(1, n):
        c = cost[i]
        diag = np.concatenate(([np.inf], total[i - 1, :-1]))
        up = total[i - 1]
        entry = np.minimum(diag, up)
        a = c + entry
        s = np.cumsum(c)
        row = np.minimum.accumulate(a - s) + s
        total[i] = row
        left = np.concatenate(([np.inf], row[:-1] + c[1:]))
        from_left = left < a
        move[i] = np.where(from_left, 2, np.where(up < diag, 1, 0))
    first = np.full(n, m - 1)
    last = np.zeros(n, dtype=np.int64)
    i, j = n - 1, m - 1
    last[i] = j
    while True:
        first[i] = j
        if i == 0 and j == 0:
            break
        step = move[i, j] if i > 0 else 2
        if step != 2:
            i -= 1
            last[i] = j if step == 1 else j - 1
        if step != 1:
            j -= 1
    return first, last


def token_frames(scores: np.ndarray, width: int = MEDIAN_WIDTH) -> tuple[np.ndarray, np.ndarray]:
    """Scores (heads, tokens, frames) -> each token's [start, end) frames."""
    first, last = dtw(-alignment_matrix(scores, width))
    return first, last + 1


def _is_cjk(ch: str) -> bool:
    return "\u3400" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff"


def _chars_to_words(text: str) -> list[str]:
    """Unspaced text -> one word per CJK character, runs of other letters/digits kept whole,
    punctuation joined to the word before it."""
    words: list[str] = []
    run = False  # the last word is a non-CJK run still open
    for ch in text:
        if ch.isspace():
            run = False
        elif _is_cjk(ch):
            words.append(ch)
            run = False
        elif ch.isalnum():
            if run:
                words[-1] += ch
            else:
                words.append(ch)
                run = True
        elif words:
            words[-1] += ch
            run = False
        else:
            words.append(ch)
    return words


def group_words(pieces: list[tuple[str, float, float]], spaced: bool) -> list[Word]:
    """Timed text pieces (decodable token groups, in order) -> words.

    spaced: a piece starting with a space starts a word; a piece of punctuation only joins the
    word before it. Unspaced: each CJK character is a word, its piece's time shared evenly
    between the piece's words.
    """
    words: list[Word] = []
    space: float | None = None  # start of a whitespace-only piece: the next piece starts a word there
    for text, start, end in pieces:
        if spaced:
            if not text.strip():  # the tokenizer writes " thanks" as " ", "th", "anks"
                space = start if space is None else space
                continue
            starts_word = text[:1].isspace() or space is not None or not words
            if not any(ch.isalnum() for ch in text) and words:
                starts_word = False
            if space is not None and starts_word:
                start = space  # the space token is where the model hears the word begin
            space = None
            if starts_word:
                words.append(Word(start, end, text.strip()))
            else:
                w = words[-1]
                words[-1] = Word(w.start_s, max(w.end_s, end), w.text + text.strip())
            continue
        parts = _chars_to_words(text)
        if not parts:
            continue
        if not any(ch.isalnum() for ch in parts[0]) and words:  # punctuation after the last word
            w = words[-1]
            words[-1] = Word(w.start_s, max(w.end_s, end), w.text + parts.pop(0))
        step = (end - start) / max(1, len(parts))
        words += [Word(start + k * step, start + (k + 1) * step, p) for k, p in enumerate(parts)]
    return words


def _first_pause(quiet: np.ndarray, frames: int) -> int | None:
    """Index of the last frame of the first run of ``frames`` quiet frames, or None."""
    run = 0
    for i, q in enumerate(quiet):
        run = run + 1 if q else 0
        if run >= frames:
            return i
    return None


def snap_to_onsets(
    words: list[Word],
    samples: np.ndarray,
    rate: int,
    back_s: float = 0.1,
    ahead_s: float = 0.5,
    hop_s: float = 0.01,
    rel: float = 0.1,
    earliest: list[float | None] | None = None,
    pause_s: float = 0.03,
) -> list[Word]:
    """Word starts moved to the onset after the quietest point near them.

    The path's boundaries between words come out early (on synthetic calls by about 0.18 s: a
    pause's frames, and some of the word before, go to the next word; on tools/eval_words seed 7
    a tenth of them by 0.35-0.6 s, so the span reaches 0.5 s ahead, not 0.35). Where the audio from
    ``back_s`` before to ``ahead_s`` after a start has a quiet ``hop_s`` frame (RMS under ``rel``
    of the word's loudest), the start moves to the first loud frame after the quiet point;
    never past the word's end, unless the path gave the word only pause (its level under ``rel``
    of the words' speech level): then its onset is the next sound up to the next word's end.
    Ends are left alone (the next word's onset bounds them, and starts stay in order).
    ``earliest``, per word, lets the search reach further back (a word with no word before it in
    its stretch of audio: everything said there from that time on is this word or after it).

    The quiet point is the first pause (``pause_s`` of quiet frames) in the span, else its
    quietest frame: the span can hold the pause after the word too (the path's end takes the
    comma after a digit and the gap behind it), and the quieter of two pauses moved a tenth of
    the digits of a read card number onto the next digit's onset (tools/eval_words)."""
    hop = max(1, int(hop_s * rate))
    if not words:
        return []
    # the words' loud frames: a floor for a word whose own span is all pause (the call's first
    # word, given the frames before the speech: its own RMS is the line noise's)
    span = samples[max(0, int(words[0].start_s * rate)) : int(words[-1].end_s * rate)]
    frames = span[: len(span) // hop * hop].astype(np.float64).reshape(-1, hop)
    speech = float(np.percentile(np.sqrt((frames**2).mean(axis=1)), 95)) if len(frames) else 0.0
    out = []
    for k, w in enumerate(words):
        first = earliest[k] if earliest is not None else None
        back = w.start_s - back_s if first is None else min(first, w.start_s - back_s)
        lo = max(0, int(back * rate))
        hi = min(len(samples), int(min(w.end_s, w.start_s + ahead_s) * rate))
        word = samples[int(w.start_s * rate) : int(w.end_s * rate)]
        level = float(np.sqrt((word.astype(np.float64) ** 2).mean())) if word.size else 0.0
        floor = rel * level * 2
        reach = w.end_s
        if level < rel * speech and k + 1 < len(words):
            # the path gave the word only pause: its onset is the next sound, up to the next word's end
            floor, reach = rel * speech, words[k + 1].end_s
        end = min(len(samples), int(reach * rate))
        n, n_all = (hi - lo) // hop, (end - lo) // hop
        if n < 2 or word.size == 0:
            out.append(w)
            continue
        rms = np.sqrt((samples[lo : lo + n_all * hop].astype(np.float64).reshape(n_all, hop) ** 2).mean(axis=1))
        quiet = _first_pause(rms[:n] < floor, max(1, round(pause_s / hop_s)))
        if quiet is None:
            quiet = int(np.argmin(rms[:n]))
        # the onset may lie past the search span: a start the path put early in a pause
        loud = np.flatnonzero(rms[quiet:] >= floor)
        if rms[quiet] >= floor or not loud.size:
            out.append(w)
            continue
        start = max((lo + (quiet + int(loud[0])) * hop) / rate, 0.0)
        out.append(Word(start, max(w.end_s, start), w.text))
    for k in range(1, len(out)):  # starts stay in order
        if out[k].start_s < out[k - 1].start_s:
            out[k] = Word(out[k - 1].start_s, max(out[k].end_s, out[k - 1].start_s), out[k].text)
    return out

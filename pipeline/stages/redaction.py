"""PII redaction of a transcript before it is published or written: nothing at rest in clear.

Detection is the pure PII detector QA uses too (:func:`pipeline.numbers.pii.find_pii`, spoken and
written numbers of any script, joined across pauses), and its redaction labels, plus its
fail-closed backstop (:mod:`pipeline.numbers.backstop`): any written run of 12 or more digits that
the detector left is masked too, since a transcript leaving the worker cannot be un-published, and
so is a number said where one is known to be but heard as words (:mod:`pipeline.numbers.unheard`).
Pure: no Kafka, no engine.
"""

from __future__ import annotations

from pipeline.events import PIISpan, Segment, Transcript, Word
from pipeline.numbers.backstop import BACKSTOP_LABEL, fail_closed
from pipeline.numbers.model import SegmentText
from pipeline.numbers.normalize import DIGIT_HOMOPHONES, normalize
from pipeline.numbers.pii import REDACTION_LABEL, PIIHit, find_pii
from pipeline.numbers.unheard import Ranges
from pipeline.stages.word_spans import covered_words

# a ``pii`` span for a run the backstop masked: no detector took it, so it names no kind
BACKSTOP_TYPE = "unclassified_number"
BACKSTOP_CONFIDENCE = 0.2


def redact_transcript(t: Transcript) -> Transcript:
    """The transcript with PII replaced by labels; ``pii`` lists what was found (type, role, times)."""
    segments = [SegmentText(s.role, s.channel, s.start_s, s.end_s, s.text) for s in t.segments]
    norms = [normalize(s.text) for s in segments]
    out = fail_closed(segments, norms, find_pii(segments, norms))
    hits, texts, long_runs = out.hits, out.texts, out.long_runs
    words = _redacted_words(t.segments, hits, long_runs, out.unheard)
    return t.model_copy(
        update={
            "segments": [
                s.model_copy(update={"text": text, "words": w})
                for s, text, w in zip(t.segments, texts, words, strict=True)
            ],
            "pii": [
                PIISpan(type=h.type, role=h.role, start_s=start, end_s=end, confidence=h.confidence, word_timed=timed)
                for h in hits
                for start, end, timed in [pii_times(t.segments, h)]
            ]
            + [
                backstop_span(t.segments, i, words[i])
                for i, masked in enumerate(long_runs)
                if masked or i in out.unheard
            ],
            "redacted": True,
        }
    )


def backstop_span(segments: list[Segment], idx: int, words: list[Word] | None) -> PIISpan:
    """What the backstop masked in segment ``idx``, as a span audio redaction cuts too (the text no
    longer says the number, so the audio must not either): its masked words' times, widened into
    the pauses around them as a detector's hit is (:func:`pii_times`), else the segment's."""
    seg = segments[idx]
    masked = [k for k, w in enumerate(words or []) if w.text == BACKSTOP_LABEL]
    if not words or not masked:
        return PIISpan(
            type=BACKSTOP_TYPE, role=seg.role, start_s=seg.start_s, end_s=seg.end_s, confidence=BACKSTOP_CONFIDENCE
        )
    start, end = _widened(segments, (idx, words, masked[0]), (idx, words, masked[-1]))
    return PIISpan(
        type=BACKSTOP_TYPE,
        role=seg.role,
        start_s=start,
        end_s=end,
        confidence=BACKSTOP_CONFIDENCE,
        word_timed=True,
    )


def pii_words(segments: list[Segment], hit: PIIHit) -> list[tuple[int, int]]:
    """(segment index, word index) of every word a hit covers, in segments that have words."""
    out = []
    for idx, start, end in hit.parts:
        seg = segments[idx]
        if seg.words:
            triples = [(w.start_s, w.end_s, w.text) for w in seg.words]
            out += [(idx, k) for k in covered_words(seg.text, triples, [(start, end)])]
    return out


# How far a word-timed PII span reaches into the pause on either side of its words, up to the word
# next to it (or the channel's next segment). Word ends from the alignment heads come out early and a
# digit the first pass did not write has no word at all: on tools/word_calls dev calls the span
# ended inside, or before, a card's last digit in 4 of 20 numbers (13-100 % of that digit's audio
# left). A pause costs nothing to cut; the neighbouring words, as timed, are never reached.
PAUSE_REACH_S = 1.0


def pii_times(segments: list[Segment], hit: PIIHit) -> tuple[float, float, bool]:
    """A hit's times: its words' where every part's segment has words (widened into the pauses
    around them, :data:`PAUSE_REACH_S`), else its segments'."""
    covered = pii_words(segments, hit)
    if not covered or any(not segments[idx].words for idx, _, _ in hit.parts):
        return hit.start_s, hit.end_s, False
    words = {idx: segments[idx].words or [] for idx, _, _ in hit.parts}
    i, k = min(covered, key=lambda ik: words[ik[0]][ik[1]].start_s)
    j, m = max(covered, key=lambda jm: words[jm[0]][jm[1]].end_s)
    head, tail = words[i], words[j]
    # a digit heard as a word at the number's edge ("is for 1 3 …") is the number's first or last digit
    while k and _digit_like(head[k - 1].text):
        k -= 1
    while m + 1 < len(tail) and _digit_like(tail[m + 1].text):
        m += 1
    start, end = _widened(segments, (i, head, k), (j, tail, m))
    return start, end, True


def _widened(
    segments: list[Segment], first: tuple[int, list[Word], int], last: tuple[int, list[Word], int]
) -> tuple[float, float]:
    """From the start of word ``first`` = (segment index, its words, word index) to the end of word
    ``last``, each edge reaching into the pause beside it (:data:`PAUSE_REACH_S`), up to the word
    next to it or the channel's neighbouring segment."""
    (i, head, k), (j, tail, m) = first, last
    before = head[k - 1].end_s if k else _previous_end(segments, i)
    after = tail[m + 1].start_s if m + 1 < len(tail) else _next_start(segments, j)
    start = min(head[k].start_s, max(before, head[k].start_s - PAUSE_REACH_S))
    end = max(tail[m].end_s, min(after, tail[m].end_s + PAUSE_REACH_S))
    return round(start, 3), round(end, 3)


def _previous_end(segments: list[Segment], idx: int) -> float:
    """Where the speech before segment ``idx`` on its channel ends (its segment's edge is the
    model's guess: a digit it did not write can lie outside)."""
    seg = segments[idx]
    ends = [s.end_s for s in segments if s.channel == seg.channel and s.end_s <= seg.start_s]
    return max(ends, default=0.0)


def _next_start(segments: list[Segment], idx: int) -> float:
    """Where the next speech on segment ``idx``'s channel starts (none: no bound)."""
    seg = segments[idx]
    starts = [s.start_s for s in segments if s.channel == seg.channel and s.start_s >= seg.end_s]
    return min(starts, default=float("inf"))


# a zero as the first pass wrote it at the end of a card on 8 kHz u-law ("… 6 2 8 Neuro.")
ZERO_SOUNDALIKES = frozenset({"nero", "neuro", "nearo", "near-o", "niro"})


def _digit_like(word: str) -> bool:
    """A word ASR wrote for a digit next to a number: a homophone ("for", "won"), a zero heard as a
    name ("Neuro"), or a digit glued to letters ("8mph"): the audio under it is the number's."""
    w = word.strip(" ,.;:!?-").lower()
    return w in DIGIT_HOMOPHONES or w in ZERO_SOUNDALIKES or any(ch.isdigit() for ch in w)


def _redacted_words(
    segments: list[Segment], hits: list[PIIHit], long_runs: list[bool], unheard: Ranges
) -> list[list[Word] | None]:
    """Each segment's words with a PII word's text as its label, an unheard number's as the
    backstop's; in a segment whose long digit run the backstop masked, every word with a digit too
    (its text must not say what the segment no longer does)."""
    labels: dict[tuple[int, int], str] = {}
    for hit in hits:
        labels.update((key, REDACTION_LABEL[hit.type]) for key in pii_words(segments, hit))
    for idx, ranges in unheard.items():
        triples = [(w.start_s, w.end_s, w.text) for w in segments[idx].words or []]
        labels.update(((idx, k), BACKSTOP_LABEL) for k in covered_words(segments[idx].text, triples, ranges))
    out: list[list[Word] | None] = []
    for i, seg in enumerate(segments):
        if seg.words is None:
            out.append(None)
            continue
        words = []
        for k, w in enumerate(seg.words):
            text = labels.get((i, k), w.text)
            if long_runs[i] and any(ch.isdigit() for ch in text):
                text = BACKSTOP_LABEL
            words.append(w.model_copy(update={"text": text}))
        out.append(words)
    return out

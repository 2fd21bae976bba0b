"""Where to decode again for numbers: the first pass's segments -> regions of call audio. Pure.

Whisper base writes a long number read digit by digit badly (digits merged, dropped or
heard as words: "6264M and time 16364269"), so cards, IDs and phone numbers fail their
checks or stop looking like numbers. A second decode of just the stretch where a number
is said, with a prompt of digits read one by one, writes most of them digit for digit
(:mod:`pipeline.asr.number_pass`). This module decides which stretches: a segment that
says a number (:func:`pipeline.numbers.spoken.says_number`) plus the same channel's
following segments that carry the number on (a slowly read number comes out of the first
pass in short pieces), padded a little, each region at most ``max_len_s``; and which regions
are worth a last, digits-only decode (:func:`worth_digits_only`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from pipeline.asr.transcript import Segment
from pipeline.numbers.normalize import normalize
from pipeline.numbers.spoken import (
    DIGIT_RUN,
    announces_number,
    continues_number,
    digit_count,
    longest_digit_run,
    names_amount,
    reads_tail,
    says_number,
)
from pipeline.numbers.validators import classify_likely, classify_number

MAX_GAP_S = 2.0  # a pause inside a number read in groups
PAD_S = 0.3  # audio kept either side of the first pass's segment times (they are cut tight)
MAX_REGION_S = 28.0  # one decoder window, with room for the padding
# kept before / after where a long segment's text places its number (its characters spread evenly
# over the segment's time): room for the cue ("my card number is") and for uneven speech
NUMBER_LEAD_S = 4.0
NUMBER_TAIL_S = 3.0
EXTEND_MOST_S = 2.0  # a region grown to the speech around it, by at most this either side
MIN_ACCEPT_DIGITS = 8  # shorter than any card, resident ID or phone number
MAX_ACCEPT_DIGITS = 24  # longer than any (19 digits) with a misheard digit or two: a repetition loop
# faster than anyone reads digits. In tools/eval_qa's transcripts of seeds 1-13, every number said
# ran at 5 digits a second or less over its first-pass segment (a Mandarin mobile in 2.4 s); the two
# faster ones, 21 digits in 1.9 s, were read where no number was said
MAX_DIGITS_PER_S = 7.0
_SENTENCE_END = re.compile(r"[.?!。？！]")
_ITEM = re.compile(r"[0-9]+|[^\W\d_]+")
MAX_LOOP_PERIOD = 4
_CHECKED = ("bank_card", "cn_resident_id")  # kinds with a check digit
MAX_NUMBER_GAP_CHARS = 12  # between two digits of one number read out ("6264M and time 1636")
REPEAT_GRAM = 4
LOOP_COPIES = 6  # "8, 8, 8" (even misheard as "9, 9, 9, 9") is a number; six copies of the same are a loop


@dataclass(frozen=True)
class NumberRegion:
    """A stretch of one channel to decode again; ``segments`` are the indices (in the call's
    segment list) of the first-pass segments its text replaces."""

    channel: int
    start_s: float
    end_s: float
    language: str
    segments: tuple[int, ...]

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


def plan_number_regions(
    segments: Sequence[Segment],
    duration_s: float,
    languages: Sequence[str] = ("en", "zh"),
    max_gap_s: float = MAX_GAP_S,
    pad_s: float = PAD_S,
    max_region_s: float = MAX_REGION_S,
) -> list[NumberRegion]:
    """Regions of a call where a number seems to be said, in call order; only segments in one
    of ``languages`` (the languages a digit prompt exists for) open a region."""
    regions: list[NumberRegion] = []
    for channel in sorted({s.channel for s in segments}):
        order = sorted((i for i, s in enumerate(segments) if s.channel == channel), key=lambda i: segments[i].start_s)
        n = 0
        while n < len(order):
            first = segments[order[n]]
            if first.language not in languages or not says_number(first.text):
                n += 1
                continue
            taken = [order[n]]
            n += 1
            while n < len(order):
                seg, prev = segments[order[n]], segments[taken[-1]]
                if seg.start_s - prev.end_s > max_gap_s or seg.end_s - first.start_s > max_region_s - 2 * pad_s:
                    break
                if not (continues_number(seg.text) or says_number(seg.text)):
                    break
                taken.append(order[n])
                n += 1
            start = max(0.0, first.start_s - pad_s)
            end = min(duration_s, segments[taken[-1]].end_s + pad_s) if duration_s > 0 else segments[taken[-1]].end_s
            if end - start > max_region_s:  # one segment alone longer than a window: leave it
                continue
            regions.append(NumberRegion(channel, start, end, first.language, tuple(taken)))
    return sorted(regions, key=lambda r: (r.start_s, r.channel))


def merge_number_texts(segments: Sequence[Segment], replacements: Sequence[tuple[NumberRegion, str]]) -> list[Segment]:
    """The call's segments with each region's first-pass segments replaced by one segment holding
    the region's new text (the first segment's start to the last one's end), in call order."""
    dropped: set[int] = set()
    added: list[Segment] = []
    for region, text in replacements:
        parts = [segments[i] for i in region.segments]
        dropped.update(region.segments)
        first, last = parts[0], parts[-1]
        added.append(
            Segment(
                role=first.role,
                channel=first.channel,
                start_s=first.start_s,
                end_s=last.end_s,
                text=text,
                language=first.language,
            )
        )
    kept = [s for i, s in enumerate(segments) if i not in dropped]
    return sorted(kept + added, key=lambda s: (s.start_s, s.channel))


def around_number(
    region: NumberRegion, segments: Sequence[Segment], lead_s: float = NUMBER_LEAD_S, tail_s: float = NUMBER_TAIL_S
) -> NumberRegion:
    """The region cut to the stretch around its number: a packed window's segment can run for
    20 s and more on a mono call, and decoding all of it again cost as much as the first pass,
    though only the number's digits can change (:func:`splice_number`). Where the number sits is
    read from the text, its characters taken as spread evenly over their segment's time."""
    parts = [segments[i] for i in region.segments]
    text = " ".join(p.text for p in parts)
    at = _number_span(text)
    if at is None:
        return region
    times: list[float] = []
    for p in parts:  # call time of each character of ``text`` (the joining space: its segment's end)
        n = len(p.text)
        times += [p.start_s + (p.end_s - p.start_s) * k / max(n, 1) for k in range(n)] + [p.end_s]
    start = max(region.start_s, times[at[0]] - lead_s)
    end = min(region.end_s, times[min(at[1], len(times) - 1)] + tail_s)
    return replace(region, start_s=start, end_s=max(end, start))


def extend_to_speech(
    region: NumberRegion,
    spans: Sequence[tuple[float, float]],
    max_region_s: float = MAX_REGION_S,
    most_s: float = EXTEND_MOST_S,
) -> NumberRegion:
    """The region grown to the speech spans (VAD, call time) it overlaps, by at most ``most_s``
    either side and to at most ``max_region_s`` long: first-pass segment times can be off by
    seconds where a window joined turns, and a number cut short fails every check; a span of a
    mono call can hold 25 s of both parties' turns, not all of it worth a second decode."""
    start, end = region.start_s, region.end_s
    for lo, hi in spans:
        if lo < region.end_s and hi > region.start_s:
            start, end = min(start, max(lo, region.start_s - most_s)), max(end, min(hi, region.end_s + most_s))
    start = max(start, region.end_s - max_region_s)
    end = min(end, start + max_region_s)
    return replace(region, start_s=start, end_s=end)


def cut_loop(text: str) -> str:
    """``text`` up to a repetition loop: a run of 1-4 items (digit groups or words) said six
    times in a row is kept once ("6, 6, 6, 6, 6, …" -> "6"); loop-free text is returned whole."""
    items = list(_ITEM.finditer(text))
    words = [m.group().lower() for m in items]
    for i in range(len(words)):
        for period in range(1, MAX_LOOP_PERIOD + 1):
            if i + LOOP_COPIES * period > len(words):
                break
            unit = words[i : i + period]
            if all(words[i + k * period : i + (k + 1) * period] == unit for k in range(1, LOOP_COPIES)):
                return text[: items[i + period - 1].end()]
    return text


def loops(text: str) -> bool:
    """Whether a decode of a number region got stuck: a repetition loop, or more digits in a row
    than any number has."""
    return cut_loop(text) != text or longest_digit_run(text) > MAX_ACCEPT_DIGITS


def loops_on_digits(text: str) -> bool:
    """Whether a decode of a number region got stuck while writing digits (the case a decode
    at a temperature may mend): it loops and holds a digit."""
    return loops(text) and digit_count(text) > 0


def invented_rest(text: str, duration_s: float) -> bool:
    """Whether the text of a region's rest (the audio after the model ended a number decode early,
    decoded once more) is the digit prompt speaking rather than the audio: it loops, or holds more
    digits than ``duration_s`` of speech could (``MAX_DIGITS_PER_S``). Over the last 1.2 s of an
    engineer's visit being booked, the rest read "The ID is 1, 0, 0, 0, 0, 0, 0"; joined to the
    region's good text ("… is 4, 1, 4, 7, 9, 4. The engineer can confirm on the") it made the whole
    region read as a loop, decoded four times more at temperatures, the coolest taken: "414, 4, 5, 4"."""
    return loops(text) or digit_count(text) > MAX_DIGITS_PER_S * duration_s


def reads_as_number(text: str) -> bool:
    """Whether a decode of a number region reads as one long number, loop-free."""
    return not loops(text) and longest_digit_run(text) >= MIN_ACCEPT_DIGITS


def accepted_text(new: str, old: str, duration_s: float) -> str | None:
    """The second decode's text of a region of ``duration_s`` if it reads as a longer number than
    the first pass's, cut before a repetition loop; None to keep the first pass. A number longer
    than the region's audio could hold (``MAX_DIGITS_PER_S``) is never taken: prompted with digits,
    the model sometimes goes on reading them where none are said. Where the first pass's own number
    is such a one, the second decode's loop-free text replaces it even without a number."""
    new = cut_loop(new)
    if longest_digit_run(new) > MAX_ACCEPT_DIGITS:
        ends = [m.end() for m in _SENTENCE_END.finditer(new) if longest_digit_run(new[: m.end()]) <= MAX_ACCEPT_DIGITS]
        if not ends:
            return None
        new = new[: ends[-1]]
    run, most = longest_digit_run(new), MAX_DIGITS_PER_S * duration_s
    if run > most:
        return None
    if longest_digit_run(old) > most:
        return new if _ITEM.search(new) else None
    return new if run >= MIN_ACCEPT_DIGITS and run >= longest_digit_run(old) else None


def worth_decoding(first_pass: str) -> bool:
    """Is a region whose first-pass text is ``first_pass`` worth a second decode: it names a number
    being given ("number", "card", 卡号, 手机), holds a digit (a spoken digit word counts) and no
    number that passes a checksum (a card's Luhn digit, a resident ID's check digit). A region of
    cue words only ("may I have your card number?") has no number to mend, and prompted with digits
    the model wrote some into it; digits without such a cue (dates, amounts, times, counts) are no
    personal number, and decoding them again cost 1.5x on the benchmark's check part; a checked
    number is already right, and the second decode could only make it worse. So is a number's last
    four digits read as four digits ("我的卡尾号是3759", the check callers are most often asked
    for): on a check part (benchK) these were all the Mandarin regions, decoded again at
    temperatures and with digits locked, and the second decode read "3750" or "13759"."""
    if digit_count(first_pass) == 0 or not announces_number(first_pass) or reads_tail(first_pass):
        return False
    text = normalize(first_pass).text
    for m in DIGIT_RUN.finditer(text):
        digits, x = m.group().replace(" ", ""), text[m.end() : m.end() + 1] in ("x", "X")
        if classify_number(digits) in _CHECKED or (x and classify_number(digits, x_suffix=True)):
            return False
    return True


def splice_number(old: str, new: str) -> str:
    """``old`` with its number (the stretch of it with the most digits, spoken digit words counted,
    where no more than ``MAX_NUMBER_GAP_CHARS`` other characters part two digits) replaced by
    ``new``'s: the second decode only ever changes the digits of a region. Prompted with digits,
    the model hears the words around a number worse ("My mobile number is" came back "My total
    number is", 卡号是 as 卡后为号是), so those stay the first pass's."""
    old_at, new_at = _number_span(old), _number_span(new)
    if old_at is None:
        return old
    middle = new[new_at[0] : new_at[1]] if new_at is not None else ""
    return (old[: old_at[0]] + middle + old[old_at[1] :]).strip()


def repeats_itself(new: str, old: str) -> bool:
    """Whether the second decode says a run of words more often than the first pass did: it read
    part of its region twice ("… that looks too high. The phone is 1, 0, … and that looks too
    high."), and its digits are not to be trusted either."""
    counts_new, counts_old = _grams(new), _grams(old)
    return any(n > counts_old.get(gram, 0) for gram, n in counts_new.items() if n > 1)


def _grams(text: str) -> dict[tuple[str, ...], int]:
    """Counts of the runs of ``REPEAT_GRAM`` words (characters, in Chinese) that hold no digit."""
    words = [w for w in _ITEM.findall(normalize(text).text.lower()) if not w.isdigit()]
    units = [ch for w in words for ch in w] if words and all(_is_cjk(w[0]) for w in words) else words
    out: dict[tuple[str, ...], int] = {}
    for i in range(len(units) - REPEAT_GRAM + 1):
        gram = tuple(units[i : i + REPEAT_GRAM])
        out[gram] = out.get(gram, 0) + 1
    return out


def _is_cjk(ch: str) -> bool:
    return "\u3400" <= ch <= "\u9fff"


def _number_span(text: str) -> tuple[int, int] | None:
    """Where the stretch of ``text`` with the most digits starts and ends, as offsets in ``text``
    (None: no digit); a stretch ends where more than MAX_NUMBER_GAP_CHARS characters hold no digit."""
    norm = normalize(text)
    at = [i for i, ch in enumerate(norm.text) if ch.isdigit()]
    if not at:
        return None
    stretches: list[list[int]] = [[at[0]]]
    for i in at[1:]:
        if i - stretches[-1][-1] > MAX_NUMBER_GAP_CHARS:
            stretches.append([])
        stretches[-1].append(i)
    best = max(stretches, key=len)  # the first of the longest
    return norm.starts[best[0]], norm.ends[best[-1]]


def worth_digits_only(text: str, first_pass: str) -> bool:
    """Is a region whose decode reads ``text`` (the first pass's: ``first_pass``) worth decoding
    again with digits only after the first digit: a number announced in either text and begun
    ("my mobile number is 1 time, 0, 8, …") that does not read as one, and no amount in either
    (forced to digits, "240 dollars" became "200,000,000, 40,000")."""
    return (
        not _reads_as_kind(text)
        and digit_count(text) > 0
        and (announces_number(text) or announces_number(first_pass))
        and not (names_amount(text) or names_amount(first_pass))
    )


def _reads_as_kind(text: str) -> bool:
    """Does a run of digits in ``text`` read as a card, resident ID or phone number, checked
    or by its shape (:mod:`pipeline.numbers.validators`)?"""
    runs = (m.group().replace(" ", "") for m in DIGIT_RUN.finditer(normalize(text).text))
    return any(classify_number(d) or classify_likely(d) for d in runs)

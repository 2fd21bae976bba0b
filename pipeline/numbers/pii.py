"""Personal data in speech: bank cards, Chinese resident IDs, phone numbers, US social
security and bank account numbers, a card's security code or PIN; and redaction.

Detection runs on normalised text, so numbers spoken digit by digit ("六二二二…",
"four five three two…") are found like written ones. Numbers are read in groups
(people say cards in fours, phones in threes and fours), so a candidate is any run
of digit groups separated by spaces, dashes or commas, in any script's digits — also across
consecutive segments of the same channel and role when the pause is short, or when the number
visibly carries on after a longer one (:mod:`pipeline.numbers.pii_join`). Candidates are
validated (Luhn; ISO 7064 MOD 11-2 and a real birth date; phone numbering plans)
to keep order numbers and amounts out.

ASR mishears long numbers (a repeated digit merged, one dropped or doubled), so a
run that fails its checksum is still taken when its shape says what it is: 13-19
digits is a likely card (redaction fails closed on card-length runs), 17-19
characters around a plausible birth date a likely resident ID, 10-12 digits
starting 1[3-9] a likely CN mobile. A run of 9-20 digits that none of that takes is
still taken right after a cue naming its kind ("my card number is …", 身份证号是…;
:mod:`pipeline.numbers.spoken`). Social security and account numbers carry no check, so
they are taken on their cue ("my social is …", "account number", 账号), as is a card's security
code or PIN ("the CVV is 123", 密码是…; PCI DSS forbids keeping them at all), and a social security
number also by its written shape alone: three groups of 3, 2 and 4 digits that make a valid
one ("523-45-6789"). Runs of card or ID length only together, across a few stray words ASR
wrote inside the number ("196, I'm 9423", "15次 4810"), are masked as one. Those hits carry a
lower confidence; digit groups right next to a hit in the same run are masked with it. A hit
reports type, role, time and confidence only — never the digits — and the original text range
it covers, for redaction.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pipeline.numbers.model import PIIType, SegmentText
from pipeline.numbers.normalize import Normalized
from pipeline.numbers.pii_join import INTERJECTIONS, MAX_JOIN_GAP_S, MIN_RESUME_DIGITS, channel_stream
from pipeline.numbers.spoken import cue_end, cued_type, misheard_secret, names_amount
from pipeline.numbers.validators import classify_likely, classify_number, ssn_valid

PII_TYPES: tuple[PIIType, ...] = ("bank_card", "cn_resident_id", "phone", "us_ssn", "account_number", "card_secret")
REDACTION_LABEL: dict[PIIType, str] = {
    "bank_card": "[CARD]", "cn_resident_id": "[ID]", "phone": "[PHONE]", "us_ssn": "[SSN]", "account_number": "[ACCOUNT]",
    "card_secret": "[SECRET]",
}
# no checksum: taken by cue or shape only
UNCHECKED_TYPES: tuple[PIIType, ...] = ("us_ssn", "account_number", "card_secret")
SSN_GROUPS = (3, 2, 4)  # how a social security number is written: 523-45-6789
MAX_NUMBER_DIGITS = 20  # longer than any card (19), resident ID (18) or E.164 number (15)
MIN_NUMBER_DIGITS = 8  # shorter than any number taken (a '+' number of 8 digits)
LIKELY_CONFIDENCE = 0.6  # a number taken by its shape, its checksum failed (ASR error)
CUED_CONFIDENCE = 0.5  # a digit run taken on the cue before it alone (pipeline.numbers.spoken)
MAX_ABSORB_DIGITS = 24  # a hit swallows neighbouring digit groups up to this length
BRIDGED_CONFIDENCE = 0.4  # digit runs joined across a stray word (_bridged_numbers)
MISHEARD_CONFIDENCE = 0.3  # the rest of an answer to a question for a code, too few digits heard
# a number opening a segment (within its first ANSWER_LEAD_CHARS) that starts within ANSWER_WITHIN_S
# of the end of the segment before it answers that segment's cue: "the security code on the back?" / "731"
ANSWER_WITHIN_S = 8.0
ANSWER_LEAD_CHARS = 24

_GROUP = re.compile(r"(?<![0-9a-z])(\+?)([0-9]+)(x?)(?![0-9a-z])")
# between two digit runs: one to three short words or one or two Chinese characters, no
# digit, no line break (a turn change), none of the words that put numbers side by side as
# dates, times or amounts ("to" stays: ASR writes it for "two" as often as for a range)
_BRIDGE = re.compile(
    r"(?!.*\b(?:at|on|from|till|until|by|of|or|in|per|past|half)\b)(?!.*[年月日号点分秒元块到至])"
    r"(?: [a-z']{1,5}(?: [a-z']{1,5}){0,2} | ?[\u4e00-\u9fff]{1,2} ?)"
)
# or what the other party says while a number is read out ("go on", on a mono call), between two
# pieces read in groups of MIN_RESUME_DIGITS or more ("4532 0151 go on 1283 0366", not "50 go on 20")
_INTERJECTION_BRIDGE = re.compile(rf" ?(?:{INTERJECTIONS.pattern}) ?")


@dataclass(frozen=True)
class PIIHit:
    """One number found: its type, who said it, when, the original text it covers, and how
    sure the detector is (1.0: it passed its checks; lower: taken by its shape)."""

    type: PIIType
    role: str
    start_s: float
    end_s: float
    parts: tuple[tuple[int, int, int], ...]  # (segment index, original start, original end)
    confidence: float = 1.0


@dataclass(frozen=True)
class _Group:
    start: int  # in the channel stream
    end: int
    digits: str
    plus: bool
    x_suffix: bool


def find_pii(
    segments: Sequence[SegmentText],
    norms: Sequence[Normalized],
    types: Sequence[PIIType] = PII_TYPES,
    max_join_gap_s: float = MAX_JOIN_GAP_S,
) -> list[PIIHit]:
    """Every PII number in the call, per channel; ``norms[i]`` is ``normalize(segments[i].text)``."""
    hits: list[PIIHit] = []
    for channel in sorted({s.channel for s in segments}):
        order = [i for i, s in enumerate(segments) if s.channel == channel]
        stream, offsets = channel_stream(segments, norms, order, max_join_gap_s)
        groups = [
            _Group(m.start(), m.end(), m.group(2), m.group(1) == "+", m.group(3) == "x")
            for m in _GROUP.finditer(stream)
        ]
        untaken = []
        for chain in _chains(groups, stream):
            numbers = (_numbers_in_chain(chain) or _ssn_shaped(chain) or _cued_number(chain, stream)
                       or _answered_number(chain, stream, offsets, segments, norms))
            numbers = [_named_by_cue(number, chain, stream) for number in numbers]
            if not numbers:
                untaken.append(chain)
            for first, last, kind, confidence in numbers:
                if kind in types:
                    hits.append(_hit(kind, first.start, last.end, segments, norms, offsets, confidence))
        for first, last, kind in _bridged_numbers(untaken, stream):
            if kind in types:
                hits.append(_hit(kind, first.start, last.end, segments, norms, offsets, BRIDGED_CONFIDENCE))
    return sorted(hits, key=lambda h: (h.start_s, h.type))


def _chains(groups: list[_Group], stream: str) -> list[list[_Group]]:
    """Runs of digit groups separated by exactly one space (what separators normalise to)."""
    chains: list[list[_Group]] = []
    for group in groups:
        if chains and stream[chains[-1][-1].end : group.start] == " " and not chains[-1][-1].x_suffix:
            chains[-1].append(group)
        else:
            chains.append([group])
    return chains


def _bridged_numbers(untaken: list[list[_Group]], stream: str) -> list[tuple[_Group, _Group, PIIType]]:
    """Runs no check, shape or cue took, joined across a few short words ASR wrote inside a
    long number (a digit misheard as "I'm", "and I am"): together they are masked as one
    number when they reach card or ID length, or follow a cue naming their kind. Some piece
    must be read out in groups ("6 2", "4810 6494"): amounts said one after another ("50,
    then 20, then 100") are single numbers."""
    found: list[tuple[_Group, _Group, PIIType]] = []
    run: list[_Group] = []
    last: list[_Group] = []  # the chain that ends the run
    joined, read_out = 0, False
    for chain in [*untaken, []]:
        if chain and run and _bridges(last, chain, stream):
            run += chain
            last = chain
            joined += 1
            read_out = read_out or len(chain) > 1
            continue
        if joined and read_out:
            kind = classify_likely("".join(g.digits for g in run))
            if kind in ("bank_card", "cn_resident_id"):
                found.append((run[0], run[-1], kind))
            else:
                found += [(first, last, kind) for first, last, kind, _ in _cued_number(run, stream)]
        run, last, joined, read_out = list(chain), chain, 0, len(chain) > 1
    return found


def _bridges(before: list[_Group], after: list[_Group], stream: str) -> bool:
    """May the text between these two chains be inside one number (see _BRIDGE)?"""
    if _BRIDGE.fullmatch(stream, before[-1].end, after[0].start):
        return True
    pieces = (sum(len(g.digits) for g in before), sum(len(g.digits) for g in after))
    return min(pieces) >= MIN_RESUME_DIGITS and bool(_INTERJECTION_BRIDGE.fullmatch(stream, before[-1].end, after[0].start))


_Number = tuple[int, int, PIIType, float]  # first group, last group, type, confidence


def _numbers_in_chain(chain: list[_Group]) -> list[tuple[_Group, _Group, PIIType, float]]:
    """Checked numbers first, then likely ones in the groups left over, then the leftover
    groups touching a number are masked with it. Each pass is linear in the chain."""
    numbers: list[_Number] = [(a, b, kind, 1.0) for a, b, kind in _take_runs(chain, _checked)]
    taken = [False] * len(chain)
    for a, b, _, _ in numbers:
        taken[a : b + 1] = [True] * (b - a + 1)
    start = 0
    while start < len(chain):
        if taken[start]:
            start += 1
            continue
        end = start
        while end + 1 < len(chain) and not taken[end + 1]:
            end += 1
        for a, b, kind in _take_runs(chain[start : end + 1], _likely):
            numbers.append((start + a, start + b, kind, LIKELY_CONFIDENCE))
        start = end + 1
    return [(chain[a], chain[b], kind, conf) for a, b, kind, conf in _absorb(sorted(numbers), chain)]


def _cued_number(chain: list[_Group], stream: str) -> list[tuple[_Group, _Group, PIIType, float]]:
    """A chain no check or shape took, taken whole on the cue before it ("my card number is …")."""
    kind = _cue_kind(chain, stream)
    return [(chain[0], chain[-1], kind, CUED_CONFIDENCE)] if kind else []


def _answered_number(
    chain: list[_Group], stream: str, offsets: list[tuple[int, int]], segments: Sequence[SegmentText],
    norms: Sequence[Normalized],
) -> list[tuple[_Group, _Group, PIIType, float]]:
    """A chain opening its segment, taken on the cue that ends the segment before it (the other
    party's, or the same channel's on a mono call): the cue is often said only in the question
    ("… and the security code on the back?" / "The code is 731")."""
    first = chain[0]
    at, idx = next((at, idx) for at, idx in reversed(offsets) if at <= first.start)
    lead = stream[at : first.start]
    if len(lead) - cue_end(lead) > ANSWER_LEAD_CHARS or names_amount(lead):
        return []
    question = question_before(segments, idx)
    if question is None:
        return []
    line_end = stream.find("\n", chain[-1].end)
    after = stream[chain[-1].end : line_end if line_end >= 0 else len(stream)]
    digits = "".join(g.digits for g in chain)
    kind = cued_type(norms[question].text, digits, after)
    if kind is None and misheard_secret(norms[question].text, lead, digits, after):
        # the answer from its first digit to its segment's end: what was heard as words is the code too
        end = at + len(norms[idx].text)
        return [(first, _Group(end, end, "", False, False), "card_secret", MISHEARD_CONFIDENCE)]
    return [(first, chain[-1], kind, CUED_CONFIDENCE)] if kind else []


def question_before(segments: Sequence[SegmentText], idx: int) -> int | None:
    """The segment a turn answers: the one that ended last before segment ``idx`` started (or half a
    second into it), within ``ANSWER_WITHIN_S`` (the other party's, or the same channel's on a mono call)."""
    answer = segments[idx]
    before = [i for i, q in enumerate(segments) if q.start_s < answer.start_s and q.end_s <= answer.start_s + 0.5]
    if not before:
        return None
    question = max(before, key=lambda i: segments[i].end_s)
    return question if answer.start_s - segments[question].end_s <= ANSWER_WITHIN_S else None


def _cue_kind(groups: list[_Group], stream: str) -> PIIType | None:
    """The kind the cue right before these consecutive groups names, if they may be taken on it."""
    digits = "".join(g.digits for g in groups)
    line_start = stream.rfind("\n", 0, groups[0].start) + 1
    line_end = stream.find("\n", groups[-1].end)
    after = stream[groups[-1].end : line_end if line_end >= 0 else len(stream)]
    return cued_type(stream[line_start : groups[0].start], digits, after)


def _named_by_cue(number: tuple[_Group, _Group, PIIType, float], chain: list[_Group], stream: str
                  ) -> tuple[_Group, _Group, PIIType, float]:
    """A phone number by its pattern alone (no '+') that opens its chain right after a cue naming
    a kind with no check is that kind: "my account number is 4262129972" (any ten digits fit the
    North American plan about two times in three)."""
    first, last, kind, _ = number
    if kind != "phone" or first.plus or first is not chain[0]:
        return number
    end = next(i for i, g in enumerate(chain) if g is last)
    cued = _cue_kind(chain[: end + 1], stream)
    return (first, last, cued, CUED_CONFIDENCE) if cued in UNCHECKED_TYPES else number


def _ssn_shaped(chain: list[_Group]) -> list[tuple[_Group, _Group, PIIType, float]]:
    """A chain no check or other shape took that is written as a social security number is: 3, 2
    and 4 digits, valid (taken by its shape: nothing checks it)."""
    digits = "".join(g.digits for g in chain)
    if tuple(len(g.digits) for g in chain) == SSN_GROUPS and ssn_valid(digits):
        return [(chain[0], chain[-1], "us_ssn", LIKELY_CONFIDENCE)]
    return []


def _absorb(numbers: list[_Number], chain: list[_Group]) -> list[_Number]:
    """Fail closed: stray digit groups right before or after a number (a misheard digit split
    off, a repeated one) are masked with it; a phone that grows to card length becomes a card."""
    out: list[_Number] = []
    for n, (a, b, kind, conf) in enumerate(numbers):
        lo = out[-1][1] + 1 if out else 0
        hi = numbers[n + 1][0] - 1 if n + 1 < len(numbers) else len(chain) - 1
        length = sum(len(g.digits) for g in chain[a : b + 1])
        while a > lo and length + len(chain[a - 1].digits) <= MAX_ABSORB_DIGITS:
            a -= 1
            length += len(chain[a].digits)
        while b < hi and length + len(chain[b + 1].digits) <= MAX_ABSORB_DIGITS:
            b += 1
            length += len(chain[b].digits)
        if kind == "phone" and length >= 13:
            kind, conf = "bank_card", LIKELY_CONFIDENCE
        out.append((a, b, kind, conf))
    return out


def _checked(digits: str, first: _Group, last: _Group) -> PIIType | None:
    return classify_number(digits, plus=first.plus, x_suffix=last.x_suffix)


def _likely(digits: str, first: _Group, last: _Group) -> PIIType | None:
    return classify_likely(digits + ("x" if last.x_suffix else ""))


def _take_numbers(chain: list[_Group]) -> list[tuple[_Group, _Group, PIIType]]:
    """Checked numbers only, as groups (first, last, type)."""
    return [(chain[a], chain[b], kind) for a, b, kind in _take_runs(chain, _checked)]


def _take_runs(
    chain: list[_Group], classify: Callable[[str, _Group, _Group], PIIType | None]
) -> list[tuple[int, int, PIIType]]:
    """Left to right, the longest run of whole groups that ``classify`` names a type.

    No personal number has more than ``MAX_NUMBER_DIGITS`` digits and every group has at
    least one, so a run starting at group i ends within the next few groups: the search is
    linear in the chain (an ASR repetition loop can chain thousands of groups).
    """
    found = []
    i = 0
    while i < len(chain):
        taken = False
        last = _last_candidate(chain, i)
        digits = "".join(g.digits for g in chain[i : last + 1])  # one join per start, sliced below
        cut = len(digits)
        for j in range(last, i - 1, -1):
            if cut < MIN_NUMBER_DIGITS:
                break  # shorter still as j falls
            kind = classify(digits[:cut], chain[i], chain[j])
            cut -= len(chain[j].digits)
            if kind is not None:
                found.append((i, j, kind))
                i, taken = j + 1, True
                break
        if not taken:
            i += 1
    return found


def _last_candidate(chain: list[_Group], i: int) -> int:
    """The last group a number starting at group i may end on: at most MAX_NUMBER_DIGITS
    digits, and no '+' after its first group."""
    j, length = i, len(chain[i].digits)
    while j + 1 < len(chain) and not chain[j + 1].plus and length + len(chain[j + 1].digits) <= MAX_NUMBER_DIGITS:
        j += 1
        length += len(chain[j].digits)
    return j


def _hit(
    kind: PIIType,
    start: int,
    end: int,
    segments: Sequence[SegmentText],
    norms: Sequence[Normalized],
    offsets: list[tuple[int, int]],
    confidence: float = 1.0,
) -> PIIHit:
    parts = []
    for seg_start, idx in offsets:
        seg_end = seg_start + len(norms[idx].text)
        lo, hi = max(start, seg_start), min(end, seg_end)
        # a segment with no digit of the number ("go on" between its halves) keeps its words
        if lo < hi and any(ch.isdigit() for ch in norms[idx].text[lo - seg_start : hi - seg_start]):
            o_start, o_end = norms[idx].original_span(lo - seg_start, hi - seg_start)
            parts.append((idx, o_start, o_end))
    first, last = segments[parts[0][0]], segments[parts[-1][0]]
    return PIIHit(kind, first.role, first.start_s, last.end_s, tuple(parts), confidence)


def redact_texts(
    segments: Sequence[SegmentText],
    hits: Sequence[PIIHit],
    also: Mapping[int, Sequence[tuple[int, int, str]]] | None = None,
) -> list[str]:
    """Each segment's original text with every PII range replaced by its type label (and the
    ranges ``also`` gives per segment index, each by its own label)."""
    ranges: dict[int, list[tuple[int, int, str]]] = {i: list(r) for i, r in (also or {}).items()}
    for hit in hits:
        for idx, o_start, o_end in hit.parts:
            ranges.setdefault(idx, []).append((o_start, o_end, REDACTION_LABEL[hit.type]))
    texts = []
    for idx, seg in enumerate(segments):
        texts.append(_redact(seg.text, ranges.get(idx, [])))
    return texts


def _redact(text: str, ranges: list[tuple[int, int, str]]) -> str:
    out, pos = [], 0
    for start, end, label in sorted(ranges):
        if start < pos:  # overlaps the previous range: extend it
            start = pos
            label = ""
        out.append(text[pos:start])
        out.append(label)
        pos = max(pos, end)
    out.append(text[pos:])
    return "".join(out)

"""The fail-closed backstop of redaction: any written run of 12 or more digits that the PII
detector left (a card number that fails Luhn, an ID with a bad check digit) is masked too, also
where the model cut it over two segments of one party ("…号码是32010211967" / "618102010").

A digit is any character with a digit value, whatever its script (٤, ४, ４, ④, ⁴). Used on the
transcript a worker publishes (:mod:`pipeline.stages.redaction`) and on the QA engine's own
redacted copy and evidence, so a transcript that reached QA unredacted is quoted the same way.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.numbers.model import SegmentText
from pipeline.numbers.normalize import Normalized, ascii_digits
from pipeline.numbers.pii import PIIHit, redact_texts
from pipeline.numbers.pii_join import MAX_JOIN_GAP_S
from pipeline.numbers.unheard import Ranges, unheard_ranges

BACKSTOP_LABEL = "[NUMBER]"
# 12+ digits, allowing the separators people and ASR put between groups or digits: space, dash,
# dot, comma, and a comma or dot followed by a space ("4, 5, 3, 2, …" is how a read number comes out).
# Matched on the text with its digits as ASCII (ascii_digits keeps every offset).
LONG_DIGIT_RUN = re.compile(r"(?<![0-9])[0-9](?:(?:[ \-.,]|[,.] )?[0-9]){11,}(?![0-9])")


def mask_long_digit_runs(text: str) -> str:
    """``text`` with every run of 12 or more digits, of any script, as ``[NUMBER]``."""
    out, pos = [], 0
    for m in LONG_DIGIT_RUN.finditer(ascii_digits(text)):
        out += [text[pos : m.start()], BACKSTOP_LABEL]
        pos = m.end()
    return "".join([*out, text[pos:]])


LONG_RUN_DIGITS = 12
MIN_PIECE_DIGITS = 4  # each side of a cut: an amount or a date ending one turn stays apart
_RUN = r"[0-9](?:(?:[ \-.,]|[,.] )?[0-9])*"
_ENDING_RUN = re.compile(rf"(?<![0-9]){_RUN}(?=[\s.,;:!?。，；：！？]*$)")
_OPENING_RUN = re.compile(rf"^\s*({_RUN})(?![0-9])")


def mask_runs_across(texts: Sequence[str], continues: Sequence[bool]) -> list[str]:
    """``texts`` with a digit run that ends one and a run that opens the next masked in both, where
    ``continues[i]`` says text i carries on text i-1 (one party, a short pause) and the two hold 12
    or more digits together, at least 4 each."""
    out = list(texts)
    for i in range(1, len(texts)):
        if not continues[i]:
            continue
        ending = _ENDING_RUN.search(ascii_digits(out[i - 1]))
        opening = _OPENING_RUN.match(ascii_digits(out[i]))
        if ending is None or opening is None:
            continue
        head, tail = (sum(ch.isdigit() for ch in m.group()) for m in (ending, opening))
        if min(head, tail) < MIN_PIECE_DIGITS or head + tail < LONG_RUN_DIGITS:
            continue
        out[i - 1] = out[i - 1][: ending.start()] + BACKSTOP_LABEL + out[i - 1][ending.end() :]
        out[i] = out[i][: opening.start(1)] + BACKSTOP_LABEL + out[i][opening.end(1) :]
    return out


def mask_backstop(segments: Sequence[SegmentText], texts: Sequence[str] | None = None) -> list[str]:
    """Each segment's text (or ``texts``, already labelled by the detector) through the backstop:
    long runs masked within a segment and across a party's consecutive segments a short pause apart."""
    out = [s.text for s in segments] if texts is None else list(texts)
    # grouped by party, not by the detector's joins (pii_join.channel_stream): on a mono call the
    # other party's "mm-hmm" between two pieces breaks a join there, and a backstop must fail closed
    parties: dict[tuple[int, str], list[int]] = {}
    for i in sorted(range(len(segments)), key=lambda i: segments[i].start_s):
        parties.setdefault((segments[i].channel, segments[i].role), []).append(i)
    for order in parties.values():
        continues = [
            k > 0 and segments[i].start_s - segments[order[k - 1]].end_s <= MAX_JOIN_GAP_S for k, i in enumerate(order)
        ]
        for i, text in zip(order, mask_runs_across([out[i] for i in order], continues), strict=True):
            out[i] = text
    return [mask_long_digit_runs(text) for text in out]


@dataclass(frozen=True)
class FailClosed:
    """A call's segments as redaction leaves them: the detector's ``hits`` labelled, then failed
    closed (the ``unheard`` stretches, :func:`pipeline.numbers.unheard.unheard_ranges`, and long
    digit runs as ``[NUMBER]``). The one composition the worker's redaction, its choice of the
    segments to time word by word, and the QA engine's redacted copy all read."""

    hits: list[PIIHit]
    unheard: Ranges
    texts: list[str]
    long_runs: list[bool]  # per segment: a long digit run masked in it

    def touched(self) -> list[int]:
        """Indices of the segments anything was taken out of."""
        parts = {idx for hit in self.hits for idx, _, _ in hit.parts}
        return sorted(parts | set(self.unheard) | {i for i, masked in enumerate(self.long_runs) if masked})


def fail_closed(segments: Sequence[SegmentText], norms: Sequence[Normalized], hits: Sequence[PIIHit]) -> FailClosed:
    """The segments with the detector's ``hits`` (found on ``norms``) and what fails closed taken out."""
    unheard = unheard_ranges(segments, norms, hits)
    labelled = redact_texts(segments, hits, as_numbers(unheard))
    texts = mask_backstop(segments, labelled)
    return FailClosed(list(hits), unheard, texts, [a != b for a, b in zip(labelled, texts, strict=True)])


def as_numbers(unheard: Ranges) -> dict[int, list[tuple[int, int, str]]]:
    """The unheard stretches as :func:`pipeline.numbers.pii.redact_texts` labels them: ``[NUMBER]``."""
    return {i: [(start, end, BACKSTOP_LABEL) for start, end in r] for i, r in unheard.items()}

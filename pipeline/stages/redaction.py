"""PII redaction of a transcript before it is published or written: nothing at rest in clear.

Detection is the QA package's pure detector (:func:`pipeline.qa.pii.find_pii`, spoken and
written numbers, joined across short pauses), and its redaction labels. This module adds
one fail-closed backstop on top: any written run of 12 or more digits that the detector
left (a card number that fails Luhn, an ID with a bad check digit) is masked too, since a
transcript leaving the worker cannot be un-published. A digit is any character with a digit
value, whatever its script (٤, ४, ４, ④, ⁴). Pure: no Kafka, no engine.
"""

from __future__ import annotations

import re

from pipeline.events import PIISpan, Transcript
from pipeline.qa.model import SegmentText
from pipeline.qa.normalize import ascii_digits, normalize
from pipeline.qa.pii import find_pii, redact_texts

BACKSTOP_LABEL = "[NUMBER]"
# 12+ digits, allowing the separators people and ASR put between groups or digits: space, dash,
# dot, comma, and a comma or dot followed by a space ("4, 5, 3, 2, …" is how a read number comes out).
# Matched on the text with its digits as ASCII (ascii_digits keeps every offset).
_LONG_DIGIT_RUN = re.compile(r"(?<![0-9])[0-9](?:(?:[ \-.,]|[,.] )?[0-9]){11,}(?![0-9])")


def redact_transcript(t: Transcript) -> Transcript:
    """The transcript with PII replaced by labels; ``pii`` lists what was found (type, role, times)."""
    segments = [SegmentText(s.role, s.channel, s.start_s, s.end_s, s.text) for s in t.segments]
    hits = find_pii(segments, [normalize(s.text) for s in segments])
    texts = [mask_long_digit_runs(text) for text in redact_texts(segments, hits)]
    return t.model_copy(
        update={
            "segments": [s.model_copy(update={"text": text}) for s, text in zip(t.segments, texts, strict=True)],
            "pii": [
                PIISpan(type=h.type, role=h.role, start_s=h.start_s, end_s=h.end_s, confidence=h.confidence)
                for h in hits
            ],
            "redacted": True,
        }
    )


def mask_long_digit_runs(text: str) -> str:
    """The fail-closed backstop: every run of 12 or more digits, of any script, as ``[NUMBER]``."""
    out, pos = [], 0
    for m in _LONG_DIGIT_RUN.finditer(ascii_digits(text)):
        out += [text[pos : m.start()], BACKSTOP_LABEL]
        pos = m.end()
    return "".join([*out, text[pos:]])

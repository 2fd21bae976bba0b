"""The fail-closed backstop of redaction: any written run of 12 or more digits that the PII
detector left (a card number that fails Luhn, an ID with a bad check digit) is masked too.

A digit is any character with a digit value, whatever its script (٤, ४, ４, ④, ⁴). Used on the
transcript a worker publishes (:mod:`pipeline.stages.redaction`) and on the QA engine's own
redacted copy and evidence, so a transcript that reached QA unredacted is quoted the same way.
"""

from __future__ import annotations

import re

from pipeline.numbers.normalize import ascii_digits

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

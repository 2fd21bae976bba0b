"""Text post-processing: Simplified Chinese output and normalisation for scoring.

Whisper base often writes Mandarin in Traditional characters; call-centre
output is Simplified, converted with OpenCC's ``t2s`` tables. The scoring
normalisers (lower case, no punctuation; characters for Chinese) are for WER/
CER measurement only and never change what the engine returns.
"""

from __future__ import annotations

import re
import unicodedata

from pipeline.chinese import to_simplified

__all__ = ["normalize_en", "normalize_zh", "to_simplified"]

_SPACES = re.compile(r"\s+")


def _strip_punct(text: str) -> str:
    # keep apostrophes inside words ("don't"), drop every other punctuation/symbol
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch == "'" or not (cat.startswith("P") or cat.startswith("S")):
            out.append(ch)
        else:
            out.append(" ")
    return "".join(out)


def normalize_en(text: str) -> str:
    """Lower case, punctuation removed, hyphens split, spaces collapsed."""
    text = _strip_punct(text.lower().replace("-", " "))
    return _SPACES.sub(" ", text).strip()


def normalize_zh(text: str) -> str:
    """Simplified, punctuation and spaces removed: a string of characters for CER."""
    return _SPACES.sub("", _strip_punct(to_simplified(text)))

"""Traditional → Simplified Chinese (OpenCC ``t2s``), shared by the engine's output and the QA rules.

Whisper base often writes Mandarin in Traditional characters; call-centre text and the
rule packs are Simplified.
"""

from __future__ import annotations

import functools

import opencc


@functools.cache
def _t2s() -> opencc.OpenCC:
    return opencc.OpenCC("t2s")


def to_simplified(text: str) -> str:
    """Traditional → Simplified Chinese; other text is unchanged."""
    return str(_t2s().convert(text))

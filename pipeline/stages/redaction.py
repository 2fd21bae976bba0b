"""PII redaction of a transcript before it is published or written: nothing at rest in clear.

Detection is the QA package's pure detector (:func:`pipeline.qa.pii.find_pii`, spoken and
written numbers of any script, joined across pauses), and its redaction labels, plus its
fail-closed backstop (:mod:`pipeline.qa.backstop`): any written run of 12 or more digits that
the detector left is masked too, since a transcript leaving the worker cannot be un-published.
Pure: no Kafka, no engine.
"""

from __future__ import annotations

from pipeline.events import PIISpan, Transcript
from pipeline.qa.backstop import mask_long_digit_runs
from pipeline.qa.model import SegmentText
from pipeline.qa.normalize import normalize
from pipeline.qa.pii import find_pii, redact_texts


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

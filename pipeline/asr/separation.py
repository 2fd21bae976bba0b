"""Speaker separation of mono calls, after transcription: the engine's one hook for it.

A call recorded on one channel (role ``mixed``) is embedded window by window inside its VAD
regions (:class:`pipeline.asr.speaker_encoder.SpeakerEncoder`), clustered into one or two voices,
and its segments cut at changes of speaker and labelled by :mod:`pipeline.stages.speakers`: the
voice that says the rule packs' agent phrases is ``agent``, the other ``customer``, each segment
with a ``role_confidence``. Calls whose channels already carry roles are not touched.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from pipeline.asr.transcript import CallTranscript
from pipeline.stages.speakers import (
    NO_PHRASE_ROLE,
    SAME_VOICE_SIMILARITY,
    assign_roles,
    cluster_two,
    embedding_windows,
    label_segments,
    speaker_turns,
    split_at_changes,
)

UNSEPARATED = "mixed"


class MonoSeparator:
    def __init__(self, agent_phrases: Sequence[str], same_voice_similarity: float = SAME_VOICE_SIMILARITY) -> None:
        from pipeline.asr.speaker_encoder import SpeakerEncoder  # torch: only where separation runs

        self.encoder = SpeakerEncoder()
        self.agent_phrases = tuple(agent_phrases)
        self.same_voice_similarity = same_voice_similarity

    @staticmethod
    def wants(roles: Sequence[str]) -> bool:
        return len(roles) == 1 and roles[0] == UNSEPARATED

    def apply(self, result: CallTranscript, stream: np.ndarray, regions: list[tuple[int, int]]) -> CallTranscript:
        """The transcript with its segments labelled agent / customer (or left mixed)."""
        started, cpu = time.perf_counter(), time.process_time()
        windows = embedding_windows(regions)
        clustering = cluster_two(self.encoder.embed(stream, windows), self.same_voice_similarity)
        turns = speaker_turns(regions, windows, clustering)
        parts = split_at_changes([(s.start_s, s.end_s, s.text) for s in result.segments], turns)
        labelled = label_segments([(p.start_s, p.end_s, p.text) for p in parts], turns)
        roles = assign_roles(labelled, clustering.speakers, self.agent_phrases)
        segments = []
        for part, lab in zip(parts, labelled, strict=True):
            role = roles.roles.get(lab.speaker, NO_PHRASE_ROLE)
            confidence = round(roles.confidence * lab.confidence, 3) if role != NO_PHRASE_ROLE else None
            seg = result.segments[part.segment]
            if part.text != seg.text:  # a part of a segment cut at a change of speaker
                seg = replace(seg, start_s=round(part.start_s, 3), end_s=round(part.end_s, 3), text=part.text)
            segments.append(replace(seg, role=role, role_confidence=confidence))
        timings = {
            **result.timings,
            "separation_s": time.perf_counter() - started,
            "separation_cpu_s": time.process_time() - cpu,
        }
        return replace(result, segments=segments, timings=timings)

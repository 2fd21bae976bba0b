"""From the engine's result to the Transcript event (shared by the Kafka worker and the embedded runner)."""

from __future__ import annotations

from pipeline.asr import CallAudio, CallTranscript
from pipeline.events import (
    ModelInfo,
    RoutedCall,
    Segment,
    Transcript,
    UnsupportedLanguage,
    UntranscribedSpeech,
    Word,
)
from pipeline.lineage import extended, lineage_of, replay_id_of


def roles_by_channel(call: RoutedCall) -> dict[int, str]:
    return {int(channel): role for channel, role in call.roles.items()}


def to_transcript(
    call: RoutedCall,
    result: CallTranscript,
    extra_timings: dict[str, float] | None = None,
    replay_id: str | None = None,
) -> Transcript:
    """``replay_id``: the replay this run belongs to (a worker's ``--replay-id``), added to the routed
    call's own (a router generation): an ASR replay of a rerouted call is ``gen2/<replay_id>``."""
    lineage = extended(lineage_of(call.replay_id), replay_id)
    return Transcript(
        call_id=call.call_id,
        object=call.object,
        agent_id=call.agent_id,
        duration_s=round(call.duration_s, 3),
        channels=call.channels,
        languages={str(ch): lang for ch, lang in result.languages.items()},
        segments=[
            Segment(
                role=s.role,
                channel=s.channel,
                start_s=round(s.start_s, 3),
                end_s=round(s.end_s, 3),
                text=s.text,
                role_confidence=s.role_confidence,
                words=None if s.words is None else [Word(start_s=a, end_s=b, text=w) for a, b, w in s.words],
            )
            for s in result.segments
        ],
        model=ModelInfo(name=result.model_name, version=result.model_version),
        replay_id=replay_id_of(lineage),
        replay_lineage=lineage,
        timings={k: round(v, 4) for k, v in {**result.timings, **(extra_timings or {})}.items()},
        metadata=call.metadata,
        language_probabilities={str(ch): p for ch, p in result.language_probs.items()},
        unsupported_language=unsupported_language(result),
        untranscribed=[
            UntranscribedSpeech(channel=u.channel, start_s=round(u.start_s, 3), end_s=round(u.end_s, 3), why=u.why)
            for u in result.untranscribed
        ],
    )


def unsupported_language(result: CallTranscript) -> UnsupportedLanguage | None:
    """The language outside the engine's set that most of the call's flagged speech is in."""
    if not result.unsupported:
        return None
    seconds: dict[str, float] = {}
    for s in result.segments:
        if result.unsupported.get(s.channel) == s.language:
            seconds[s.language] = seconds.get(s.language, 0.0) + s.end_s - s.start_s
    language = max(seconds, key=seconds.__getitem__) if seconds else next(iter(result.unsupported.values()))
    channels = sorted(ch for ch, lang in result.unsupported.items() if lang == language)
    return UnsupportedLanguage(
        language=language, probability=min(result.language_probs[ch] for ch in channels), channels=channels
    )


def audio_for(call: RoutedCall, audio: CallAudio) -> CallAudio:
    """The decoded audio under the call's id (the engine reports results by it)."""
    if audio.call_id == call.call_id:
        return audio
    return CallAudio(call_id=call.call_id, samples=audio.samples, sample_rate=audio.sample_rate, roles=audio.roles)

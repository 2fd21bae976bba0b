"""Sample events shared by unit and integration tests."""

from __future__ import annotations

from pipeline.events import (
    AudioArrived,
    AudioRedacted,
    DeadLetter,
    ModelInfo,
    ObjectRef,
    PIISpan,
    QAFinding,
    QAResult,
    RedactedSpan,
    RoutedCall,
    Segment,
    SourcePosition,
    Transcript,
)

MINIO_EVENT = {
    "EventName": "s3:ObjectCreated:Put",
    "Key": "recordings/dir/a b+c.wav",
    "Records": [{
        "eventVersion": "2.0",
        "eventName": "s3:ObjectCreated:Put",
        "eventTime": "2026-11-30T14:37:38.406Z",
        "s3": {
            "bucket": {"name": "recordings"},
            "object": {
                "key": "dir%2Fa+b%2Bc.wav", "size": 8, "eTag": "d98ba1228afcb1bb5faee1a65701f848",
                "contentType": "audio/wav",
                "userMetadata": {"X-Amz-Meta-Call-Id": "x1", "X-Amz-Meta-Roles": "0=agent",
                                 "content-type": "audio/wav"},
                "versionId": "v1", "sequencer": "18ECD9776F4A6FED",
            },
        },
    }],
}


def one_turn_transcript(text: str, replay_id: str | None) -> Transcript:
    """Call c1's transcript of one agent turn, tagged with ``replay_id`` (replay-identity tests)."""
    return Transcript(
        call_id="c1",
        object=ObjectRef(bucket="b", key="c1.wav"),
        duration_s=10.0,
        channels=1,
        model=ModelInfo(name="m", version="1"),
        replay_id=replay_id,
        segments=[Segment(role="agent", channel=0, start_s=0.0, end_s=4.0, text=text)],
    )


def pii_transcript(
    ref: ObjectRef,
    pii: list[PIISpan],
    *,
    call_id: str | None = None,
    duration_s: float = 2.0,
    channels: int = 2,
    segment: Segment | None = None,
    roles: str | None = "left=agent,right=customer",
    replay_id: str | None = None,
) -> Transcript:
    """A redacted stereo transcript of the recording ``ref`` with ``pii`` spans (redaction-stage tests):
    one agent turn, the parties' channels named by the roles metadata (None: no roles)."""
    return Transcript(
        call_id=call_id or ref.key.rsplit(".", 1)[0],
        object=ref,
        duration_s=duration_s,
        channels=channels,
        segments=[segment or Segment(role="agent", channel=0, start_s=0.1, end_s=1.5, text="your card number please")],
        model=ModelInfo(name="whisper-base", version="1"),
        metadata={"roles": roles} if roles else {},
        redacted=True,
        pii=pii,
        replay_id=replay_id,
    )


def sample_events() -> list:
    ref = ObjectRef(bucket="recordings", key="2026/11/30/call-1.wav", version_id="v1", etag="e1", size_bytes=1000)
    segments = [
        Segment(role="agent", channel=0, start_s=0.5, end_s=3.2, text="hello, this call is recorded"),
        Segment(role="customer", channel=1, start_s=3.5, end_s=5.0, text="我想查询账单"),
    ]
    return [
        AudioArrived(object=ref, content_type="audio/wav", metadata={"call-id": "call-1"}),
        RoutedCall(call_id="call-1", object=ref, bucket="short", duration_s=12.5, sample_rate_hz=8000,
                   channels=2, frames=100000, container="WAV", codec="ULAW",
                   roles={"0": "agent", "1": "customer"}, agent_id="a-7", probe_ms=3.1),
        Transcript(call_id="call-1", object=ref, agent_id="a-7", duration_s=12.5, channels=2,
                   languages={"0": "en", "1": "zh"}, segments=segments,
                   model=ModelInfo(name="whisper-base", version="ct2-v6"), timings={"asr_s": 1.2}),
        QAResult(call_id="call-1", agent_id="a-7", score=85.0,
                 findings=[QAFinding(rule_id="disclosure.recording", kind="required_disclosure",
                                     severity="high", role="agent", start_s=0.0, end_s=15.0,
                                     message="missing")],
                 pii=[PIISpan(type="bank_card", role="customer", start_s=3.5, end_s=5.0)],
                 redacted_segments=segments, rule_packs=["default"]),
        DeadLetter.of(payload=b"\xff\x00 not json", key=b"recordings/x.wav", reason="malformed_event",
                      message="not JSON", stage="router",
                      source=SourcePosition(topic="audio.arrivals", partition=0, offset=42)),
        AudioRedacted(call_id="call-1", bucket="recordings-redacted", key="recordings/2026/11/30/call-1.wav",
                      version_id="rv1", size_bytes=900, sha256="0" * 64, format="WAV", subtype="ULAW",
                      converted=False, sample_rate_hz=8000, channels=2, source=ref, mode="silence", guard_s=0.08,
                      spans=[RedactedSpan(type="bank_card", role="customer", start_s=3.5, end_s=5.0,
                                          word_timed=True, channels=[1])]),
    ]

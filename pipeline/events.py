"""Event contracts: the typed value of every topic, their encoding and decoding.

Models are frozen pydantic models; the wire format is JSON (orjson). Every event
carries ``schema_version``; a decoder rejects an unknown major version with
:class:`UnsupportedSchemaVersion`. The JSON Schemas in ``topics/schemas`` are
generated from these models (``callqa topics schemas --write``) and a test keeps
the two in agreement.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar
from urllib.parse import unquote_plus

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, model_validator

from pipeline.errors import DecodeError, SkipEvent
from pipeline.lineage import lineage_of, replay_id_of

# 1.1: optional replay_id (RoutedCall, Transcript, QAResult); Transcript.redacted + pii
# 1.2: replay_id is a lineage (each replaying stage adds its id, see pipeline.lineage); replay_lineage;
#      Transcript.language_probabilities + unsupported_language; QAResult.judged + unsupported_language;
#      DeadLetter headers, group, replay_id, truncated, original_payload_bytes; reason object_changed;
#      AudioRedacted (audio.redacted); DeadLetter stage redact, reason write_failed;
#      AudioRedacted.original_replaced (optional, false when absent); Transcript.untranscribed (optional)
# 1.3: UntranscribedSpeech.why faint (readers of 1.2 refuse the value: upgrade readers first)
SCHEMA_VERSION = "1.3"
SUPPORTED_MAJOR = 1

Role = str  # "agent" | "customer" | "mixed", or an operator's own label


class UnsupportedSchemaVersion(DecodeError):
    """The event's schema_version has a major version this code does not understand."""


def utc_now() -> datetime:
    return datetime.now(UTC)


class Contract(BaseModel):
    """A model on the wire. Strict when written (unknown fields raise); a reader passes
    ``context={"ignore_unknown": True}`` and fields it does not know are dropped, at any depth,
    so a newer minor version (which may only add optional fields) still reads."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _drop_unknown(cls, data: Any, info: ValidationInfo) -> Any:
        if isinstance(data, dict) and info.context and info.context.get("ignore_unknown"):
            return {k: v for k, v in data.items() if k in cls.model_fields}
        return data


class Event(Contract):
    schema_version: str = SCHEMA_VERSION


class Replayed(Event):
    """An output that replays can produce again: ``replay_id`` is ``replay_lineage`` joined by ``/``.
    A 1.1 event carries only ``replay_id``; its lineage is read from it."""

    @model_validator(mode="before")
    @classmethod
    def _lineage(cls, data: Any) -> Any:
        if isinstance(data, dict):
            if data.get("replay_lineage") is None and data.get("replay_id"):
                return {**data, "replay_lineage": lineage_of(data["replay_id"])}
            if data.get("replay_lineage") and data.get("replay_id") is None:
                return {**data, "replay_id": replay_id_of(list(data["replay_lineage"]))}
        return data


class ObjectRef(Contract):
    """One version of one stored object."""

    bucket: str
    key: str
    version_id: str | None = None
    etag: str | None = None
    size_bytes: int | None = Field(default=None, ge=0)

    @property
    def identity(self) -> str:
        """The de-dup identity: the same bucket, key and content (etag), else the same version.

        Content first: an unchanged re-put in a versioned bucket is a new version with the
        same etag. The router's markers and the embedded runner's resume both use this.
        """
        return f"{self.bucket}/{self.key}#{self.etag or self.version_id or ''}"


class AudioArrived(Event):
    """A recording was stored. Also the plain arrival event upstream systems publish."""

    type: Literal["audio.arrived"] = "audio.arrived"
    object: ObjectRef
    content_type: str | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    event_time: datetime | None = None
    source: Literal["minio", "upstream"] = "upstream"


class SourcePosition(Contract):
    topic: str
    partition: int
    offset: int


class RoutedCall(Event):
    """A probed, validated recording assigned to a duration bucket."""

    call_id: str
    object: ObjectRef
    bucket: str
    duration_s: float = Field(ge=0)
    sample_rate_hz: int = Field(gt=0)
    channels: int = Field(gt=0)
    frames: int = Field(ge=0)
    container: str
    codec: str
    roles: dict[str, Role] = Field(description="channel index (as text) -> role")
    agent_id: str | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    probe_ms: float = Field(ge=0, default=0.0)
    routed_at: datetime = Field(default_factory=utc_now)
    replay_id: str | None = Field(default=None, description="set when re-routed by a replay (its generation)")


class Word(Contract):
    """One word of a segment in call time (a PII word's text is its redaction label)."""

    start_s: float = Field(ge=0)
    end_s: float = Field(ge=0)
    text: str


class Segment(Contract):
    role: Role
    channel: int = Field(ge=0)
    start_s: float = Field(ge=0)
    end_s: float = Field(ge=0)
    text: str
    # Since 1.2 (optional): on a mono call whose speakers were separated, how sure the role is.
    role_confidence: float | None = Field(
        default=None, ge=0, le=1,
        description="since 1.2: a separated mono call's role certainty (0-1); absent: the channel's own role")
    words: list[Word] | None = Field(
        default=None, description="since 1.2 (optional): word times from the model's alignment heads, where the "
                                  "engine timed this segment's words (by default segments holding PII)")


class ModelInfo(Contract):
    name: str
    version: str


class PIISpan(Contract):
    type: str
    role: Role
    start_s: float
    end_s: float
    confidence: float = 1.0  # 1.0: passed its checksum; lower: taken by its shape (still masked)
    word_timed: bool = Field(default=False, description="since 1.2 (optional): start_s/end_s are the first and "
                                                        "last PII word's times, not the segments'")


class UnsupportedLanguage(Contract):
    """A call spoken in a language outside the configured set: transcribed in that language
    (never translated), and not judged by rules written for other languages."""

    language: str = Field(description="the language code the model heard, e.g. fr")
    probability: float = Field(ge=0, le=1, description="the model's probability for it")
    channels: list[int] = Field(description="the channels spoken in it")


class UntranscribedSpeech(Contract):
    """A stretch of one channel where the VAD heard speech and the engine wrote no text."""

    channel: int
    start_s: float = Field(ge=0)
    end_s: float = Field(ge=0)
    why: Literal["no_speech", "loop", "stepped_over", "unfinished", "faint"] = Field(
        description="no_speech: the model judged it no speech; loop: every decode of it looped from its start; "
        "stepped_over / unfinished: the last decode passed over it or stopped before it; faint (since 1.3): "
        "speech heard only with the line's stationary noise taken out (under the noise), not decoded")


class Transcript(Replayed):
    """The transcript of one call, per channel and role, in call time."""

    call_id: str
    object: ObjectRef
    agent_id: str | None = None
    duration_s: float = Field(ge=0)
    channels: int = Field(gt=0)
    languages: dict[str, str] = Field(default_factory=dict, description="channel index -> language")
    segments: list[Segment]
    model: ModelInfo
    replay_id: str | None = Field(default=None, description="the replay lineage joined by '/'; None for the first run")
    replay_lineage: list[str] = Field(default_factory=list,
                                      description="since 1.2: replay ids from the first stage on (router generation, "
                                                  "ASR replay); empty for the first run")
    timings: dict[str, float] = Field(default_factory=dict, description="stage -> seconds")
    metadata: dict[str, str] = Field(default_factory=dict)
    produced_at: datetime = Field(default_factory=utc_now)
    # Since 1.1: the worker publishes transcripts PII-redacted; these are the spans it masked.
    redacted: bool = False
    pii: list[PIISpan] = Field(default_factory=list)
    # Since 1.2.
    language_probabilities: dict[str, float] = Field(
        default_factory=dict, description="channel index -> the model's probability for its language")
    unsupported_language: UnsupportedLanguage | None = None
    untranscribed: list[UntranscribedSpeech] = Field(
        default_factory=list, description="since 1.2 (optional): speech heard that has no text, and why")


class QAFinding(Contract):
    """One rule's verdict on one stretch of a call. Evidence is already redacted."""

    rule_id: str
    kind: str
    severity: Literal["info", "low", "medium", "high", "critical"]
    role: Role | None = None
    start_s: float | None = None
    end_s: float | None = None
    evidence: str = ""
    message: str = ""
    confidence: float | None = Field(default=None, ge=0, le=1)


class QAResult(Replayed):
    """The value on qa.findings: every finding of one call, its score and the redacted transcript."""

    call_id: str
    agent_id: str | None = None
    score: float = Field(ge=0, le=100)
    findings: list[QAFinding]
    pii: list[PIISpan] = Field(default_factory=list)
    redacted_segments: list[Segment] = Field(default_factory=list)
    rule_packs: list[str] = Field(default_factory=list)
    replay_id: str | None = Field(default=None, description="the transcript's replay_id plus the QA replay's id, "
                                                            "joined by '/'; None for the first run")
    replay_lineage: list[str] = Field(default_factory=list,
                                      description="since 1.2: the transcript's lineage plus the QA replay's id")
    no_speech: bool = False  # nothing was said in the call: it may not have connected
    # Since 1.2: False when no rule could judge the call (its language is outside the rule packs');
    # its score is then 0, so that a reader of 1.1 sends it to a person rather than counting it good.
    judged: bool = True
    unsupported_language: UnsupportedLanguage | None = None
    evaluated_at: datetime = Field(default_factory=utc_now)


ReasonCode = Literal[
    "malformed_event",
    "unsupported_schema",
    "missing_object",
    "empty_object",
    "truncated",
    "corrupt_header",
    "not_audio",
    "unsupported_codec",
    "zero_duration",
    "too_long",
    "fetch_failed",
    "object_changed",
    "decode_failed",
    "asr_failed",
    "malformed_transcript",
    "output_too_large",
    "write_failed",
    "internal_error",
]


class DeadLetter(Event):
    """An input a stage could not process, with the reason and the original bytes, never lost."""

    # 1.2: optional headers, group, replay_id, truncated, original_payload_bytes (readers of 1.x drop them)
    reason: ReasonCode
    message: str
    stage: Literal["router", "asr", "qa", "redact"]
    source: SourcePosition | None = None
    attempts: int = Field(ge=1, default=1)
    original_key: str | None = None
    original_payload_b64: str
    failed_at: datetime = Field(default_factory=utc_now)
    # The input's processing headers (replay generation, ...), sent back with a redrive.
    headers: dict[str, str] = Field(default_factory=dict)
    group: str | None = None  # the consumer group that failed the input; a redrive goes back to it alone
    replay_id: str | None = None  # the replay id that group ran with (None: the live run)
    # Over its topic's limit the letter carries the head of message and payload: the whole input is
    # at ``source`` (while the topic keeps it); original_payload_bytes is its full size.
    truncated: bool = False
    original_payload_bytes: int | None = Field(default=None, ge=0)

    @classmethod
    def of(cls, *, payload: bytes | None, key: bytes | None, **fields: Any) -> DeadLetter:
        return cls(
            original_payload_b64=base64.b64encode(payload or b"").decode(),
            original_key=key.decode("utf-8", "backslashreplace") if key else None,
            **fields,
        )

    @property
    def original_payload(self) -> bytes:
        return base64.b64decode(self.original_payload_b64)


class RedactedSpan(Contract):
    """One PII span cut from a redacted copy: the transcript's span and the channels it was cut on."""

    type: str
    role: Role
    start_s: float = Field(ge=0, description="call seconds; the audio cut starts guard_s earlier")
    end_s: float = Field(ge=0, description="call seconds; the audio cut ends guard_s later")
    word_timed: bool = Field(default=False, description="the times are the PII words', not the segments'")
    channels: list[int] = Field(description="the channels cut (the party's; every channel where none has its role)")


class AudioRedacted(Replayed):
    """The value on audio.redacted: a redacted copy of one call's recording was written (since 1.2)."""

    type: Literal["audio.redacted"] = "audio.redacted"
    call_id: str
    bucket: str = Field(description="where the copy is")
    key: str = Field(description="the copy's key: the same transcript always gives the same key")
    version_id: str | None = Field(default=None, description="the copy's version, where its bucket keeps versions")
    size_bytes: int = Field(ge=0)
    sha256: str = Field(description="of the copy's bytes")
    format: str = Field(description="container of the copy: WAV, FLAC, AIFF (libsndfile's names)")
    subtype: str = Field(description="sample encoding of the copy: PCM_16, ULAW, ...")
    converted: bool = Field(description="true: the recording's own format is not written losslessly; the copy "
                                        "is a PCM_16 WAV named <key>.wav")
    sample_rate_hz: int = Field(gt=0)
    channels: int = Field(gt=0)
    source: ObjectRef = Field(description="the original recording the copy was made from")
    mode: Literal["silence", "tone"]
    guard_s: float = Field(ge=0, description="audio cut either side of every span")
    spans: list[RedactedSpan]
    replay_id: str | None = Field(default=None, description="the transcript's replay_id")
    replay_lineage: list[str] = Field(default_factory=list, description="the transcript's replay lineage")
    redacted_at: datetime = Field(default_factory=utc_now)
    original_replaced: bool = Field(
        default=False,
        description="true: the copy's bytes were also written over the original at its own key (the policy "
                    "redact_replace_original) and, in a versioned bucket, the source version was removed; "
                    "false (or absent): the original is as it was")


EVENT_TYPES: dict[str, type[Event]] = {
    "audio_arrived": AudioArrived,
    "routed_call": RoutedCall,
    "transcript": Transcript,
    "qa_result": QAResult,
    "dead_letter": DeadLetter,
    "audio_redacted": AudioRedacted,
}

E = TypeVar("E", bound=Event)


def encode(event: Event) -> bytes:
    return orjson.dumps(event.model_dump(mode="json"))


def _loads(payload: bytes | str) -> Any:
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise DecodeError(f"not JSON: {exc}") from exc


def _check_version(data: dict[str, Any], model: type[Event]) -> None:
    version = data.get("schema_version")
    if not isinstance(version, str):
        raise DecodeError(f"{model.__name__}: schema_version missing or not a string")
    major = version.split(".", 1)[0]
    if major != str(SUPPORTED_MAJOR):
        raise UnsupportedSchemaVersion(
            f"{model.__name__}: schema_version {version!r} not supported (this build reads {SUPPORTED_MAJOR}.x)"
        )


def decode(payload: bytes | str, model: type[E], *, strict: bool = False) -> E:
    """Decode one event; raise DecodeError naming the field and the problem.

    Readers ignore fields they do not know (a newer minor version); ``strict`` refuses them,
    for tests that check what a writer produced."""
    data = _loads(payload)
    if not isinstance(data, dict):
        raise DecodeError(f"{model.__name__}: expected a JSON object, got {type(data).__name__}")
    _check_version(data, model)
    try:
        return model.model_validate(data, context=None if strict else {"ignore_unknown": True})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()
        )
        raise DecodeError(f"{model.__name__}: {problems}") from exc


# --- arrivals: MinIO's bucket notification or the plain upstream event -------------------

_META_PREFIX = "x-amz-meta-"


class _MinioObject(BaseModel):
    """The fields of MinIO's ``s3.object`` that callqa reads; shapes are checked, extras ignored."""

    model_config = ConfigDict(extra="ignore")
    key: str
    size: int | None = None
    eTag: str | None = None
    versionId: str | None = None
    contentType: str | None = None
    userMetadata: dict[str, Any] | None = None


class _MinioBucket(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str


class _MinioS3(BaseModel):
    model_config = ConfigDict(extra="ignore")
    bucket: _MinioBucket
    object: _MinioObject


class _MinioRecord(BaseModel):
    model_config = ConfigDict(extra="ignore")
    eventTime: Any = None  # validated as AudioArrived.event_time
    s3: _MinioS3


def _minio_metadata(user_metadata: dict[str, Any]) -> tuple[dict[str, str], str | None]:
    """MinIO sends user metadata as ``X-Amz-Meta-Call-Id``; we use ``call-id``."""
    metadata: dict[str, str] = {}
    content_type = None
    for name, value in user_metadata.items():
        lowered = name.lower()
        if lowered.startswith(_META_PREFIX):
            metadata[lowered.removeprefix(_META_PREFIX)] = str(value)
        elif lowered == "content-type":
            content_type = str(value)
    return metadata, content_type


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"missing field {'.'.join(map(str, e['loc']))}" if e["type"] == "missing"
        else f"{'.'.join(map(str, e['loc'])) or '<root>'}: {e['msg']}"
        for e in exc.errors()
    )


def _minio_event_name(data: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The single record and its event name; anything not shaped like MinIO's event is malformed."""
    records = data.get("Records")
    if not isinstance(records, list) or len(records) != 1:
        raise DecodeError("MinIO event: expected exactly one record in Records")
    record = records[0]
    if not isinstance(record, dict):
        raise DecodeError(f"MinIO event: a record must be an object, got {type(record).__name__}")
    event_name = record.get("eventName") or data.get("EventName")
    if not isinstance(event_name, str):
        raise DecodeError("MinIO event: eventName missing or not a string")
    return record, event_name


def _from_minio(data: dict[str, Any]) -> AudioArrived:
    record, event_name = _minio_event_name(data)
    if not event_name.startswith("s3:ObjectCreated:"):
        raise SkipEvent(f"not an object creation: {event_name or '<no eventName>'}")
    try:
        parsed = _MinioRecord.model_validate(record)
    except ValidationError as exc:
        raise DecodeError(f"MinIO event: {_problems(exc)}") from exc
    obj = parsed.s3.object
    metadata, content_type = _minio_metadata(obj.userMetadata or {})
    try:
        return AudioArrived(
            object=ObjectRef(
                bucket=parsed.s3.bucket.name,
                key=unquote_plus(obj.key),  # MinIO URL-escapes keys in events
                version_id=obj.versionId or None,
                etag=obj.eTag or None,
                size_bytes=obj.size,
            ),
            content_type=content_type or obj.contentType,
            metadata=metadata,
            event_time=parsed.eventTime,
            source="minio",
        )
    except ValidationError as exc:
        raise DecodeError(f"MinIO event: {_problems(exc)}") from exc


def decode_arrival(payload: bytes | str) -> AudioArrived:
    """Accept both shapes on audio.arrivals. Raises DecodeError, or SkipEvent for non-creations."""
    data = _loads(payload)
    if isinstance(data, dict) and "Records" in data:
        return _from_minio(data)
    return decode(payload, AudioArrived)

"""What an embedded run did, counted as it goes, and its ``summary.txt``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pipeline.errors import DecodeError
from pipeline.events import DeadLetter, RoutedCall, Transcript, decode
from pipeline.qa import CallQAResult
from pipeline.run.redacted_audio import redaction_lines


@dataclass
class RunSummary:
    calls: int = 0
    skipped_done: int = 0
    transcribed: int = 0
    dead: int = 0
    audio_s: float = 0.0
    wall_s: float = 0.0
    speech_s: float = 0.0  # voiced seconds the engine computed on
    padded_s: float = 0.0  # seconds the engine computed (windows padded to their bucket)
    reasons: dict[str, int] = field(default_factory=dict)  # of the inputs still not processed
    failed_now: set[tuple[str | None, str]] = field(default_factory=set)  # (key, reason) dead in this run
    repaired: list[str] = field(default_factory=list)  # what was fixed in the outputs of a crashed run
    redacted: int = 0  # redacted copies written in this run
    redacted_as_wav: list[str] = field(default_factory=list)  # of those, the calls written as PCM_16 WAV
    redaction_failed: list[str] = field(default_factory=list)  # calls with PII whose copy could not be written

    @property
    def padding_efficiency(self) -> float:
        return self.speech_s / self.padded_s if self.padded_s else 1.0

    @property
    def rtfx(self) -> float:
        return self.audio_s / self.wall_s if self.wall_s else 0.0


def render_summary(
    summary: RunSummary,
    results: list[CallQAResult],
    dead: list[DeadLetter],
    silent: Sequence[str] = (),
    foreign: Sequence[tuple[str, str, float]] = (),
    untranscribed: Sequence[tuple[str, float, list[str]]] = (),
) -> str:
    lines = [
        f"calls seen: {summary.calls}  transcribed now: {summary.transcribed}  "
        f"already done: {summary.skipped_done}  failed: {len(dead)}",
        f"audio transcribed now: {summary.audio_s / 3600:.3f} h in {summary.wall_s:.1f} s (RTFx {summary.rtfx:.1f})",
        f"padding efficiency: {summary.padding_efficiency:.2f}",
    ]
    judged = [r for r in results if r.judged]
    if judged:
        scores = sorted(judged, key=lambda r: r.score)
        shown = f" (the lowest {min(10, len(judged))}; every call in report.html)" if len(judged) > 10 else ""
        lines.append(f"QA: {len(judged)} calls, mean score {sum(r.score for r in judged) / len(judged):.1f}{shown}")
        for r in scores[:10]:
            rules = ", ".join(sorted({f.rule_id for f in r.findings})) or "clean"
            lines.append(f"  {r.score:5.1f}  {r.call_id}  {rules}")
    if silent:  # transcribed, but the engine heard no speech: silence, tones, or a dead channel
        lines.append(
            f"no speech found in {len(silent)} call(s): {', '.join(silent[:20])}"
            + (f" and {len(silent) - 20} more" if len(silent) > 20 else "")
        )
    if untranscribed:  # speech the VAD heard and the engine wrote nothing for: a person may listen
        total = sum(seconds for _, seconds, _ in untranscribed)
        lines.append(
            f"speech without text: {total:.1f} s in {len(untranscribed)} call(s) (each transcript's untranscribed):"
        )
        lines += [f"  {call_id}: {seconds:.1f} s ({', '.join(why)})" for call_id, seconds, why in untranscribed[:20]]
        lines += [f"  and {len(untranscribed) - 20} more"] if len(untranscribed) > 20 else []
    if foreign:  # transcribed in its own language; no rule pack is written for it
        lines.append(f"unsupported_language: {len(foreign)} call(s) not judged by QA (transcribed as spoken):")
        lines += [f"  {call_id}: {language} (probability {p:.2f})" for call_id, language, p in foreign[:20]]
        lines += [f"  and {len(foreign) - 20} more"] if len(foreign) > 20 else []
    lines += redaction_lines(summary.redacted, summary.redacted_as_wav, summary.redaction_failed)
    lines += [f"repaired {line}" for line in summary.repaired]
    if dead:
        lines.append("not processed:")
        lines += [f"  {letter_file(d)}: {d.reason} ({d.message})" for d in dead]
    return "\n".join(lines) + "\n"


def letter_file(letter: DeadLetter) -> str | None:
    """The file a dead letter is about. Routing letters are keyed by it; the ASR and QA stages key
    theirs by call id (as on their topics), so the file comes from the event they carry."""
    kind = {"asr": RoutedCall, "qa": Transcript}.get(letter.stage)
    if kind is not None:
        try:
            return decode(letter.original_payload, kind).object.key
        except DecodeError:
            pass
    return letter.original_key

"""Speaker separation on mono calls, measured: synthetic two-voice calls, mixed to mono, through the engine.

Each call is an English script spoken by espeak-ng with one voice per party, in three conditions:
``voices`` (two espeak voices, customer 6 dB quieter), ``shifted`` (the same espeak voice for both,
the customer's pitch-shifted and slowed with sox) and ``levels`` (two voices, customer 14 dB
quieter). The same conversation is also built as a stereo call (agent left, customer right), so the
QA findings on the mono mix are compared with the stereo ones. ``dev`` tunes (the same-voice
threshold); ``check`` uses other voices, shifts, scripts and seeds and is never tuned on.

    python tools/eval_speakers.py [dev|check] [--calls-per-condition N] [--similarities]

Reports: share of transcribed speech time attributed to the right role (overall and per condition),
abuse.agent and pii.agent_reads_back recall, mono against stereo, and separation CPU time against
the mono call's transcription CPU time (process CPU time: the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import tempfile
import time
from dataclasses import dataclass

import numpy as np
import soundfile as sf
import soxr

from pipeline.asr import CallAudio, Engine, EngineOptions
from pipeline.numbers.model import SegmentText
from pipeline.qa.engine import QAEngine
from pipeline.qa.model import CallText
from pipeline.qa.rules import agent_phrases, load_packs

RATE = 16_000
# (agent voice, customer voice, customer sox effects, customer gain dB) per condition and part
CONDITIONS = {
    "dev": {
        "voices": ("en-us+f2", "en-us+m3", (), -6.0),
        "shifted": ("en-us+m3", "en-us+m3", ("pitch", "-300", "tempo", "0.85"), 0.0),
        "levels": ("en-gb+m1", "en-us+f4", (), -14.0),
    },
    "check": {
        "voices": ("en-us+m5", "en-gb+f3", (), -6.0),
        "shifted": ("en-us+f2", "en-us+f2", ("pitch", "-400", "tempo", "0.8"), -3.0),
        "levels": ("en-us+f4", "en-gb+m2", (), -14.0),
    },
}
COMPANIES = ("Northwind Bank", "Contoso Card Services", "Fabrikam Credit", "Tailspin Bank")
NAMES = ("Anna", "Mark", "Lisa", "Tom", "Grace", "Peter")
ASKS = (
    "I would like to check the balance of my credit card.",
    "I want to raise the limit on my card.",
    "My card was declined at the shop this morning.",
    "I lost my card yesterday evening.",
)
ANSWERS = (
    "Of course, let me look that up for you right now.",
    "I can help you with that today.",
    "Please give me a moment while I check your account.",
)
ABUSE = ("You are an idiot, stop wasting my time.", "Are you deaf? I said it twice, you are useless.")
DIGITS = "zero one two three four five six seven eight nine".split()


def luhn_card(rng: random.Random) -> str:
    body = [4] + [rng.randrange(10) for _ in range(14)]
    total = sum(d if i % 2 else sum(divmod(2 * d, 10)) for i, d in enumerate(reversed(body)))
    return "".join(map(str, body)) + str((10 - total % 10) % 10)


@dataclass(frozen=True)
class Script:
    name: str
    turns: tuple[tuple[str, str], ...]
    abusive_agent: bool
    read_back: bool


def make_script(rng: random.Random, name: str) -> Script:
    abusive, read_back = rng.random() < 0.5, rng.random() < 0.5
    turns = [
        (
            "agent",
            f"Thank you for calling {rng.choice(COMPANIES)}, my name is {rng.choice(NAMES)}. "
            "This call is recorded for quality purposes.",
        ),
        ("customer", rng.choice(ASKS)),
    ]
    if read_back:
        card = ". ".join(DIGITS[int(d)] for d in luhn_card(rng))
        turns += [
            ("agent", "Could you give me your card number please?"),
            ("customer", f"Yes, it is. {card}."),
            ("agent", f"Let me confirm, your card number is. {card}."),
        ]
    turns.append(("agent", rng.choice(ANSWERS)))
    if abusive:
        turns += [("customer", "Sorry, I did not understand, can you say that again?"), ("agent", rng.choice(ABUSE))]
    turns += [("customer", "Okay, thank you."), ("agent", "Thank you, have a nice day.")]
    return Script(name, tuple(turns), abusive, read_back)


def speak(text: str, voice: str, effects: tuple[str, ...] = ()) -> np.ndarray:
    with tempfile.TemporaryDirectory() as tmp:
        raw, out = f"{tmp}/raw.wav", f"{tmp}/out.wav"
        subprocess.run(["espeak-ng", "-v", voice, "-s", "155", "-w", raw, text], check=True)
        if effects:
            subprocess.run(["sox", raw, out, *effects], check=True)
        audio, rate = sf.read(out if effects else raw, dtype="float32")
    return soxr.resample(audio, rate, RATE).astype(np.float32)


def render(
    script: Script, condition: tuple[str, str, tuple[str, ...], float], rng: random.Random
) -> tuple[np.ndarray, list[tuple[str, float, float]]]:
    """(2, frames) agent/customer channels and the truth turns (role, start_s, end_s)."""
    agent_voice, customer_voice, effects, gain_db = condition
    pieces, truth, cursor = [], [], int(0.4 * RATE)
    for role, text in script.turns:
        audio = speak(text, agent_voice) if role == "agent" else speak(text, customer_voice, effects)
        audio = audio * (10 ** (gain_db / 20) if role == "customer" else 1.0)
        pieces.append((0 if role == "agent" else 1, cursor, audio))
        truth.append((role, cursor / RATE, (cursor + len(audio)) / RATE))
        cursor += len(audio) + int(rng.uniform(0.3, 0.9) * RATE)
    channels = np.zeros((2, cursor + RATE // 2), dtype=np.float32)
    for ch, at, audio in pieces:
        channels[ch, at : at + len(audio)] += audio
    return channels, truth


def attribution(segments: list, truth: list[tuple[str, float, float]]) -> tuple[float, float]:
    """(seconds of transcribed speech whose segment role is the speaker's, seconds transcribed)."""
    right = total = 0.0
    for seg in segments:
        for role, start, end in truth:
            overlap = min(seg.end_s, end) - max(seg.start_s, start)
            if overlap > 0:
                total += overlap
                right += overlap if seg.role == role else 0.0
    return right, total


def qa_text(call_id: str, result, channels: int) -> CallText:
    segs = tuple(
        SegmentText(s.role, s.channel, s.start_s, s.end_s, s.text, getattr(s, "role_confidence", None))
        for s in result.segments
    )
    return CallText(call_id, None, result.duration_s, channels, segs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("part", choices=("dev", "check"))
    ap.add_argument("--calls-per-condition", type=int, default=2)
    ap.add_argument("--similarities", action="store_true", help="only the one- vs two-voice centroid similarities")
    ap.add_argument("--show", action="store_true", help="print the mono segments of calls whose findings differ")
    args = ap.parse_args()
    if args.similarities:
        return similarities(args.part)
    pack = load_packs([])
    engine = Engine.load(EngineOptions(device="cpu", agent_phrases=agent_phrases(pack)))
    qa = QAEngine(pack)
    rng = random.Random(1 if args.part == "dev" else 2)
    rows, totals = [], {"sep_cpu_s": 0.0, "asr_cpu_s": 0.0}
    for cond_name, cond in CONDITIONS[args.part].items():
        for k in range(args.calls_per_condition):
            script = make_script(rng, f"{args.part}-{cond_name}-{k}")
            channels, truth = render(script, cond, rng)
            mono = channels.sum(axis=0, keepdims=True)
            cpu = time.process_time()
            m = engine.transcribe(CallAudio(script.name, mono, RATE, ("mixed",)))
            cpu = time.process_time() - cpu
            s = engine.transcribe(CallAudio(script.name, channels, RATE, ("agent", "customer")))
            sep = m.timings.get("separation_cpu_s", 0.0)
            totals["sep_cpu_s"] += sep
            totals["asr_cpu_s"] += cpu - sep
            right, total = attribution(m.segments, truth)
            found = {}
            for label, result, n in (("mono", m, 1), ("stereo", s, 2)):
                ids = {f.rule_id: f for f in qa.evaluate(qa_text(script.name, result, n)).findings}
                found[label] = {
                    "abuse": "abuse.agent" in ids,
                    "read_back": "pii.agent_reads_back" in ids,
                    "abuse_conf": getattr(ids.get("abuse.agent"), "confidence", None),
                }
            rows.append(
                {
                    "call": script.name,
                    "condition": cond_name,
                    "right_s": right,
                    "total_s": total,
                    "abusive": script.abusive_agent,
                    "read_back": script.read_back,
                    **found,
                    "roles": sorted({seg.role for seg in m.segments}),
                    "sep_cpu_s": round(sep, 2),
                    "asr_cpu_s": round(cpu - sep, 2),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
            if args.show and found["mono"] != {**found["stereo"], "abuse_conf": found["mono"]["abuse_conf"]}:
                for role, start, end in truth:
                    print(f"    truth {role:<8} {start:6.2f}-{end:6.2f}")
                for seg in m.segments:
                    print(f"    {seg.role:<8} {seg.role_confidence} {seg.start_s:6.2f}-{seg.end_s:6.2f} {seg.text}")
    report(rows, totals)


def report(rows: list[dict], totals: dict[str, float]) -> None:
    def share(sel: list[dict]) -> float:
        return sum(r["right_s"] for r in sel) / max(sum(r["total_s"] for r in sel), 1e-9)

    print(f"attribution overall {share(rows):.1%}")
    for cond in dict.fromkeys(r["condition"] for r in rows):
        print(f"  {cond:<8} {share([r for r in rows if r['condition'] == cond]):.1%}")
    for kind, flag in (("abuse", "abusive"), ("read_back", "read_back")):
        pos = [r for r in rows if r[flag]]
        neg = [r for r in rows if not r[flag]]
        for label in ("mono", "stereo"):
            tp = sum(r[label][kind] for r in pos)
            fp = sum(r[label][kind] for r in neg)
            print(f"{kind:<9} {label:<6} recall {tp}/{len(pos)}  false positives {fp}/{len(neg)}")
    print(
        f"separation CPU {totals['sep_cpu_s']:.1f} s, transcription CPU {totals['asr_cpu_s']:.1f} s, "
        f"ratio {totals['sep_cpu_s'] / max(totals['asr_cpu_s'], 1e-9):.3f}"
    )


def similarities(part: str) -> None:
    """The two-means centroid similarity of one-voice calls (each voice of the part alone) and of the
    two-voice mixes: the same-voice threshold sits between them (pipeline/stages/speakers.py)."""
    from pipeline.asr.speaker_encoder import SpeakerEncoder
    from pipeline.asr.vad import SileroVad, VadOptions
    from pipeline.stages.speakers import cluster_two, embedding_windows

    encoder, vad, rng = SpeakerEncoder(), SileroVad(VadOptions()), random.Random(3 if part == "dev" else 4)
    for cond_name, (agent, customer, effects, gain) in CONDITIONS[part].items():
        script = make_script(rng, cond_name)
        for label, cond in (
            ("two", (agent, customer, effects, gain)),
            ("agent-only", (agent, agent, (), 0.0)),
            ("customer-only", (customer, customer, effects, 0.0)),
        ):
            mono = render(script, cond, rng)[0].sum(axis=0)
            regions = vad.regions(mono)
            c = cluster_two(encoder.embed(mono, embedding_windows(regions)), same_voice_similarity=1.0)
            print(f"{part} {cond_name:<8} {label:<14} centroid similarity {c.similarity:.3f}")


if __name__ == "__main__":
    main()

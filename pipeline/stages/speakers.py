"""Who spoke when on a mono call, and which party is the agent. Pure (numpy; no torch).

Three steps, each a function of plain data so it is tested on given embeddings and segments:

1. :func:`embedding_windows`: 1.6 s windows every 0.8 s inside each VAD speech region (the
   encoder's training length), a shorter region as one window, so a region holding both
   parties is split where the voice changes.
2. :func:`cluster_two`: two-means on the unit embeddings; the call has two voices only when the
   two centroids are less similar than ``same_voice_similarity`` (measured on synthetic calls:
   tools/eval_speakers.py) and the smaller cluster holds enough speech, else one.
3. :func:`speaker_turns`, :func:`split_at_changes` then :func:`label_segments`: windows ->
   per-speaker turns -> a transcript segment running across a change of speaker (two turns a short
   pause apart, decoded as one) is cut there, its text shared by each side's speech time -> each
   part takes the speaker it overlaps most, and :func:`assign_roles` names the speaker that
   says the pack's agent phrases (greeting, identification, disclosures) the agent. When neither
   does, the speakers stay ``mixed``: a wrong guess would turn a rude customer into a rude agent.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from pipeline.asr.timing import share_text

RATE = 16_000
WINDOW_S = 1.6
HOP_S = 0.8
MIN_WINDOW_S = 0.5  # shorter regions carry too little voice to embed; they take their neighbours' speaker
SAME_VOICE_SIMILARITY = 0.85  # centroid cosine above this: one voice (dev: two voices <= 0.79, one >= 0.92)
MIN_SECOND_SHARE = 0.05  # the smaller cluster must hold this share of the windows (and two windows)
NO_PHRASE_ROLE = "mixed"
MIN_PART_S = 0.4  # a speaker's speech inside a segment shorter than this is no part of its own


@dataclass(frozen=True)
class Clustering:
    """labels: per window 0/1 (all 0 for one voice); confidence: per window in [0.5, 1] (how much
    nearer its own centroid than the other one); similarity: the two centroids' cosine."""

    labels: np.ndarray
    confidence: np.ndarray
    similarity: float
    speakers: int


@dataclass(frozen=True)
class Turn:
    start_s: float
    end_s: float
    speaker: int
    confidence: float


@dataclass(frozen=True)
class Labelled:
    """A transcript segment's time and text with the speaker it was given."""

    start_s: float
    end_s: float
    text: str
    speaker: int
    confidence: float


def embedding_windows(regions: Sequence[tuple[int, int]], rate: int = RATE) -> list[tuple[int, int]]:
    """Sample ranges to embed: sliding windows inside each region (the last one flush with its end)."""
    win, hop, shortest = int(WINDOW_S * rate), int(HOP_S * rate), int(MIN_WINDOW_S * rate)
    out: list[tuple[int, int]] = []
    for start, end in regions:
        if end - start < shortest:
            continue
        if end - start <= win:
            out.append((start, end))
            continue
        starts = list(range(start, end - win + 1, hop))
        if starts[-1] + win < end:
            starts.append(end - win)
        out += [(s, s + win) for s in starts]
    return out


def cluster_two(
    embeddings: np.ndarray, same_voice_similarity: float = SAME_VOICE_SIMILARITY, iterations: int = 20
) -> Clustering:
    """Two-means with cosine similarity on (n, d) unit vectors, seeded with the two windows
    farthest apart; one voice when the centroids are too alike or one cluster is a sliver."""
    n = len(embeddings)
    if n < 4:
        return Clustering(np.zeros(n, dtype=int), np.ones(n), 1.0, 1)
    sims = embeddings @ embeddings.T
    a, b = np.unravel_index(int(np.argmin(sims)), sims.shape)
    centroids = embeddings[[a, b]].copy()
    labels = np.zeros(n, dtype=int)
    for _ in range(iterations):
        labels = np.argmax(embeddings @ centroids.T, axis=1)
        if labels.min() == labels.max():
            break
        new = np.stack([embeddings[labels == k].mean(axis=0) for k in (0, 1)])
        new /= np.linalg.norm(new, axis=1, keepdims=True)
        if np.allclose(new, centroids):
            break
        centroids = new
    counts = np.bincount(labels, minlength=2)
    similarity = float(centroids[0] @ centroids[1])
    if similarity > same_voice_similarity or counts.min() < max(2, MIN_SECOND_SHARE * n):
        return Clustering(np.zeros(n, dtype=int), np.ones(n), similarity, 1)
    scores = embeddings @ centroids.T
    margin = np.abs(scores[:, 0] - scores[:, 1])
    # a margin of a tenth of the cosine range is a clear call: map [0, 0.1] to [0.5, 1]
    confidence = np.clip(0.5 + 5.0 * margin, 0.5, 1.0)
    return Clustering(_smooth(labels), confidence, similarity, 2)


def _smooth(labels: np.ndarray) -> np.ndarray:
    """A lone window between two of the other speaker is the other speaker (a cough, a breath)."""
    out = labels.copy()
    for i in range(1, len(labels) - 1):
        if labels[i - 1] == labels[i + 1] != labels[i]:
            out[i] = labels[i - 1]
    return out


def speaker_turns(
    regions: Sequence[tuple[int, int]], windows: Sequence[tuple[int, int]], clustering: Clustering, rate: int = RATE
) -> list[Turn]:
    """Per-speaker turns in seconds: each region cut where its windows change speaker (halfway
    between the two windows' centres); a region with no window takes the nearest window's speaker."""
    centres = np.array([(s + e) / 2 for s, e in windows]) if windows else np.zeros(0)
    turns: list[Turn] = []
    for start, end in regions:
        inside = [i for i, (s, e) in enumerate(windows) if s >= start and e <= end]
        if not inside:
            if not len(centres):
                continue
            i = int(np.argmin(np.abs(centres - (start + end) / 2)))
            turns.append(
                Turn(start / rate, end / rate, int(clustering.labels[i]), float(clustering.confidence[i]) * 0.8)
            )
            continue
        cut, run = start, [inside[0]]
        for prev, cur in zip(inside, inside[1:]):
            if clustering.labels[cur] != clustering.labels[prev]:
                boundary = int((centres[prev] + centres[cur]) / 2)
                turns.append(_turn(cut, boundary, run, clustering, rate))
                cut, run = boundary, []
            run.append(cur)
        turns.append(_turn(cut, end, run, clustering, rate))
    return turns


def _turn(start: int, end: int, run: list[int], clustering: Clustering, rate: int) -> Turn:
    return Turn(start / rate, end / rate, int(clustering.labels[run[0]]), float(np.mean(clustering.confidence[run])))


@dataclass(frozen=True)
class Part:
    """A stretch of one transcript segment (``segment``: its index) held by one speaker."""

    segment: int
    start_s: float
    end_s: float
    text: str


def split_at_changes(segments: Sequence[tuple[float, float, str]], turns: Sequence[Turn]) -> list[Part]:
    """Each (start_s, end_s, text) as one part per run of one speaker's turns under it, cut halfway
    through the pause between runs; its text shared by the runs' speech time (words, or characters
    of Chinese), the cut moved to the nearest clause end (the model's punctuation marks the turn).
    A run with under MIN_PART_S of speech in the segment joins its neighbours, and one the text
    share gives no text lends its time to a neighbour: the parts cover the segment's time."""
    out: list[Part] = []
    for k, (start, end, text) in enumerate(segments):
        runs = _runs(start, end, turns)
        if len(runs) < 2:
            out.append(Part(k, start, end, text))
            continue
        edges = [start, *((a.last_s + b.first_s) / 2 for a, b in zip(runs, runs[1:])), end]
        parts: list[Part] = []
        for i, piece in enumerate(share_text(text, [r.speech_s for r in runs])):
            if not piece:  # no text of its own: its time goes to a neighbour, so none of it is lost
                if parts:
                    parts[-1] = Part(k, parts[-1].start_s, edges[i + 1], parts[-1].text)
                continue
            parts.append(Part(k, parts[-1].end_s if parts else start, edges[i + 1], piece))
        out += parts or [Part(k, start, end, text)]
    return out


class _Run(NamedTuple):
    speaker: int
    first_s: float
    last_s: float
    speech_s: float


def _runs(start: float, end: float, turns: Sequence[Turn]) -> list[_Run]:
    """Each run of one speaker's turns inside [start, end]; runs under MIN_PART_S of speech are
    left out (their neighbours close over them)."""
    runs: list[_Run] = []
    for t in sorted(turns, key=lambda t: t.start_s):
        a, b = max(start, t.start_s), min(end, t.end_s)
        if b > a:
            runs.append(_Run(t.speaker, a, b, b - a))
    return _merged([r for r in _merged(runs) if r.speech_s >= MIN_PART_S])


def _merged(runs: list[_Run]) -> list[_Run]:
    """Consecutive runs of one speaker as one."""
    out: list[_Run] = []
    for run in runs:
        if out and out[-1].speaker == run.speaker:
            run = _Run(run.speaker, out[-1].first_s, run.last_s, out[-1].speech_s + run.speech_s)
            out.pop()
        out.append(run)
    return out


def label_segments(segments: Sequence[tuple[float, float, str]], turns: Sequence[Turn]) -> list[Labelled]:
    """Each (start_s, end_s, text) takes the speaker whose turns it overlaps most; its confidence
    is that speaker's share of the overlap times the turns' own confidence."""
    out = []
    for start, end, text in segments:
        overlap = {0: 0.0, 1: 0.0}
        weighted = {0: 0.0, 1: 0.0}
        for t in turns:
            o = min(end, t.end_s) - max(start, t.start_s)
            if o > 0:
                overlap[t.speaker] += o
                weighted[t.speaker] += o * t.confidence
        total = overlap[0] + overlap[1]
        if total <= 0:  # no turn under it (VAD and the decoder disagree): nearest turn
            near = min(turns, key=lambda t: min(abs(t.start_s - end), abs(t.end_s - start)), default=None)
            out.append(
                Labelled(start, end, text, near.speaker if near else 0, 0.5 * (near.confidence if near else 1.0))
            )
            continue
        who = max((0, 1), key=lambda k: overlap[k])
        out.append(Labelled(start, end, text, who, round(overlap[who] / total * weighted[who] / overlap[who], 3)))
    return out


@dataclass(frozen=True)
class Roles:
    """speaker index -> role, and how sure the naming is (1.0: only one speaker said agent phrases)."""

    roles: dict[int, str]
    confidence: float


def assign_roles(labelled: Sequence[Labelled], speakers: int, agent_phrases: Sequence[str]) -> Roles:
    """The speaker who says more of the agent phrases is the agent (the other the customer);
    confidence = their share of the phrase hits. One voice saying agent phrases is the agent alone.
    Neither (or a tie): both ``mixed``."""
    patterns = [_phrase_pattern(p) for p in agent_phrases if p.strip()]
    hits = [0, 0]
    for seg in labelled:
        text = _plain(seg.text)
        hits[seg.speaker] += sum(1 for p in patterns if p.search(text))
    if speakers == 1:
        return Roles({0: "agent"}, 1.0) if hits[0] else Roles({0: NO_PHRASE_ROLE}, 0.0)
    if hits[0] == hits[1]:
        return Roles({0: NO_PHRASE_ROLE, 1: NO_PHRASE_ROLE}, 0.0)
    agent = 0 if hits[0] > hits[1] else 1
    return Roles({agent: "agent", 1 - agent: "customer"}, round(hits[agent] / (hits[0] + hits[1]), 3))


def _plain(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def _phrase_pattern(phrase: str) -> re.Pattern[str]:
    plain = re.escape(_plain(phrase))
    # English phrases match whole words; Chinese ones anywhere
    return re.compile(rf"\b{plain}\b" if re.search(r"[a-z0-9]", plain) else plain)

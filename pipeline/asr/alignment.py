"""Word-level times for the segments that need them, after decoding (the engine's one hook).

Which segments: those whose text holds a PII number (mode "pii", the default: what audio
redaction cuts), or all of them ("all"). Their final text is known only now: the number
pass rewrites a number's segments after the first pass, so no first-pass decode holds the
tokens to time. Each channel's chosen segments (plus ``PAD_S`` either side) are packed into
windows (:func:`pipeline.asr.packing.pack_regions`), batched, encoded, and the segments'
final text is fed to the decoder in ONE teacher-forced pass (no timestamps). The model's
attention goes through SDPA, which returns no weights, so the pass computes the
cross-attention scores of the alignment heads only, from the cross keys in the memory pool's
cache and those heads' query projections. :mod:`pipeline.asr.dtw` turns them into token
frames and words; window times map back to call time through the packing offsets.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np
import torch
from torch import Tensor

from pipeline.asr.decode import TIME_STEP_S
from pipeline.asr.dtw import Word, group_words, snap_to_onsets, token_frames
from pipeline.asr.errors import AsrError
from pipeline.asr.model import KVCache
from pipeline.asr.packing import RATE, PackedWindow, pack_regions
from pipeline.asr.transcript import CallTranscript, Segment
from pipeline.asr.windows import WindowRunner
from pipeline.numbers.backstop import fail_closed
from pipeline.numbers.model import SegmentText
from pipeline.numbers.normalize import normalize
from pipeline.numbers.pii import find_pii

WordMode = Literal["pii", "all", "off"]
PAD_S = 0.25  # audio kept either side of a segment's decoder times (they are cut tight)
# A token's row is the query that predicts it (at the position before it), as Whisper reads the
# heads; the token's own position measured about one word late (+0.29 s median on tools/eval_words).
ROW_SHIFT = -1
SNAP = True  # word starts moved to the onset after the nearest quiet point (pipeline.asr.dtw.snap_to_onsets)
UNSPACED = frozenset({"zh", "ja", "th", "lo", "my", "km", "yue", "bo"})  # one character per word


class ChannelStreams(Protocol):
    """What the aligner reads of a first-pass window: its call, channel and 16 kHz audio."""

    call: int
    channel: int
    stream: np.ndarray


def segments_to_time(segments: Sequence[Segment], mode: WordMode) -> list[int]:
    """Indices of the segments to time: all, none, or those a PII number (the QA detector's,
    or its fail-closed backstop's long digit runs, within a segment or across two, or a number
    said but not heard as digits: pipeline.numbers.unheard) lies in."""
    if mode == "off":
        return []
    if mode == "all":
        return list(range(len(segments)))
    texts = [SegmentText(s.role, s.channel, s.start_s, s.end_s, s.text) for s in segments]
    norms = [normalize(t.text) for t in texts]
    return fail_closed(texts, norms, find_pii(texts, norms)).touched()


@dataclass(frozen=True, eq=False)
class _AlignWindow:
    """Packed audio of some segments of one channel, as a batch-planner item."""

    call: int
    channel: int
    packed: PackedWindow
    stream: np.ndarray = field(repr=False)
    segments: tuple[int, ...]  # indices in the call's segment list

    @property
    def duration_s(self) -> float:
        return self.packed.duration_s


class WordAligner:
    """Word times through the engine's model, memory pool and batch planner."""

    def __init__(self, engine: WindowRunner, mode: WordMode, max_window_s: float, join_gap_s: float) -> None:
        heads = engine.tokenizer.alignment_heads
        if not heads:
            raise AsrError("this model lists no alignment heads (config.json 'alignment_heads'): word timing is off")
        self.engine, self.mode = engine, mode
        self.max_window_s, self.join_gap_s = max_window_s, join_gap_s  # the engine's packing of windows
        self.by_layer: dict[int, list[int]] = {}
        for layer, head in heads:
            self.by_layer.setdefault(layer, []).append(head)
        self.seconds = 0.0
        self.windows = 0
        self.segments = 0
        self.too_long = 0  # segments left untimed: their text does not fit the token context

    def run(self, transcripts: list[CallTranscript], windows: Sequence[ChannelStreams]) -> list[CallTranscript]:
        started = time.perf_counter()
        streams = {(w.call, w.channel): w.stream for w in windows}
        items = [item for i, t in enumerate(transcripts) for item in self._windows(i, t, streams)]
        words: dict[tuple[int, int], tuple[tuple[float, float, str], ...]] = {}
        for batch in self.engine.plan_windows(items):
            for item, per_segment in zip(batch.items, self._align_batch(batch, transcripts), strict=True):
                words.update(((item.call, k), w) for k, w in per_segment.items())
        spent = time.perf_counter() - started
        self.seconds += spent
        self.windows += len(items)
        self.segments += len(words)
        out = []
        for i, t in enumerate(transcripts):
            segs = [
                dataclasses.replace(s, words=words[i, k]) if (i, k) in words else s for k, s in enumerate(t.segments)
            ]
            share = sum(w.duration_s for w in items if w.call == i) / max(1e-9, sum(w.duration_s for w in items))
            out.append(dataclasses.replace(t, segments=segs, timings={**t.timings, "words_s": spent * share}))
        return out

    def _windows(self, call: int, t: CallTranscript, streams: dict[tuple[int, int], np.ndarray]) -> list[_AlignWindow]:
        chosen = segments_to_time(t.segments, self.mode)
        out = []
        max_s = self.max_window_s
        for channel in sorted({t.segments[k].channel for k in chosen}):
            stream = streams.get((call, channel))
            if stream is None:
                continue
            mine = [k for k in chosen if t.segments[k].channel == channel]
            regions = []
            for k in mine:
                s = t.segments[k]
                pad = max(0.0, min(PAD_S, (max_s - (s.end_s - s.start_s)) / 2))
                lo, hi = max(0, int((s.start_s - pad) * RATE)), min(len(stream), int(math.ceil((s.end_s + pad) * RATE)))
                if hi > lo:
                    regions.append((lo, hi))
            for packed in pack_regions(regions, max_s, self.join_gap_s, balance=True):
                inside = tuple(k for k in mine if _holds(packed, (t.segments[k].start_s + t.segments[k].end_s) / 2))
                if inside:
                    out.append(_AlignWindow(call, channel, packed, stream, inside))
        return out

    @torch.inference_mode()
    def _align_batch(self, batch, transcripts: list[CallTranscript]) -> list[dict[int, tuple]]:  # noqa: ANN001
        """One encode and one teacher-forced pass for a batch of windows -> per window, segment
        index -> its words in call time."""
        engine = self.engine
        items: list[_AlignWindow] = batch.items
        memories = [engine.encode_windows(bucket_s, [items[i] for i in rows]) for bucket_s, rows in batch.groups()]
        cache = engine.pool.kv_cache(batch.padded_s, len(items))
        engine.decoder.fill_cross(memories, cache)
        frames = [t for m in memories for t in [m.shape[1]] * m.shape[0]]
        rows = [self._row_tokens(item, transcripts[item.call].segments, cache.self_kv.shape[4]) for item in items]
        prefix_len = len(rows[0][0])
        length = max(len(p) + len(toks) for p, toks, _ in rows)
        eot = engine.tokenizer.special.eot
        ids = torch.full((len(items), length), eot, dtype=torch.long, device=cache.cross_kv.device)
        for r, (prefix, toks, _) in enumerate(rows):
            ids[r, : len(prefix) + len(toks)] = torch.tensor(prefix + toks, dtype=torch.long)
        scores = self._scores(ids, cache)  # (B, heads, L, T)
        out = []
        for r, (item, (_, toks, owners)) in enumerate(zip(items, rows, strict=True)):
            n_frames = min(frames[r], int(math.ceil(item.duration_s / TIME_STEP_S)))
            if not toks or n_frames < len(toks):
                out.append({})
                continue
            s = (
                scores[r, :, prefix_len + ROW_SHIFT : prefix_len + ROW_SHIFT + len(toks), :n_frames]
                .float()
                .cpu()
                .numpy()
            )
            start, end = token_frames(s)
            out.append(self._words(item, transcripts[item.call].segments, toks, owners, start, end))
        return out

    def _row_tokens(
        self, item: _AlignWindow, segments: list[Segment], max_tokens: int
    ) -> tuple[list[int], list[int], list[int]]:
        """(prefix, text tokens of the window's segments in order, owning segment of each)."""
        tok = self.engine.tokenizer
        sp = tok.special
        language = segments[item.segments[0]].language or "en"
        prefix = [
            sp.sot,
            tok.language_id(language) if language in sp.languages else sp.languages["en"],
            sp.transcribe,
            sp.no_timestamps,
        ]
        toks: list[int] = []
        owners: list[int] = []
        for k in item.segments:
            text = segments[k].text.strip()
            ids = tok.encode(text if segments[k].language in UNSPACED else " " + text)
            if len(prefix) + len(toks) + len(ids) + 1 > max_tokens:
                self.too_long += 1
                continue
            toks += ids
            owners += [k] * len(ids)
        return prefix, toks, owners

    def _scores(self, ids: Tensor, cache: KVCache) -> Tensor:
        """Teacher-forced decoder pass over ids (B, L) -> the alignment heads' scaled
        cross-attention scores (B, heads, L, T); stops after the last alignment layer."""
        dec = self.engine.model.decoder
        x = dec.token_embedding(ids) + dec.positional[: ids.shape[1]]
        last = max(self.by_layer)
        picked = []
        for i, block in enumerate(dec.blocks):
            x = x + block.attn.forward_cached(block.attn_ln(x), cache.self_kv[i], 0)
            h = block.cross_attn_ln(x)
            attn = block.cross_attn
            if i in self.by_layer:
                heads = self.by_layer[i]
                q = attn._heads(attn.q(h))[:, heads].float()  # (B, h, L, Dh)
                k = cache.cross_kv[i, 0][:, heads].float()  # (B, h, T, Dh)
                picked.append(torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1]))
            if i == last:
                break
            x = x + attn.forward_cross(h, cache.cross_kv[i], cache.cross_mask)
            x = x + block.mlp(block.mlp_ln(x))
        return torch.cat(picked, dim=1)

    def _words(
        self,
        item: _AlignWindow,
        segments: list[Segment],
        toks: list[int],
        owners: list[int],
        start: np.ndarray,
        end: np.ndarray,
    ) -> dict[int, tuple[tuple[float, float, str], ...]]:
        """Token frames -> each segment's words in call time."""
        tok = self.engine.tokenizer
        out: dict[int, tuple[tuple[float, float, str], ...]] = {}
        placed: int | None = None  # piece of the window's last word so far
        for k in dict.fromkeys(owners):
            idx = [i for i, o in enumerate(owners) if o == k]
            pieces, unit, written = [], [], ""
            for i in idx:  # decodable units: a character may take several byte tokens
                unit.append(i)
                text = tok.piece([toks[j] for j in idx[: idx.index(i) + 1]])  # a lone token loses its space
                if "\ufffd" not in text:
                    pieces.append((text[len(written) :], start[unit[0]] * TIME_STEP_S, end[unit[-1]] * TIME_STEP_S))
                    unit, written = [], text
            words: list[Word] = group_words(pieces, spaced=segments[k].language not in UNSPACED)
            # a segment's words stay within its own padded time: two segments packed into one window
            # (a card number, then "the code is 731" 5 s later) had the card's last digits aligned
            # into the next segment's audio, and redaction cut 5 s of the other party's question
            lo_s, hi_s = segments[k].start_s - PAD_S, segments[k].end_s + PAD_S
            called, earliest = [], []
            for w in words:
                a, b = item.packed.span_to_call_s(w.start_s, w.end_s)
                a = min(max(a, lo_s), hi_s)
                called.append(Word(a, min(max(b, a), hi_s), w.text))
                piece = item.packed.piece_of(w.start_s, w.end_s)
                # the first word in a piece after a join: the word before it took the join's frames
                # and the piece's lead-in, so its onset is searched from the piece's start
                first = piece is not None and piece != placed
                from_s = max(lo_s, item.packed.pieces[piece].src_start / RATE) if first and piece is not None else None
                earliest.append(from_s)
                placed = piece if piece is not None else placed
            if SNAP:
                called = snap_to_onsets(called, item.stream, RATE, earliest=earliest)
            out[k] = tuple((round(w.start_s, 3), round(w.end_s, 3), w.text) for w in called)
        return out


def _holds(packed: PackedWindow, t_s: float) -> bool:
    return any(p.src_start <= t_s * RATE <= p.src_end for p in packed.pieces)

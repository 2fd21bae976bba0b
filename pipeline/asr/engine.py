"""The engine facade: calls in, transcripts out, with windows from many calls batched together.

Flow of :meth:`Engine.transcribe_batch`: resample each call to 16 kHz, find
speech regions per channel (VAD) and pack them into windows of up to 30 s
(:mod:`pipeline.asr.packing`), plan model batches of windows by length bucket
under the batch budget (:mod:`pipeline.batching`), run log-mel + encoder +
batched timestamped decoding per batch on pool buffers, re-decode windows
that loop or overflow piece by piece, and map each window's timed text back to
call time (:mod:`pipeline.asr.timing`). Every window is computed at its own
bucket length whatever it is batched with, so batched output equals
one-at-a-time output.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from pipeline.asr.alignment import WordAligner, WordMode
from pipeline.asr.audio import CallAudio, at_speech_level, piece_gain, resample
from pipeline.asr.convert import load_converted
from pipeline.asr.decode import (
    LOOP_PERIOD_TOKENS,
    PHRASE_PERIOD_TOKENS,
    PROMPT_TOKENS,
    TIME_STEP_S,
    DecodeOptions,
    DecodeStats,
    GreedyDecoder,
    Heard,
    WindowDecode,
)
from pipeline.asr.devices import Device, DtypeName, OutputName, resolve_device
from pipeline.asr.errors import AsrError
from pipeline.asr.features import SAMPLE_RATE, LogMel
from pipeline.asr.int8 import int8_rows
from pipeline.asr.memory import BucketShape, MemoryPool
from pipeline.asr.model import TiedOutput, Whisper
from pipeline.asr.number_pass import FALLBACK_TEMPERATURES, NumberPass
from pipeline.asr.packing import PackedWindow, pack_regions
from pipeline.asr.registry import lookup, resolve_files
from pipeline.asr.separation import MonoSeparator
from pipeline.asr.text import to_simplified
from pipeline.asr.timing import MIN_SKIPPED_S, TimedSpan, coverage, timed_spans, window_texts
from pipeline.asr.tokenizer import WhisperTokenizer
from pipeline.asr.transcript import BatchStats, CallTranscript, DropReason, EngineStats, Segment, Untranscribed
from pipeline.asr.vad import SileroVad, VadOptions
from pipeline.asr.windows import Encodable, W
from pipeline.batching import BatchBudget, MixedBatch, plan_mixed

# Each window is encoded at the smallest bucket that holds it and a batch is decoded together
# whatever its buckets, so fine buckets cost the decoder nothing: a 1 s grid from 10 s wastes
# little padding. Shortened contexts measured within 0.5 points WER/CER of the full 30 s one,
# and 10 s is the floor (a 5 s floor was no more accurate; see pipeline/asr/README.md).
BUCKETS_S = tuple(float(s) for s in range(10, 31))
FULL_CONTEXT_S = (30.0,)
OUTPUT_RESCORE = 32  # tokens per step whose logits a narrowed vocabulary projection computes exactly
MIN_PROGRESS_S = 0.5  # a resume point earlier than this means the decode made no progress
Quantize = Literal["none", "int8"]


@dataclass(frozen=True)
class EngineOptions:
    """Engine configuration (read once at the edge, then frozen).

    buckets_s: encoder lengths windows are padded to; ``(30.0,)`` reproduces
        Whisper's fixed 30 s context; None takes ``BUCKETS_S`` (every 1 s from 10 to 30 s, on every device).
    max_batch_items / max_batch_audio_s: the batch budget, counted in padded
        (computed) seconds; it also sizes the memory pool.
    pack_windows: join a channel's turns into windows of up to 30 s (False: one
        window per turn, the baseline packing is measured against).
    balance_windows: even out the lengths of a channel's windows (same count) instead of
        filling each to 30 s and leaving a short last one.
    join_gap_s: silence kept between two speech regions joined in a window.
    split_pause_s: a segment running across a join whose pause in the call is
        longer than this is split there (the other party spoke in between).
    compression_ratio_threshold: a segment whose text compresses better than
        this is a loop: decoding resumes after the segments before it.
    min_resume_s: a window the model ended early with more audio than this
        after its last segment is decoded again from there.
    max_passes: decoding passes at most (the first plus resumptions).
    no_speech_threshold / logprob_threshold: Whisper's rule for dropping a
        window the model thinks holds no speech (belt and braces after VAD).
    dtype: "auto" is fp32 on CPU (bf16 there, even with AMX, was no faster on real batches, and its
        kernels are chosen by row count, so a window's text would depend on its batch-mates), bf16
        on accelerators that support it, else fp16.
    quantize: int8 dynamic quantisation of the linear layers (CPU; off by default, see README).
    encoder_dtype: the encoder's; "auto" is bf16 on CPUs that compute it natively (AMX: about 2.5x
        faster), else the model's dtype. On CPU each window is encoded alone, so its features
        never depend on its batch-mates whatever the kernels.
    cross_kv_dtype: the decoder's cross-attention cache; "auto" is bf16 on CPUs that compute it
        natively (the step reads the whole cache, so half the bytes is most of its cost), else
        the model's dtype.
    output_dtype: the decoder's vocabulary projection's candidates; "auto" is int8 on CPU (fbgemm's
        dynamic kernel), else as ``cross_kv_dtype``; the 32 likeliest tokens per step and every
        timestamp are computed again in the model's dtype (:class:`pipeline.asr.model.TiedOutput`).
    decoder_linears: the decoder blocks' linear layers (not the cross-attention's keys/values,
        computed once per window from the encoder output); "auto" is int8 with a scale per row
        on a CPU with VNNI where the cross-attention cache is fp32 (:mod:`pipeline.asr.int8`; each
        row's result is its own, whatever its batch-mates), else the model's dtype.
    initial_prompt: text the decoder sees as the previous window's (hotwords: product names,
        disclosure wording); it biases spelling and vocabulary. Cut to its last tokens so the
        prompt, the task tokens and ``max_new_tokens`` fit the text context.
    number_languages: languages in which the stretches where a long number is said are decoded
        a second time with a digits prompt (:mod:`pipeline.asr.number_pass`); empty: off.
    raise_quiet_calls: bring a call peaking under -20 dBFS up to -6 dBFS before VAD and
        features (:func:`pipeline.asr.audio.at_speech_level`).
    separate_mono / agent_phrases: label a mono (``mixed``) call's segments agent / customer by
        speaker separation (:mod:`pipeline.asr.separation`); the voice saying the agent phrases
        (the rule packs' disclosures, as plain strings) is the agent. No phrases: off.
    word_timestamps: word-level times on the segments that hold a PII number ("pii"), on every
        segment ("all"), or none ("off") (:mod:`pipeline.asr.alignment`).
    """

    model: str = "whisper-base"
    model_sha256: str | None = None
    cache_dir: Path = Path("~/.cache/callqa/models")
    device: str = "auto"
    dtype: DtypeName = "auto"
    quantize: Quantize = "none"
    encoder_dtype: DtypeName = "auto"
    cross_kv_dtype: DtypeName = "auto"
    output_dtype: OutputName = "auto"
    decoder_linears: Literal["auto", "float", "int8"] = "auto"
    threads: int | None = None
    language: str | None = None
    candidate_languages: tuple[str, ...] = ("zh", "en")
    max_batch_items: int = 16
    max_batch_audio_s: float = 480.0
    buckets_s: tuple[float, ...] | None = None
    vad: VadOptions = VadOptions()
    pack_windows: bool = True
    balance_windows: bool = True
    join_gap_s: float = 0.3
    split_pause_s: float = 1.0
    max_new_tokens: int = 224
    compact_fraction: float = 0.25
    compression_ratio_threshold: float = 2.4
    min_resume_s: float = 1.0
    max_passes: int = 4
    no_speech_threshold: float = 0.6
    logprob_threshold: float = -1.0
    simplified_chinese: bool = True
    initial_prompt: str | None = None
    number_languages: tuple[str, ...] = ()
    raise_quiet_calls: bool = True
    separate_mono: bool = True
    agent_phrases: tuple[str, ...] = ()
    word_timestamps: WordMode = "pii"


@dataclass(frozen=True)
class _Decoded:
    """One decode of (part of) a window: its kept timed texts (none after a loop or a cut-off)."""

    window: _Window
    result: WindowDecode
    spans: list[tuple[TimedSpan, str]]
    # pieces of the window the VAD heard speech in that come out with no text, and why
    dropped: tuple[tuple[int, DropReason], ...] = ()


@dataclass(frozen=True, eq=False)
class _Window:
    """A packed window of one call channel, as a batch-planner item."""

    call: int
    channel: int
    packed: PackedWindow
    stream: np.ndarray = field(repr=False)  # the channel's 16 kHz samples
    temperature: float = 0.0  # a fallback decode's (0: greedy)
    heard: Heard | None = None  # the language its whole window was decoded in (a later pass's part of it)
    # the rest of a window whose decode looped or was cut off: it starts where the model was still
    # reading speech, mid-turn, where the no-speech figure reads high (see Engine._decode)
    mid_turn: bool = False

    @property
    def duration_s(self) -> float:
        return self.packed.duration_s


class Engine:
    """Loaded model, tokenizer, VAD, memory pool and device; reuse across batches."""

    def __init__(self, opts: EngineOptions, model: Whisper, tokenizer: WhisperTokenizer, device: Device,
                 model_name: str, model_version: str) -> None:
        self.opts = opts
        self.model, self.tokenizer, self.device = model, tokenizer, device
        self.model_name, self.model_version = model_name, model_version
        self.budget = BatchBudget(opts.max_batch_items, opts.max_batch_audio_s)
        self.buckets_s = tuple(sorted(opts.buckets_s or BUCKETS_S))
        if self.buckets_s[-1] > model.dims.n_audio_ctx * 2 / 100 or self.buckets_s[-1] < opts.vad.max_window_s:
            raise AsrError(f"largest bucket must be >= the VAD window limit and <= the model context: {self.buckets_s}")
        self.vad = SileroVad(opts.vad)
        self.vad.regions(np.zeros(SAMPLE_RATE, dtype=np.float32))  # first-use costs at load, not per call
        self.mel = LogMel(model.dims.n_mels, device.torch_device)
        prompt = _prompt_tokens(tokenizer, opts, model.dims.n_text_ctx)
        self.decoder = GreedyDecoder(model, tokenizer, DecodeOptions(
            language=opts.language, candidate_languages=opts.candidate_languages,
            max_new_tokens=opts.max_new_tokens, compact_fraction=opts.compact_fraction,
            prompt_tokens=prompt, loop_period=LOOP_PERIOD_TOKENS, phrase_period=PHRASE_PERIOD_TOKENS))
        shapes = [BucketShape(b, self.budget.items_for(b)) for b in self.buckets_s]
        max_tokens = 1 + (len(prompt) + 1 if prompt else 0) + PROMPT_TOKENS + opts.max_new_tokens
        self.pool = MemoryPool(model.dims, shapes, max_tokens, device.torch_device, model.dtype,
                               device.cross_kv_dtype(model.dtype, opts.cross_kv_dtype))
        self.stats = EngineStats()
        self.last_batch_stats: list[BatchStats] = []
        self.numbers = NumberPass(self, opts.number_languages, opts.compact_fraction) if opts.number_languages else None
        self.separator = MonoSeparator(opts.agent_phrases) if opts.separate_mono and opts.agent_phrases else None
        self._mono: dict[int, tuple[np.ndarray, list[tuple[int, int]]]] = {}  # this batch's mono calls
        self.words = (
            WordAligner(self, opts.word_timestamps, opts.vad.max_window_s, opts.join_gap_s)
            if opts.word_timestamps != "off" else None
        )

    @classmethod
    def load(cls, opts: EngineOptions) -> Engine:
        """Resolve, verify and convert the model files, then build everything on the device."""
        device = resolve_device(opts.device)
        device.configure_allocator()
        if opts.threads:
            torch.set_num_threads(opts.threads)
        entry = lookup(opts.model, opts.model_sha256)
        files = resolve_files(entry, Path(opts.cache_dir).expanduser())
        dims, state = load_converted(files)
        tokenizer = WhisperTokenizer(files.tokenizer_json, files.config_json)
        with torch.device("meta"):  # no random init of weights that are replaced at once (~1 s on CPU)
            model = Whisper(dims)
        model.load_state_dict({k: v.to(torch.float32) for k, v in state.items()}, assign=True)
        dtype = device.inference_dtype(opts.dtype)
        model = model.to(device=device.torch_device, dtype=dtype).eval()
        if device.wants_int8(opts.quantize):
            if dtype != torch.float32:
                raise AsrError("int8 quantisation needs dtype='float32'")
            model = model.quantized()
        else:
            model.encoder.to(device.encoder_dtype(dtype, opts.encoder_dtype))
            if device.int8_decoder_linears(dtype, opts.decoder_linears, device.cross_kv_dtype(dtype, opts.cross_kv_dtype)):
                for block in model.decoder.blocks:
                    int8_rows(block, keep=("kv",))
            if isinstance(model.decoder.output, TiedOutput):
                model.decoder.output.narrow(device.output_kind(dtype, opts.output_dtype), OUTPUT_RESCORE,
                                            exact_from=tokenizer.special.timestamp_begin)
        return cls(opts, model, tokenizer, device, entry.name, f"{entry.version}@{files.sha256[:12]}")

    # -- public -------------------------------------------------------------------------------

    def transcribe(self, call: CallAudio) -> CallTranscript:
        return self.transcribe_batch([call])[0]

    def transcribe_batch(self, calls: Sequence[CallAudio]) -> list[CallTranscript]:
        """Transcribe calls together; windows of all calls share model batches."""
        timings = [defaultdict(float) for _ in calls]
        self.last_batch_stats = []
        windows, faint = self._find_windows(calls, timings)
        decoded = self._decode(windows, timings)
        out = [self._assemble(i, call, [d for w in windows if w.call == i for d in decoded[id(w)]], timings[i],
                              faint[i])
               for i, call in enumerate(calls)]
        if self.numbers is not None:
            out = self.numbers.run(out, windows)
        if self.separator is not None:  # mono calls: who spoke when (after VAD and transcription)
            out = [self.separator.apply(t, *self._mono[i]) if i in self._mono else t for i, t in enumerate(out)]
            self._mono = {}
        if self.words is not None:
            out = self.words.run(out, windows)
        return out

    # -- stages -------------------------------------------------------------------------------

    def _find_windows(
        self, calls: Sequence[CallAudio], timings: list[defaultdict]
    ) -> tuple[list[_Window], list[list[Untranscribed]]]:
        """The calls' packed windows, and per call its faint speech (not decoded: pipeline/asr/vad.py)."""
        windows: list[_Window] = []
        faint: list[list[Untranscribed]] = []
        resampled = []
        for i, call in enumerate(calls):
            t0 = time.perf_counter()
            samples = resample(call.samples, call.sample_rate, SAMPLE_RATE)
            resampled.append(at_speech_level(samples) if self.opts.raise_quiet_calls else samples)
            timings[i]["resample_s"] += time.perf_counter() - t0
        t1 = time.perf_counter()
        speeches = self.vad.calls_speech(resampled)  # every channel of every call on the VAD's threads at once
        vad_s, audio_s = time.perf_counter() - t1, max(sum(c.duration_s for c in calls), 1e-9)
        for i, (call, samples, speech) in enumerate(zip(calls, resampled, speeches, strict=True)):
            timings[i]["vad_s"] += vad_s * call.duration_s / audio_s  # the calls' VAD ran together: by duration
            faint.append([Untranscribed(ch, a / SAMPLE_RATE, b / SAMPLE_RATE, "faint")
                          for ch, s in enumerate(speech) for a, b in s.faint])
            for ch, regions in enumerate(s.regions for s in speech):
                stream = np.ascontiguousarray(samples[ch])
                if self.separator is not None and self.separator.wants(call.roles):
                    self._mono[i] = (stream, regions)
                for packed in pack_regions(regions, self.opts.vad.max_window_s, self.opts.join_gap_s,
                                           self.opts.balance_windows):
                    turns = [packed] if self.opts.pack_windows else packed.unpacked()
                    windows += [_Window(i, ch, w, stream) for w in turns]
        return windows, faint

    def _decode(self, windows: list[_Window], timings: list[defaultdict]) -> dict[int, list[_Decoded]]:
        """Decode every window, then, in further batched passes, what a pass left out: the rest
        of a window after a loop, a cut-off or an early end; a window that loops from its start
        is decoded piece by piece."""
        out: dict[int, list[_Decoded]] = {id(w): [] for w in windows}
        todo = [(w, id(w)) for w in windows]
        for n_pass in range(self.opts.max_passes):
            results = self._run_all([w for w, _ in todo], timings)
            later = []
            for w, origin in todo:
                result = results[id(w)]
                # a rest cut mid-turn is not judged by the no-speech rule: its window was heard as
                # speech, and a turn's second half opens with no speech onset (benchI check call 5:
                # "on the next 50 months. Your plan costs ..." read 0.80 no-speech, dropped whole)
                if not w.mid_turn and not self._keep(result):  # no speech after all
                    if n_pass < self.opts.max_passes - 1 and len(w.packed.pieces) > 1:
                        # the VAD heard speech in each piece: one noisy or quiet piece must not
                        # take a window's other turns with it, so each is judged alone (in the
                        # language of the window it was cut from, if any: its own is unsure)
                        again = w.packed.unpacked()
                        later += [(_Window(w.call, w.channel, p, w.stream, heard=w.heard), origin) for p in again]
                        self.stats.redecoded_windows += len(again)
                        continue
                    self.stats.no_speech_windows += 1
                    every = tuple((i, "no_speech") for i in range(len(w.packed.pieces)))
                    out[origin].append(_Decoded(w, result, [], every))
                    continue
                spans = [(span, self.text_of(list(span.tokens), result.language)) for span in
                         timed_spans(result.tokens, self.tokenizer.special.timestamp_begin, TIME_STEP_S, w.duration_s)]
                cover = coverage(spans, w.packed, result.complete, self.opts.compression_ratio_threshold,
                                 self.opts.min_resume_s)
                if n_pass == self.opts.max_passes - 1:  # no pass left for what this one left out
                    lost = _left_out(w.packed, cover.skipped, cover.resume_s)
                    self.stats.undecoded_pieces += len(lost)
                    out[origin].append(_Decoded(w, result, spans[: cover.kept], lost))
                    continue
                heard = w.heard or result.heard  # what is left of a window is decoded in its language
                # read again from an earlier turn with audio ahead: its times ran ahead of the audio,
                # so its spans may sit on turns it never transcribed; none is kept
                rewound = cover.rewound and len(w.packed.pieces) > 1
                kept = 0 if rewound else cover.kept
                looped = kept == 0 and cover.resume_s is not None and cover.resume_s < MIN_PROGRESS_S
                last_try = looped and len(w.packed.pieces) == 1 and w.temperature >= FALLBACK_TEMPERATURES[-1]
                out[origin].append(_Decoded(w, result, spans[:kept], ((0, "loop"),) if last_try else ()))
                again: list[PackedWindow] = []
                if rewound:  # shorter context, one piece at a time
                    again = w.packed.unpacked()
                    self.stats.rewound_windows += 1
                elif cover.skipped:  # speech the decode stepped over (another voice in a mono mix), alone
                    again = [w.packed.only(cover.skipped, self.opts.join_gap_s)]
                    self.stats.skipped_pieces += len(cover.skipped)
                if rewound or cover.resume_s is None:
                    pass
                elif cover.resume_s >= MIN_PROGRESS_S:
                    rest = w.packed.after(cover.resume_s)
                    if rest is not None:
                        # a sliver (under min_resume_s) is judged as any window
                        mid_turn = cover.mid_turn and rest.duration_s > self.opts.min_resume_s
                        later.append((_Window(w.call, w.channel, rest, w.stream, heard=heard, mid_turn=mid_turn),
                                      origin))
                        self.stats.redecoded_windows += 1
                elif len(w.packed.pieces) > 1:  # nothing usable from the start: shorter context, one piece at a time
                    again = w.packed.unpacked()
                elif not last_try:  # one piece that loops from its start: again, warmer (Whisper's fallback)
                    hotter = min(t for t in FALLBACK_TEMPERATURES if t > w.temperature)
                    later.append((_Window(w.call, w.channel, w.packed, w.stream, hotter, heard, w.mid_turn), origin))
                    self.stats.redecoded_windows += 1
                elif not again:  # nothing of it kept: said in the transcript, not dropped quietly
                    self.stats.undecoded_pieces += 1
                later += [(_Window(w.call, w.channel, p, w.stream, heard=heard), origin) for p in again]
                self.stats.redecoded_windows += len(again)
            if not later:
                break
            todo = later
        return out

    def _run_all(self, windows: list[_Window], timings: list[defaultdict]) -> dict[int, WindowDecode]:
        decoded: dict[int, WindowDecode] = {}
        for batch in self.plan_windows(windows):
            results, stats, wall_s = self._run_batch(batch)
            self.last_batch_stats.append(stats)
            self.stats.add(stats)
            for item, result in zip(batch.items, results):
                decoded[id(item)] = result
                # charge the batch's wall time to calls in proportion to their audio in it
                timings[item.call]["asr_s"] += wall_s * item.duration_s / max(batch.audio_s, 1e-9)
        return decoded

    def plan_windows(self, windows: Sequence[W]) -> list[MixedBatch[W]]:
        """Longest first; each window encoded at its own bucket, a batch decoded together,
        at most as many windows as the pool holds for the batch's longest bucket (also the
        later passes' planner: :class:`pipeline.asr.windows.WindowRunner`)."""
        return plan_mixed(windows, self.budget, self.buckets_s, self.pool.capacity)

    @property
    def model_batch_windows(self) -> int:
        """Whole 30 s windows one model batch holds: a worker's micro-batch holds a whole number of
        them (:func:`pipeline.stages.window_estimate.micro_batch_windows`)."""
        return self.pool.capacity(self.buckets_s[-1])

    @torch.inference_mode()
    def _run_batch(self, batch: MixedBatch[_Window]) -> tuple[list[WindowDecode], BatchStats, float]:
        n = len(batch.items)
        t0 = time.perf_counter()
        memories = [self.encode_windows(bucket_s, [batch.items[i] for i in rows]) for bucket_s, rows in batch.groups()]
        self.device.synchronize()
        t1 = time.perf_counter()
        dstats = DecodeStats()
        temps = [item.temperature for item in batch.items]
        heard = [item.heard for item in batch.items]
        results = self.decoder.decode(memories, self.pool.kv_cache(batch.padded_s, n),
                                      [item.duration_s for item in batch.items], dstats,
                                      temperatures=temps if any(temps) else None,
                                      heard=heard if any(heard) else None)
        self.device.synchronize()
        t2 = time.perf_counter()
        mem = self.device.memory_bytes()
        stats = BatchStats(
            items=n, bucket_s=batch.padded_s, audio_s=batch.audio_s, computed_s=batch.computed_s,
            speech_s=sum(item.packed.speech_s for item in batch.items),
            encode_s=t1 - t0, decode_s=t2 - t1, decode_steps=dstats.steps,
            decode_row_steps=dstats.row_steps, compactions=dstats.compactions,
            memory_allocated_bytes=mem["allocated"], memory_reserved_bytes=mem["reserved"],
            memory_peak_bytes=mem["peak"])
        return results, stats, t2 - t0

    def encode_windows(self, bucket_s: float, items: Sequence[Encodable]) -> torch.Tensor:
        """Windows padded to one bucket -> encoder output (n, T, D)."""
        audio = self.pool.audio(bucket_s, len(items))
        for row, item in enumerate(items):
            for p in item.packed.pieces:
                piece = item.stream[p.src_start : p.src_end]
                gain = piece_gain(piece) if self.opts.raise_quiet_calls else 1.0
                audio[row, p.dst_start : p.dst_end] = torch.from_numpy(piece if gain == 1.0 else piece * np.float32(gain))
        mel = self.mel(audio, self.pool.shapes[bucket_s].mel_frames).to(self.model.encoder_dtype)
        if self.device.kind == "cpu":  # one window per call: no slower on CPU, and batch-invariant in bf16
            return torch.cat([self.model.encoder(mel[i : i + 1]) for i in range(len(items))]).to(self.model.dtype)
        return self.model.encoder(mel).to(self.model.dtype)

    def text_of(self, tokens: list[int], language: str) -> str:
        text = self.tokenizer.decode(tokens)
        return to_simplified(text) if language == "zh" and self.opts.simplified_chinese else text

    def _keep(self, result: WindowDecode) -> bool:
        """Whisper's silence rule: drop when no-speech is likely and the text is unsure."""
        o = self.opts
        return not (result.no_speech_prob > o.no_speech_threshold and result.avg_logprob < o.logprob_threshold)

    def _assemble(self, index: int, call: CallAudio, decoded: list[_Decoded],
                  timings: dict[str, float], faint: list[Untranscribed]) -> CallTranscript:
        segments: list[Segment] = []
        votes: dict[int, Counter] = defaultdict(Counter)
        weighted: dict[tuple[int, str], float] = defaultdict(float)  # language probability x seconds
        foreign: set[tuple[int, str]] = set()
        untranscribed = list(faint)
        for d in decoded:
            w, language = d.window, d.result.language
            # as for a piece stepped over, under MIN_SKIPPED_S of speech is no turn (a rest's last 36 ms)
            lost = [(w.packed.pieces[i], why) for i, why in d.dropped]
            untranscribed += [Untranscribed(w.channel, p.src_start / SAMPLE_RATE, p.src_end / SAMPLE_RATE, why)
                              for p, why in lost if p.voiced >= MIN_SKIPPED_S * SAMPLE_RATE]
            pieces = window_texts(d.spans, w.packed, self.opts.split_pause_s)
            seconds = sum(p.end_s - p.start_s for p in pieces)  # transcribed seconds
            votes[w.channel][language] += seconds
            weighted[w.channel, language] += seconds * d.result.language_prob
            if d.result.foreign:
                foreign.add((w.channel, language))
            segments += [Segment(role=call.roles[w.channel], channel=w.channel, start_s=round(p.start_s, 3),
                                 end_s=round(p.end_s, 3), text=p.text, language=language) for p in pieces]
        segments.sort(key=lambda s: (s.start_s, s.channel))
        languages = {ch: c.most_common(1)[0][0] for ch, c in sorted(votes.items()) if sum(c.values()) > 0}
        return CallTranscript(call_id=call.call_id, segments=segments, languages=languages,
                              model_name=self.model_name, model_version=self.model_version,
                              timings=dict(timings), duration_s=call.duration_s,
                              language_probs={ch: round(weighted[ch, lang] / votes[ch][lang], 3)
                                              for ch, lang in languages.items()},
                              unsupported={ch: lang for ch, lang in languages.items() if (ch, lang) in foreign},
                              untranscribed=sorted(untranscribed))


def _left_out(packed: PackedWindow, skipped: tuple[int, ...], resume_s: float | None
              ) -> tuple[tuple[int, DropReason], ...]:
    """The window's pieces a last decode left without text: those it stepped over, and those
    mostly after where it stopped (a loop, a cut-off or an early end) when there is no pass left."""
    after = set()
    if resume_s is not None:
        after = {i for i, p in enumerate(packed.pieces) if p.dst_start + p.length / 2 > resume_s * SAMPLE_RATE}
    return tuple((i, "stepped_over" if i in skipped else "unfinished") for i in sorted(after | set(skipped)))


def _prompt_tokens(tokenizer: WhisperTokenizer, opts: EngineOptions, n_text_ctx: int) -> tuple[int, ...]:
    """The initial prompt's tokens, its last ones kept where it is too long for the context."""
    if not opts.initial_prompt or not opts.initial_prompt.strip():
        return ()
    if tokenizer.special.sot_prev < 0:
        raise AsrError("this model's tokenizer has no <|startofprev|>: it cannot take an initial prompt")
    room = min(n_text_ctx // 2 - 1, n_text_ctx - (2 + PROMPT_TOKENS + opts.max_new_tokens))
    tokens = tokenizer.encode(" " + opts.initial_prompt.strip())
    return tuple(tokens[-room:]) if room > 0 else ()

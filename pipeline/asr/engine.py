"""The engine facade: calls in, transcripts out, with windows from many calls batched together.

Flow of :meth:`Engine.transcribe_batch`: resample each call to 16 kHz, find
speech windows per channel (VAD), plan model batches of windows by length
bucket under the batch budget (:mod:`pipeline.batching`), run log-mel +
encoder + batched greedy decoding per batch on pool buffers, and assemble
each call's segments in call time. Every window is computed at its own
bucket length whatever it is batched with, so batched output equals
one-at-a-time output.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from pipeline.asr.audio import CallAudio, resample
from pipeline.asr.convert import load_converted
from pipeline.asr.decode import PROMPT_TOKENS, DecodeOptions, DecodeStats, GreedyDecoder, WindowDecode, token_cap
from pipeline.asr.devices import Device, DtypeName, resolve_device
from pipeline.asr.errors import AsrError
from pipeline.asr.features import SAMPLE_RATE, LogMel
from pipeline.asr.memory import BucketShape, MemoryPool
from pipeline.asr.model import Whisper
from pipeline.asr.registry import lookup, resolve_files
from pipeline.asr.text import to_simplified
from pipeline.asr.tokenizer import WhisperTokenizer
from pipeline.asr.transcript import BatchStats, CallTranscript, EngineStats, Segment
from pipeline.asr.vad import SileroVad, SpeechWindow, VadOptions
from pipeline.batching import Batch, BatchBudget, plan_batches

# Measured on the test sets (tools/bench_engine.py): a 20 s bucket keeps WER/CER within 1 point of
# the fixed 30 s context (10 s and 15 s buckets cost Mandarin 1.4 and 1.1 points CER; 5 s loops).
DEFAULT_BUCKETS_S = (20.0, 30.0)
FULL_CONTEXT_S = (30.0,)


@dataclass(frozen=True)
class EngineOptions:
    """Engine configuration (read once at the edge, then frozen).

    buckets_s: encoder lengths windows are padded to; ``(30.0,)`` reproduces
        Whisper's fixed 30 s context. Shorter buckets shorten the encoder
        context for short windows (measured in tools/bench_engine.py).
    max_batch_items / max_batch_audio_s: the batch budget, counted in padded
        (computed) seconds; it also sizes the memory pool.
    no_speech_threshold / logprob_threshold: Whisper's rule for dropping a
        window the model thinks holds no speech (belt and braces after VAD).
    """

    model: str = "whisper-base"
    model_sha256: str | None = None
    cache_dir: Path = Path("~/.cache/callqa/models")
    device: str = "auto"
    dtype: DtypeName = "auto"
    threads: int | None = None
    language: str | None = None
    candidate_languages: tuple[str, ...] = ("zh", "en")
    max_batch_items: int = 16
    max_batch_audio_s: float = 240.0
    buckets_s: tuple[float, ...] = DEFAULT_BUCKETS_S
    vad: VadOptions = VadOptions()
    max_new_tokens: int = 224
    compact_fraction: float = 0.25
    no_speech_threshold: float = 0.6
    logprob_threshold: float = -1.0
    simplified_chinese: bool = True


@dataclass(frozen=True)
class _Window:
    """A speech window of one call channel, as a batch-planner item."""

    call: int
    channel: int
    span: SpeechWindow
    samples: np.ndarray = field(repr=False)

    @property
    def duration_s(self) -> float:
        return self.span.duration_s


class Engine:
    """Loaded model, tokenizer, VAD, memory pool and device; reuse across batches."""

    def __init__(self, opts: EngineOptions, model: Whisper, tokenizer: WhisperTokenizer, device: Device,
                 model_name: str, model_version: str) -> None:
        self.opts = opts
        self.model, self.tokenizer, self.device = model, tokenizer, device
        self.model_name, self.model_version = model_name, model_version
        self.budget = BatchBudget(opts.max_batch_items, opts.max_batch_audio_s)
        self.buckets_s = tuple(sorted(opts.buckets_s))
        if self.buckets_s[-1] > model.dims.n_audio_ctx * 2 / 100 or self.buckets_s[-1] < opts.vad.max_window_s:
            raise AsrError(f"largest bucket must be >= the VAD window limit and <= the model context: {self.buckets_s}")
        self.vad = SileroVad(opts.vad)
        self.vad.regions(np.zeros(SAMPLE_RATE, dtype=np.float32))  # first-use costs at load, not per call
        self.mel = LogMel(model.dims.n_mels, device.torch_device)
        self.decoder = GreedyDecoder(model, tokenizer, DecodeOptions(
            language=opts.language, candidate_languages=opts.candidate_languages,
            max_new_tokens=opts.max_new_tokens, compact_fraction=opts.compact_fraction))
        shapes = [BucketShape(b, self.budget.items_for(b)) for b in self.buckets_s]
        max_tokens = 1 + PROMPT_TOKENS + opts.max_new_tokens
        self.pool = MemoryPool(model.dims, shapes, max_tokens, device.torch_device, next(model.parameters()).dtype)
        self.stats = EngineStats()
        self.last_batch_stats: list[BatchStats] = []

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
        dtype = device.inference_dtype(opts.dtype)
        model = Whisper(dims)
        model.load_state_dict({k: v.to(torch.float32) for k, v in state.items()})
        model = model.to(device=device.torch_device, dtype=dtype).eval()
        tokenizer = WhisperTokenizer(files.tokenizer_json, files.config_json)
        return cls(opts, model, tokenizer, device, entry.name, f"{entry.version}@{files.sha256[:12]}")

    # -- public -------------------------------------------------------------------------------

    def transcribe(self, call: CallAudio) -> CallTranscript:
        return self.transcribe_batch([call])[0]

    def transcribe_batch(self, calls: Sequence[CallAudio]) -> list[CallTranscript]:
        """Transcribe calls together; windows of all calls share model batches."""
        timings = [defaultdict(float) for _ in calls]
        windows = self._find_windows(calls, timings)
        decoded: dict[int, WindowDecode] = {}
        self.last_batch_stats = []
        for batch in self._plan(windows):
            results, stats, wall_s = self._run_batch(batch)
            self.last_batch_stats.append(stats)
            self.stats.add(stats)
            for item, result in zip(batch.items, results):
                decoded[id(item)] = result
                # charge the batch's wall time to calls in proportion to their audio in it
                timings[item.call]["asr_s"] += wall_s * item.duration_s / max(batch.audio_s, 1e-9)
        return [self._assemble(i, call, [w for w in windows if w.call == i], decoded, timings[i])
                for i, call in enumerate(calls)]

    # -- stages -------------------------------------------------------------------------------

    def _find_windows(self, calls: Sequence[CallAudio], timings: list[defaultdict]) -> list[_Window]:
        windows: list[_Window] = []
        for i, call in enumerate(calls):
            t0 = time.perf_counter()
            samples = resample(call.samples, call.sample_rate, SAMPLE_RATE)
            t1 = time.perf_counter()
            for ch in range(call.channels):
                stream = np.ascontiguousarray(samples[ch])
                for span in self.vad.windows(stream):
                    windows.append(_Window(i, ch, span, stream[span.start : span.end]))
            timings[i]["resample_s"] += t1 - t0
            timings[i]["vad_s"] += time.perf_counter() - t1
        return windows

    def _plan(self, windows: list[_Window]) -> list[Batch[_Window]]:
        """Budgeted batches, split further where a batch exceeds its bucket's pool shape."""
        planned = []
        for batch in plan_batches(windows, self.budget, self.buckets_s):
            cap = self.pool.capacity(batch.padded_s)
            for start in range(0, len(batch.items), cap):
                planned.append(Batch(batch.items[start : start + cap], batch.padded_s))
        return planned

    @torch.inference_mode()
    def _run_batch(self, batch: Batch[_Window]) -> tuple[list[WindowDecode], BatchStats, float]:
        bucket_s, n = batch.padded_s, len(batch.items)
        shape = self.pool.shapes[bucket_s]
        t0 = time.perf_counter()
        audio = self.pool.audio(bucket_s, n)
        for row, item in enumerate(batch.items):
            audio[row, : item.samples.size] = torch.from_numpy(item.samples)
        dtype = next(self.model.parameters()).dtype
        mel = self.mel(audio, shape.mel_frames).to(dtype)
        memory = self.model.encoder(mel)
        self.device.synchronize()
        t1 = time.perf_counter()
        caps = [token_cap(item.duration_s, self.decoder.opts) for item in batch.items]
        dstats = DecodeStats()
        results = self.decoder.decode(memory, self.pool.kv_cache(bucket_s, n), caps, dstats)
        self.device.synchronize()
        t2 = time.perf_counter()
        mem = self.device.memory_bytes()
        stats = BatchStats(
            items=n, bucket_s=bucket_s, audio_s=batch.audio_s, computed_s=batch.computed_s,
            speech_s=sum(item.span.speech_s for item in batch.items),
            encode_s=t1 - t0, decode_s=t2 - t1, decode_steps=dstats.steps,
            decode_row_steps=dstats.row_steps, compactions=dstats.compactions,
            memory_allocated_bytes=mem["allocated"], memory_reserved_bytes=mem["reserved"],
            memory_peak_bytes=mem["peak"])
        return results, stats, t2 - t0

    def _keep(self, result: WindowDecode) -> bool:
        """Whisper's silence rule: drop when no-speech is likely and the text is unsure."""
        o = self.opts
        return not (result.no_speech_prob > o.no_speech_threshold and result.avg_logprob < o.logprob_threshold)

    def _assemble(self, index: int, call: CallAudio, windows: list[_Window],
                  decoded: dict[int, WindowDecode], timings: dict[str, float]) -> CallTranscript:
        segments: list[Segment] = []
        votes: dict[int, Counter] = defaultdict(Counter)
        for w in windows:
            result = decoded[id(w)]
            votes[w.channel][result.language] += w.span.speech_s
            text = self.tokenizer.decode(result.tokens)
            if result.language == "zh" and self.opts.simplified_chinese:
                text = to_simplified(text)
            if not text or not self._keep(result):
                continue
            segments.append(Segment(role=call.roles[w.channel], channel=w.channel, start_s=round(w.span.start_s, 3),
                                    end_s=round(w.span.end_s, 3), text=text, language=result.language))
        segments.sort(key=lambda s: (s.start_s, s.channel))
        languages = {ch: c.most_common(1)[0][0] for ch, c in sorted(votes.items())}
        return CallTranscript(call_id=call.call_id, segments=segments, languages=languages,
                              model_name=self.model_name, model_version=self.model_version,
                              timings=dict(timings), duration_s=call.duration_s)

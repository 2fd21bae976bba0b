"""One system of the engine benchmark over a saved corpus, in a process of its own (started by
tools/bench_engine.py, which times the whole process: interpreter start, imports, model load,
decoding the calls' audio and recognition, as a user's run would take).

Systems:
  callqa           the engine as ``callqa run`` builds it (pipeline.run.shipped_engine.load_engine: settings from
                   the environment, rule packs' hotwords, number pass as configured)
  callqa-<name>    the same engine options with CONFIGS[callqa-<name>]'s changes (ablations)
  fw-sequential    faster-whisper ``WhisperModel.transcribe``, int8, greedy, its silero VAD
  fw-batched       faster-whisper ``BatchedInferencePipeline.transcribe``, batch 8, int8, greedy, VAD
Both faster-whisper modes detect the language themselves (no hint), per channel, with the same
Whisper base weights as callqa.

Writes JSON: per call its segments ``[channel, start_s, end_s, text]`` and languages, plus timings.

  python -m tools.bench_system --system fw-batched --corpus DIR --out result.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from pipeline.asr import load_call_audio
from pipeline.asr.audio import resample
from pipeline.asr.engine import FULL_CONTEXT_S

ROLES = {0: "agent", 1: "customer"}

# name -> changes to the options ``callqa run`` builds (ablations; each a whole process like the rest)
CONFIGS: dict[str, dict[str, object]] = {
    "callqa": {},
    "callqa-fp32": {"encoder_dtype": "float32", "cross_kv_dtype": "float32"},
    "callqa-bf16": {"dtype": "bfloat16"},
    "callqa-int8": {"dtype": "float32", "quantize": "int8"},
    "callqa-encoder-bf16": {"encoder_dtype": "bfloat16"},
    "callqa-cross-bf16": {"cross_kv_dtype": "bfloat16"},
    "callqa-decoder-float": {"decoder_linears": "float"},  # the cache a CPU without bf16 instructions once got
    "callqa-30s": {"buckets_s": FULL_CONTEXT_S},
    "callqa-3buckets": {"buckets_s": (10.0, 20.0, 30.0)},
    "callqa-gap0.5": {"join_gap_s": 0.5},
    "callqa-per-turn": {"pack_windows": False},
    "callqa-greedy": {"balance_windows": False},
    "callqa-floor5": {"buckets_s": tuple(float(s) for s in range(5, 31))},
    # a pack's hotwords as the initial prompt (tools/eval_hotwords.py's terms): does it hurt other speech?
    "callqa-hotwords": {
        "initial_prompt": "FlexiSaver，PayGuard，Zenvia Platinum，CoverPlus，QuickLoan Max，"
        "尊享白金卡，分期乐，安心贷，金葵花，薪享通。"
    },
    "callqa-hotwords-en": {"initial_prompt": "FlexiSaver, PayGuard, Zenvia Platinum, CoverPlus, QuickLoan Max."},
    # the digit-biased second decode of number regions (pipeline/asr/number_pass.py)
    "callqa-numbers": {"number_languages": ("en", "zh")},
    "callqa-first-pass": {"number_languages": ()},
    # word times (issue 31): shipped on the segments holding a PII number ("pii"); none, or on every segment
    "callqa-words-off": {"word_timestamps": "off"},
    "callqa-words-all": {"word_timestamps": "all"},
    # speech kept before / after each VAD region (silero's own default is 30 ms both, faster-whisper's
    # 400 ms); a dict changes those fields of the shipped engine's own VadOptions, nothing else
    "callqa-onset60": {"vad": {"onset_pad_ms": 60}},
    "callqa-onset150": {"vad": {"onset_pad_ms": 150}},
    "callqa-pad200": {"vad": {"speech_pad_ms": 200, "onset_pad_ms": 200}},
    "callqa-no-faint": {"vad": {"faint_speech": False}},  # no faint speech looked for (pipeline/asr/vad.py)
}


def changed(opts: Any, changes: dict[str, Any]) -> Any:
    """``opts`` (a dataclass) with ``changes``; a dict value changes fields of a nested option set."""
    return replace(opts, **{k: changed(getattr(opts, k), v) if isinstance(v, dict) else v for k, v in changes.items()})


def run_callqa(name: str, wavs: list[bytes], device: str) -> tuple[list[dict], dict]:
    from pipeline.asr import Engine
    from pipeline.config import Settings
    from pipeline.run.shipped_engine import load_engine

    t0 = time.perf_counter()
    engine = load_engine(Settings(), device)
    discount_s = 0.0
    if name != "callqa":  # the shipped options, changed: the first load only read them (not timed)
        opts = changed(engine.opts, CONFIGS[name])
        del engine
        discount_s = time.perf_counter() - t0
        engine = Engine.load(opts)
    load_s = time.perf_counter() - t0 - discount_s
    results = engine.transcribe_batch([load_call_audio(w, roles=ROLES, call_id=f"c{i}") for i, w in enumerate(wavs)])
    calls = [
        {
            "segments": [[s.channel, s.start_s, s.end_s, s.text] for s in r.segments],
            "languages": {str(ch): lang for ch, lang in r.languages.items()},
            "untranscribed": [[u.channel, u.start_s, u.end_s, u.why] for u in r.untranscribed],
        }
        for r in results
    ]
    stats = engine.stats
    return calls, {
        "load_s": load_s,
        "discount_s": discount_s,
        "padding_efficiency": stats.padding_efficiency,
        "redecoded_windows": stats.redecoded_windows,
        "rewound_windows": stats.rewound_windows,
        "vad_s": sum(r.timings.get("vad_s", 0.0) for r in results),
    }


def run_faster_whisper(
    mode: str, wavs: list[bytes], device: str, threads: int, model_dir: Path
) -> tuple[list[dict], dict]:
    from faster_whisper import BatchedInferencePipeline, WhisperModel

    t0 = time.perf_counter()
    compute = "int8" if device == "cpu" else "int8_float16"
    model = WhisperModel(str(model_dir), device=device, compute_type=compute, cpu_threads=threads)
    batched = BatchedInferencePipeline(model) if mode == "fw-batched" else None
    load_s = time.perf_counter() - t0
    calls = []
    for wav in wavs:
        audio = load_call_audio(wav)
        samples = resample(audio.samples, audio.sample_rate, 16_000)
        segments, languages = [], {}
        for ch in range(audio.channels):
            if batched is not None:
                found, info = batched.transcribe(samples[ch], batch_size=8, language=None, vad_filter=True, beam_size=1)
            else:  # its defaults otherwise (timestamps, previous-text conditioning, temperature fallback)
                found, info = model.transcribe(samples[ch], language=None, vad_filter=True, beam_size=1)
            segments += [[ch, s.start, s.end, s.text.strip()] for s in found]
            languages[str(ch)] = info.language
        calls.append({"segments": segments, "languages": languages})
    return calls, {"load_s": load_s, "compute_type": compute}


def model_dir() -> Path:
    from pipeline.asr.registry import lookup, resolve_files
    from pipeline.config import Settings

    cfg = Settings()
    return resolve_files(lookup(cfg.asr_model), (cfg.cache_dir / "models").expanduser()).directory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--system", required=True)
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    entries = json.loads((args.corpus / "corpus.json").read_text())
    wavs = [(args.corpus / e["file"]).read_bytes() for e in entries]
    t0 = time.perf_counter()
    if args.system.startswith("fw-"):
        calls, extra = run_faster_whisper(args.system, wavs, args.device, args.threads, model_dir())
    else:
        import torch

        torch.set_num_threads(args.threads)
        calls, extra = run_callqa(args.system, wavs, args.device)
    extra["in_process_s"] = time.perf_counter() - t0
    args.out.write_text(json.dumps({"system": args.system, "calls": calls, **extra}, ensure_ascii=False))


if __name__ == "__main__":
    main()

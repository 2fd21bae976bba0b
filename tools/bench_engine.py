"""Benchmark the ASR engine against faster-whisper's two modes on the benchmark corpus, with
accuracy and speech coverage beside each, for the dev and the check part separately.

Corpus: tools/bench_corpus.py (templated two-party calls, English by espeak-ng, Mandarin from
the 25 fixture clips; varied voices, tempo, levels, noise, band, codecs, hold music; a dev part
to tune on and a check part, from other templates, fill-ins, voices, clips and seeds, only to
score). Systems (tools/bench_system.py), each run as a whole process of its own, one after the
other, on the same calls; wall time is that process's, from start to exit, so it includes
interpreter start, imports and model load, like a user's run; CPU time is the child process's:

  callqa          the engine as ``callqa run`` builds it (settings from the environment)
  fw-batched      faster-whisper ``BatchedInferencePipeline.transcribe(batch_size=8, language=None,
                  vad_filter=True)``, int8, greedy: its fastest mode
  fw-sequential   faster-whisper ``WhisperModel.transcribe``, int8, greedy, its VAD
  callqa-<name>   ablations (tools/bench_system.py's CONFIGS), e.g. callqa-first-pass

Figures per system: wall s, CPU s, ratio (system wall / callqa wall), English WER and Mandarin
CER (tools/bench_score.py's normalisation, the same for every system), speech coverage (share of
reference speech time inside the party's output segments; on mono calls inside any segment) and
reference turns with no output at all, and lost turns (under a fifth of their words in the output
overlapping them); then the same per condition (tools/bench_report.py).

faster-whisper is the ``bench`` extra (pyproject.toml). Where it is not in the interpreter,
``--peer-path`` (default ~/.cache/callqa/bench-peer) is put on the peer processes' PYTHONPATH:
``pip install --target ~/.cache/callqa/bench-peer faster-whisper==1.2.1 ctranslate2==4.8.5 onnxruntime==1.32.0``
(the bench extra's pins: the peer's figures move with its runtime).

  python -m tools.bench_engine --part check --minutes 20 --seed 7         # score only
  python -m tools.bench_engine --part dev --minutes 8 --systems callqa,callqa-first-pass
  python -m tools.bench_engine --corpus DIR --part both   # DIR/dev, DIR/check: made once, then reused
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools.bench_corpus import Call, load_corpus, make_corpus, save_corpus  # noqa: E402
from tools.bench_report import by_condition, figures, print_conditions, print_summary, units  # noqa: E402

SYSTEMS = ("callqa", "fw-batched", "fw-sequential")


def corpus(folder: Path, part: str, minutes: float, seed: int) -> list[Call]:
    """The part's corpus from ``folder``, or made there first."""
    if (folder / "corpus.json").exists():
        return load_corpus(folder)
    calls = make_corpus(minutes * 60, seed, part)
    save_corpus(calls, folder)
    return calls


def library_versions(peer_path: Path) -> dict[str, str]:
    """Installed versions of what the systems run on (from ``peer_path`` first, as the peer's processes see it)."""
    from importlib.metadata import distributions

    out = {}
    for name in ("torch", "faster-whisper", "ctranslate2", "onnxruntime"):
        where = [str(peer_path)] if peer_path.is_dir() else []
        found = next(iter(distributions(name=name, path=where)), None) or next(iter(distributions(name=name)), None)
        out[name] = found.version if found else "absent"
    return out


def run_system(system: str, folder: Path, args: argparse.Namespace) -> dict:
    """One system over the saved corpus in a process of its own; wall and CPU time of that process."""
    env = dict(os.environ)
    if system.startswith("fw-") and args.peer_path.expanduser().is_dir():
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(args.peer_path.expanduser()), env.get("PYTHONPATH")) if p)
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [
            sys.executable,
            "-m",
            "tools.bench_system",
            "--system",
            system,
            "--corpus",
            str(folder),
            "--out",
            out.name,
            "--device",
            args.device,
            "--threads",
            str(args.threads),
        ]
        cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, env=env, cwd=Path(__file__).resolve().parents[1])
        wall_s = time.perf_counter() - t0
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        result = json.loads(Path(out.name).read_text())
    result["wall_s"] = wall_s - result.get("discount_s", 0.0)
    result["cpu_s"] = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
    return result


def untranscribed_s(outputs: list[dict]) -> dict[str, float]:
    """Seconds of speech a system says it left without text, by why (callqa's ``untranscribed``; the
    peers say nothing of what they drop)."""
    out: dict[str, float] = {}
    for call in outputs:
        for _, start, end, why in call.get("untranscribed", []):
            out[why] = round(out.get(why, 0.0) + end - start, 1)
    return out


def bench_part(part: str, folder: Path, args: argparse.Namespace) -> dict:
    calls = corpus(folder, part, args.minutes, args.seed)
    audio_s = sum(c.duration_s for c in calls)
    print(
        f"{part}: {len(calls)} calls, {audio_s:.0f} s, {sum(c.mono for c in calls)} mono, "
        f"{sum(c.language == 'zh' for c in calls)} Mandarin, in {folder}",
        flush=True,
    )
    reports = []
    for system in filter(None, args.systems.split(",")):
        result = run_system(system, folder, args)
        outputs = result.pop("calls")
        us = units(calls, outputs)
        said = untranscribed_s(outputs)
        reports.append({**result, "overall": figures(us), "conditions": by_condition(us), "untranscribed_s": said})
        f = reports[-1]["overall"]
        print(f"  {system}: wall {result['wall_s']:.1f} s, cpu {result['cpu_s']:.1f} s, {f}", flush=True)
    if reports:
        print_summary(part, audio_s, reports)
        print_conditions(part, reports)
    return {"audio_s": audio_s, "calls": [c.conditions for c in calls], "results": reports}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("dev", "check", "both"), default="both")
    parser.add_argument("--minutes", type=float, default=6.0, help="call audio to generate per part")
    parser.add_argument("--seed", type=int, default=7, help="salted by part: dev and check never share a call")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated; callqa first for the ratio")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--corpus",
        type=Path,
        help="keep the corpus here (DIR/dev, DIR/check): read if there, "
        "else written (a machine without espeak-ng or sox, such as an accelerator host, runs a saved one)",
    )
    parser.add_argument(
        "--peer-path",
        type=Path,
        default=Path("~/.cache/callqa/bench-peer"),
        help="folder with faster-whisper, put on the peer processes' PYTHONPATH if it exists",
    )
    parser.add_argument("--out", type=Path, help="write the JSON report here")
    args = parser.parse_args()
    parts = ("dev", "check") if args.part == "both" else (args.part,)
    versions = library_versions(args.peer_path.expanduser())
    # the peer's speed and accuracy move with its runtime (ctranslate2 4.8.5 / onnxruntime 1.32 read
    # benchF dev 31.1 % WER in 24.7 s where an earlier install read 35.2 % in 36.4 s): say which ran
    print("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        root = args.corpus or Path(tmp)
        report = {part: bench_part(part, root / part, args) for part in parts}
    if args.out:
        env = {
            "python": platform.python_version(),
            "cpu": platform.processor(),
            "threads": args.threads,
            "device": args.device,
            "seed": args.seed,
            "minutes": args.minutes,
            "cores": os.cpu_count(),
            "versions": versions,
        }
        args.out.write_text(json.dumps({"environment": env, **report}, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()

"""Figures and tables of the engine benchmark: per system, overall and per condition.

The unit is one party of one call: its reference turns, its reference text (stereo: its own
channel; mono: the call's whole text, counted under the first party), the output segments that
may cover it (stereo: its channel's; mono: every segment), and so its turns' coverage and lost
turns (tools/bench_score.py), and the call's conditions as tags.
Call-level tags (language, layout, codec, band, noise, hold music) pool whole calls; party-level
tags (level: quiet or not; tempo: the party's own) pool parties, and their WER/CER is from stereo
calls only (a mono call's text cannot be split by party).
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from dataclasses import dataclass

from tools.bench_corpus import Call
from tools.bench_score import Coverage, error_rate, lost_turns, speech_coverage

CALL_TAGS = ("language", "layout", "codec", "band", "noise", "hold")
PARTY_TAGS = ("level", "tempo")


@dataclass(frozen=True)
class Unit:
    call: int
    party: int
    language: str
    mono: bool
    ref: str
    hyp: str
    coverage: Coverage
    tags: dict[str, str]


def tags(call: Call, party: int) -> dict[str, str]:
    c = call.conditions
    tempo = c["tempo"][party]
    return {
        "language": call.language,
        "layout": c["layout"],
        "codec": c["codec"],
        "band": c["band"],
        "noise": c["noise"],
        "hold": "hold music" if c["hold_music"] else "no hold",
        "level": f"quiet {c['quiet_db']:.0f} dB" if c["quiet_party"] == party else "speech level",
        "tempo": f"{'slow' if tempo < 0.9 else 'fast' if tempo > 1.1 else 'normal'} ({c['tempo_effect'][party]})",
    }


def units(calls: list[Call], outputs: list[dict]) -> list[Unit]:
    """outputs: per call ``{"segments": [[channel, start_s, end_s, text], ...]}`` (tools/bench_system.py)."""
    out = []
    for i, (call, result) in enumerate(zip(calls, outputs, strict=True)):
        segs = result["segments"]
        for party in (0, 1):
            mine = segs if call.mono else [s for s in segs if s[0] == party]
            ref = " ".join(call.refs[party]) if not call.mono or party == 0 else ""
            hyp = " ".join(s[3] for s in mine) if ref else ""
            cov = speech_coverage(call.turns[party], [(s[1], s[2]) for s in mine])
            lost = lost_turns(call.language, turn_texts(call, party), [((s[1], s[2]), s[3]) for s in mine])
            cov = dataclasses.replace(cov, lost_turns=lost)
            out.append(Unit(i, party, call.language, call.mono, ref, hyp, cov, tags(call, party)))
    return out


def turn_texts(call: Call, party: int) -> list[tuple[tuple[float, float], str]]:
    """A party's turns with their reference texts (a mono call keeps every text on channel 0, in call order)."""
    if not call.mono:
        return list(zip(call.turns[party], call.refs[party], strict=True))
    timed = sorted((span, p) for p in (0, 1) for span in call.turns[p])
    return [(span, text) for (span, p), text in zip(timed, call.refs[0], strict=True) if p == party]


def figures(us: list[Unit], stereo_text_only: bool = False) -> dict[str, float]:
    cov = sum((u.coverage for u in us), Coverage())
    text = [u for u in us if not (stereo_text_only and u.mono)]
    out = {
        "calls": len({u.call for u in us}),
        "coverage": cov.share,
        "empty_turns": cov.empty_turns,
        "lost_turns": cov.lost_turns,
        "turns": cov.turns,
    }
    for lang, key in (("en", "wer_en"), ("zh", "cer_zh")):
        picked = [u for u in text if u.language == lang]
        out[key] = error_rate(lang, [u.ref for u in picked], [u.hyp for u in picked])
    return out


def by_condition(us: list[Unit]) -> dict[str, dict[str, dict[str, float]]]:
    """tag -> value -> figures."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for tag in CALL_TAGS + PARTY_TAGS:
        groups: dict[str, list[Unit]] = defaultdict(list)
        for u in us:
            groups[u.tags[tag]].append(u)
        out[tag] = {v: figures(g, stereo_text_only=tag in PARTY_TAGS) for v, g in sorted(groups.items())}
    return out


def _pct(x: float) -> str:
    return "     -" if math.isnan(x) else f"{100 * x:5.1f}%"


def print_summary(part: str, audio_s: float, reports: list[dict]) -> None:
    by = {r["system"]: r for r in reports}
    base = by.get("callqa")
    print(
        f"\n== {part} part: {audio_s:.0f} s of calls; wall s = whole process (start, model load, decode, "
        f"recognition); load s = model load inside it; ratio = system wall / callqa wall (above 1: callqa faster)"
    )
    if base:
        for r in reports:
            if r["system"] != "callqa":
                print(
                    f"callqa / {r['system']}: {r['wall_s'] / base['wall_s']:.2f}x by wall time, "
                    f"{r['cpu_s'] / base['cpu_s']:.2f}x by CPU time"
                )
    print(
        f"{'system':<16}{'wall s':>8}{'load s':>8}{'cpu s':>8}{'ratio':>7}{'WER en':>8}{'CER zh':>8}{'coverage':>10}{'empty turns':>13}{'lost':>6}"
    )
    for r in reports:
        f = r["overall"]
        ratio = f"{r['wall_s'] / base['wall_s']:7.2f}" if base else "      -"
        print(
            f"{r['system']:<16}{r['wall_s']:>8.1f}{r.get('load_s', float('nan')):>8.1f}{r['cpu_s']:>8.1f}{ratio}{_pct(f['wer_en']):>8}"
            f"{_pct(f['cer_zh']):>8}{_pct(f['coverage']):>10}{f['empty_turns']:>7}/{f['turns']:<5}"
            f"{f['lost_turns']:>6}"
        )
    for r in reports:
        if r.get("untranscribed_s"):
            said = ", ".join(f"{why} {s:.1f} s" for why, s in sorted(r["untranscribed_s"].items()))
            print(f"{r['system']}: speech it says it left without text: {said}")


def print_conditions(part: str, reports: list[dict]) -> None:
    print(f"\n-- {part} part, per condition (party-level tags: WER/CER from stereo calls only)")
    print(
        f"{'condition':<28}{'system':<16}{'calls':>6}{'WER en':>8}{'CER zh':>8}{'coverage':>10}{'empty':>7}{'lost':>7}"
    )
    first = reports[0]["conditions"]
    for tag, values in first.items():
        for value in values:
            for r in reports:
                f = r["conditions"][tag][value]
                print(
                    f"{tag + '=' + value:<28}{r['system']:<16}{f['calls']:>6}{_pct(f['wer_en']):>8}"
                    f"{_pct(f['cer_zh']):>8}{_pct(f['coverage']):>10}{f['empty_turns']:>4}/{f['turns']:<3}"
                    f"{f['lost_turns']:>7}"
                )

"""The engine benchmark's corpus: reproducible from a seed, and a check part that shares nothing
with the development part (templates, fill-ins, voices, Mandarin clips, seeds)."""

import io
import re

import numpy as np
import soundfile as sf

from tools.bench_corpus import call_seed, plan_call, plan_corpus
from tools.bench_render import render
from tools.bench_templates import CHECK, DEV, Material


def template_of(text: str, mat: Material) -> str | None:
    for template in mat.agent_en + mat.customer_en:
        if re.fullmatch(re.sub(r"\\\{\w+\\\}", ".+", re.escape(template)), text):
            return template
    return None


def test_a_seed_plans_the_same_calls_and_another_seed_other_calls():
    assert plan_corpus(600, 5, "check") == plan_corpus(600, 5, "check")
    assert plan_corpus(600, 5, "check") != plan_corpus(600, 6, "check")
    assert sum(len(p.turns) for p in plan_corpus(600, 5, "check")) > 30


def test_a_planned_call_renders_to_the_same_bytes_with_turn_times_inside_the_call():
    plan = min((plan_call("dev", call_seed("dev", 3, i)) for i in range(6)), key=lambda p: len(p.turns))
    first, again = render(plan), render(plan)
    assert first.wav == again.wav
    info = sf.info(io.BytesIO(first.wav))
    assert abs(info.frames / info.samplerate - first.duration_s) < 0.01
    spans = sorted(s for party in (0, 1) for s in first.turns[party])
    assert len(spans) == len(plan.turns)
    assert all(0 < a < b <= first.duration_s for a, b in spans)
    assert all(b1 <= a2 for (_, b1), (a2, _) in zip(spans, spans[1:]))  # turns do not overlap


def test_the_parts_share_no_template_fill_in_voice_or_mandarin_clip():
    for pool in ("agent_en", "customer_en", "names", "streets", "towns", "months", "voices", "zh_clips"):
        assert not set(getattr(DEV, pool)) & set(getattr(CHECK, pool)), pool
    assert not set(DEV.agent_en + DEV.customer_en) & set(CHECK.agent_en + CHECK.customer_en)
    assert len(set(DEV.zh_clips) | set(CHECK.zh_clips)) == 25


def test_the_parts_share_no_call_seed_even_for_the_same_seed():
    dev = {call_seed("dev", s, i) for s in range(20) for i in range(20)}
    check = {call_seed("check", s, i) for s in range(20) for i in range(20)}
    assert len(dev) == len(check) == 400
    assert not dev & check


def test_each_part_speaks_only_its_own_templates_and_voices():
    for mat, other in ((DEV, CHECK), (CHECK, DEV)):
        plans = plan_corpus(1800, 11, mat.name)
        english = [t.text for p in plans if p.language == "en" for t in p.turns]
        assert english and all(template_of(t, mat) and not template_of(t, other) for t in english)
        assert {v.espeak for p in plans for v in p.voices} <= set(mat.voices)
        assert {t.clip for p in plans for t in p.turns if t.clip >= 0} <= set(mat.zh_clips)
        assert {p.conditions["part"] for p in plans} == {mat.name}


def test_the_conditions_vary_across_a_part():
    plans = plan_corpus(3 * 3600, 1, "check")
    conds = [p.conditions for p in plans]
    assert {c["codec"] for c in conds} == {"ulaw", "alaw", "gsm", "pcm16k"}
    assert {c["layout"] for c in conds} == {"mono", "stereo"}
    assert {c["noise"] for c in conds} == {"none", "line", "hum"}
    assert any(c["hold_music"] for c in conds) and not all(c["hold_music"] for c in conds)
    assert any(c["layout"] == "mono" and c["quiet_party"] >= 0 for c in conds)
    quiet = [c["quiet_db"] for c in conds if c["quiet_party"] >= 0]
    assert quiet and 10 <= min(quiet) and max(quiet) <= 25
    tempos = np.array([t for c in conds for t in c["tempo"]])
    assert 0.7 <= tempos.min() < 0.8 and 1.2 < tempos.max() <= 1.3

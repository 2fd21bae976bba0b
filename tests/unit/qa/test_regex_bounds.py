"""A rule pack's regular expressions cannot hang QA (issue 26 item 7).

With a backtracking engine ``(a+)+b`` over 24 a's took 1.7 s and four times longer per 2 more
characters, while the stage's /healthz stayed green. Pack regexes run on RE2 (linear time); what RE2
cannot run in linear time (backreferences, lookaround) is refused when the pack loads.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pipeline.qa import QAEngine, load_packs
from pipeline.qa.errors import RulePackError
from pipeline.qa.rules import RegexRule
from pipeline.qa.textrules import Matcher

from .helpers import call, pack_of, seg

CATASTROPHIC = {"id": "ops.nested", "kind": "regex", "role": "any", "phrases": ["(a+)+b"]}


def _timed_findings(rule: dict, text: str) -> tuple[list, float]:
    engine = QAEngine(pack_of(rule))
    t0 = time.perf_counter()
    findings = list(engine.evaluate(call(seg("agent", 0, 5, text))).findings)
    return findings, time.perf_counter() - t0


@pytest.mark.parametrize("length", [24, 28])
def test_nested_quantifier_does_not_hang_the_engine(length: int) -> None:
    findings, elapsed = _timed_findings(CATASTROPHIC, "a" * length)  # 28: about 30 s before
    assert findings == []  # no b: no match, and found out quickly
    assert elapsed < 0.5, f"{elapsed:.2f} s for {length} characters"


def test_nested_quantifier_is_linear_on_a_long_segment() -> None:
    matcher = Matcher.for_rule(RegexRule.model_validate(CATASTROPHIC))
    t0 = time.perf_counter()
    assert matcher.matches("a" * 100_000) == []
    assert time.perf_counter() - t0 < 0.5


def test_nested_quantifier_still_matches_what_it_should() -> None:
    findings, _ = _timed_findings(CATASTROPHIC, "a" * 40 + "b")
    assert [f.rule_id for f in findings] == ["ops.nested"]


def test_match_offsets_are_characters_in_chinese_text() -> None:
    """RE2 works on UTF-8 bytes; evidence and positions must still be the characters that matched."""
    rule = {"id": "secret", "kind": "regex", "phrases": ["告訴我.{0,3}密碼"]}
    (finding,) = QAEngine(pack_of(rule)).evaluate(call(seg("agent", 0, 4, "您好您好，请告诉我您的密码"))).findings
    assert "告诉我您的密码" in finding.message


@pytest.mark.parametrize(
    ("pattern", "why"),
    [(r"(a)\1", "backreference"), (r"pin(?=\d)", "lookaround"), (r"(?<!not )guaranteed", "lookaround")],
)
def test_a_pattern_re2_cannot_bound_is_refused_at_load(tmp_path: Path, pattern: str, why: str) -> None:
    pack = tmp_path / "ops.yaml"
    pack.write_text(f"pack: ops\nrules:\n  - {{id: ops.slow, kind: regex, phrases: ['{pattern}']}}\n")
    with pytest.raises(RulePackError) as err:
        load_packs([pack], include_default=False)
    message = str(err.value)
    assert "ops.yaml" in message and "'ops.slow'" in message and repr(pattern) in message
    assert "linear time" in message, message


def test_an_exclusion_is_bounded_too(tmp_path: Path) -> None:
    pack = tmp_path / "ops.yaml"
    pack.write_text("pack: ops\nrules:\n  - {id: ops.x, kind: regex, phrases: [pin], exclude: ['(x)\\1']}\n")
    with pytest.raises(RulePackError, match=r"'ops\.x'.*linear time"):
        load_packs([pack], include_default=False)

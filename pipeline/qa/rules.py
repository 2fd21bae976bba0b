"""Rule packs as data: the rule models, YAML loading and validation, and combining packs.

A pack is a YAML mapping ``{pack, version, description, disable: [ids], rules: [...]}``.
Each rule has an ``id``, a ``kind`` (see :data:`RuleKind`), ``severity``, ``weight``
(points taken off the 100-point score), and a scope (``role``; ``within_first_s`` or
``within_last_s``). Packs load in order; a later pack may ``disable`` rules of earlier
ones and redefine them. Every problem raises :class:`RulePackError` naming the pack
file, the rule id and the problem, so a bad pack is refused at start.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from pipeline.numbers.model import PIIType
from pipeline.numbers.normalize import is_cjk, normalize_phrase
from pipeline.qa.errors import RulePackError
from pipeline.qa.metrics import Language
from pipeline.qa.model import RuleKind, Severity
from pipeline.qa.pack_regex import UnboundedPatternError, compile_bounded

ScopeRole = Literal["agent", "customer", "any"]
MatchMode = Literal["any_of", "all_of", "none_of"]
_ID = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
_DEFAULT_WEIGHT: dict[str, float] = {"info": 0.0, "low": 5.0, "medium": 10.0, "high": 20.0, "critical": 40.0}


class _Rule(BaseModel):
    """Fields every rule has."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    id: str = Field(pattern=_ID, max_length=100)
    description: str = ""
    severity: Severity = "medium"
    weight: float | None = Field(default=None, ge=0, le=100, description="points off; default by severity")
    max_penalties: int = Field(
        default=1, ge=1, description="how many of this rule's findings count in the score"
    )
    role: ScopeRole = "any"
    # on a call whose speakers are not known (mono, no diarisation): judge the rule on all speech,
    # or skip it (a critical finding against the agent should not rest on a customer's words)
    unknown_speaker: Literal["judge", "skip"] = "judge"
    within_first_s: float | None = Field(default=None, gt=0)
    within_last_s: float | None = Field(default=None, gt=0)
    enabled: bool = True

    @model_validator(mode="after")
    def _one_window(self) -> _Rule:
        if self.within_first_s is not None and self.within_last_s is not None:
            raise ValueError("give within_first_s or within_last_s, not both")
        return self

    @property
    def points(self) -> float:
        return self.weight if self.weight is not None else _DEFAULT_WEIGHT[self.severity]


class _PhraseRule(_Rule):
    kind: str
    phrases: list[Annotated[str, Field(min_length=1)]] = Field(min_length=1)
    exclude: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, description='cancels a match it overlaps ("不保本" cancels "保本")'
    )
    min_similarity: float | None = Field(
        default=None, gt=0, le=1, description="fuzzy match at this similarity (0-1); None: exact only"
    )

    @model_validator(mode="after")
    def _phrases_survive_normalisation(self) -> _PhraseRule:
        if self.kind != "regex":
            for phrase in [*self.phrases, *self.exclude]:
                if not normalize_phrase(phrase):
                    raise ValueError(f"phrase {phrase!r} is empty after normalisation (only punctuation?)")
        return self


class KeywordRule(_PhraseRule):
    """Phrases after normalisation. any_of: flag each segment saying one; all_of: flag when every
    phrase is said in scope; none_of: flag when none is said in scope."""

    kind: Literal["keyword"]
    match: MatchMode = "any_of"


class RegexRule(_PhraseRule):
    """Like keyword, but ``phrases`` are regular expressions over the normalised text."""

    kind: Literal["regex"]
    match: MatchMode = "any_of"

    @model_validator(mode="after")
    def _compiles(self) -> RegexRule:
        for pattern in [*self.phrases, *self.exclude]:
            try:
                compile_bounded(pattern)
            except re.error as exc:
                raise ValueError(f"bad regular expression {pattern!r}: {exc}") from exc
            except UnboundedPatternError as exc:
                raise ValueError(f"regular expression {pattern!r} refused: {exc}") from None
        return self


class ForbiddenPhraseRule(_PhraseRule):
    """Each segment (of the agent, by default) that says one of the phrases is a finding."""

    kind: Literal["forbidden_phrase"]
    role: ScopeRole = "agent"
    category: Literal["mis_selling", "abuse", "other"] = "other"
    ignore_negated: bool = Field(default=True, description='"we cannot promise guaranteed returns" is no promise')
    ignore_questions: bool = Field(default=True, description='"is it risk free?" asks, it does not claim')


class RequiredDisclosureRule(_PhraseRule):
    """The agent must say one of the phrasings within the window; said by the customer or too
    late does not count."""

    kind: Literal["required_disclosure"]
    role: ScopeRole = "agent"
    severity: Severity = "high"
    min_similarity: float | None = Field(default=0.8, gt=0, le=1)


class PIIRule(_Rule):
    """A finding for each span of personal data of these types spoken in scope."""

    kind: Literal["pii"]
    types: list[PIIType] = Field(min_length=1)


class LongSilenceRule(_Rule):
    """Dead air. A hold the agent announced ("请稍等", "please hold") may last up to ``max_hold_s``
    (unlimited when not given) instead of ``max_silence_s``. A call with no speech at all is one
    finding (it may not have connected), and then no rule judges what was not said."""

    kind: Literal["long_silence"]
    max_silence_s: float = Field(gt=0)
    max_edge_silence_s: float | None = Field(
        default=None, gt=0, description="also flag silence before the first / after the last speech"
    )
    hold_phrases: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    max_hold_s: float | None = Field(default=None, gt=0)


class TalkOverRule(_Rule):
    kind: Literal["talk_over"]
    max_overlap_s: float = Field(gt=0)
    bridge_pause_s: float = Field(default=0.5, ge=0, description="a party's pauses up to this do not end a talk-over")


class RateBounds(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    min_per_min: float | None = Field(default=None, ge=0)
    max_per_min: float | None = Field(default=None, gt=0)


class SpeechRateRule(_Rule):
    """Agent speech rate over the call: characters/min for Chinese, words/min for English."""

    kind: Literal["speech_rate"]
    role: ScopeRole = "agent"
    bounds: dict[Language, RateBounds] = Field(min_length=1)
    min_speech_s: float = Field(default=20.0, ge=0, description="too little speech to judge below this")


class TalkRatioRule(_Rule):
    """Share of speech time that is the agent's: agent / (agent + customer)."""

    kind: Literal["talk_ratio"]
    role: ScopeRole = "agent"
    min_ratio: float | None = Field(default=None, ge=0, le=1)
    max_ratio: float | None = Field(default=None, ge=0, le=1)
    min_speech_s: float = Field(default=30.0, ge=0)


AnyRule = (
    KeywordRule | RegexRule | ForbiddenPhraseRule | RequiredDisclosureRule | PIIRule
    | LongSilenceRule | TalkOverRule | SpeechRateRule | TalkRatioRule
)  # fmt: skip
Rule = Annotated[AnyRule, Field(discriminator="kind")]
_RULE_ADAPTER: TypeAdapter[Any] = TypeAdapter(Rule)


@dataclass(frozen=True)
class RulePack:
    """The rules in force, from one or more pack files in load order."""

    names: tuple[str, ...]
    rules: tuple[Any, ...]  # each one of the Rule models
    hotwords: tuple[str, ...] = ()  # terms that bias the recogniser (see hotword_prompt)

    def rule(self, rule_id: str) -> Any | None:
        return next((r for r in self.rules if r.id == rule_id), None)


def default_pack_path() -> Path:
    """The credit-card service pack shipped with the package (Mandarin and English)."""
    return Path(str(resources.files("pipeline.qa") / "packs" / "default.yaml"))


def load_packs(paths: Iterable[str | Path] = (), *, include_default: bool = True) -> RulePack:
    """Load and combine packs: the default pack first (unless excluded), then ``paths`` in order."""
    ordered = [default_pack_path()] if include_default else []
    for given in map(Path, paths):  # a directory stands for its packs, in name order
        ordered += sorted([*given.glob("*.yaml"), *given.glob("*.yml")]) if given.is_dir() else [given]
    if not ordered:
        raise RulePackError("no rule packs given")
    hotwords: list[str] = []
    names: list[str] = []
    rules: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for path in ordered:
        name, disable, pack_rules, pack_hotwords = _read_pack(path)
        hotwords.extend(w for w in pack_hotwords if w not in hotwords)
        for rule_id in disable:
            if rule_id not in rules:
                raise RulePackError(f"{path}: disable: no earlier pack defines rule {rule_id!r}")
            del rules[rule_id]
        for rule in pack_rules:
            if rule.id in rules:
                raise RulePackError(
                    f"{path}: rule {rule.id!r}: already defined in {origin[rule.id]}; "
                    f"list it under 'disable' to replace it"
                )
            rules[rule.id], origin[rule.id] = rule, str(path)
        names.append(name)
    return RulePack(
        names=tuple(names), rules=tuple(r for r in rules.values() if r.enabled), hotwords=tuple(hotwords)
    )


def hotword_prompt(pack: RulePack, language: str | None = None) -> str | None:
    """The recogniser's initial prompt from the packs' hotwords (None when there are none): the
    terms as one comma-separated line, the way Whisper's prompts bias vocabulary and spelling.

    With a ``language`` ("zh", or any other: Latin-script terms), only that language's terms, in
    its punctuation. Measured (tools/eval_hotwords.py): a mixed Mandarin-English prompt pulls
    English windows towards Mandarin and gets echoed, where one language's own prompt does not."""
    terms = pack.hotwords
    if language is not None:
        terms = tuple(t for t in terms if any(is_cjk(ch) for ch in t) == (language == "zh"))
    if not terms:
        return None
    return "，".join(terms) + "。" if language in (None, "zh") else ", ".join(terms) + "."


def parse_pack(data: Any, source: str = "<pack>") -> tuple[str, list[str], list[Any]]:
    """Validate one decoded pack mapping: (name, disabled ids, rules)."""
    if not isinstance(data, dict):
        raise RulePackError(f"{source}: a pack must be a mapping with a 'rules' list")
    unknown = set(data) - {"pack", "version", "description", "disable", "rules", "hotwords"}
    if unknown:
        raise RulePackError(f"{source}: unknown top-level keys {sorted(unknown)}")
    name = data.get("pack")
    if not isinstance(name, str) or not name:
        raise RulePackError(f"{source}: 'pack' (the pack's name) is required")
    disable = data.get("disable") or []
    raw_rules = data.get("rules")
    if not isinstance(disable, list) or not all(isinstance(d, str) for d in disable):
        raise RulePackError(f"{source}: 'disable' must be a list of rule ids")
    if not isinstance(raw_rules, list):
        raise RulePackError(f"{source}: 'rules' must be a list")
    rules: list[Any] = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_rules):
        rule = _parse_rule(raw, index, source)
        if rule.id in seen:
            raise RulePackError(f"{source}: rule {rule.id!r}: id used twice in this pack")
        seen.add(rule.id)
        rules.append(rule)
    return name, list(disable), rules


def _hotwords(data: Any, source: str) -> list[str]:
    words = data.get("hotwords") or [] if isinstance(data, dict) else []
    if not isinstance(words, list) or not all(isinstance(w, str) and w.strip() for w in words):
        raise RulePackError(f"{source}: 'hotwords' must be a list of non-empty terms")
    return [w.strip() for w in words]


def _read_pack(path: Path) -> tuple[str, list[str], list[Any], list[str]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RulePackError(f"{path}: cannot read rule pack: {exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RulePackError(f"{path}: not valid YAML: {exc}") from exc
    return (*parse_pack(data, str(path)), _hotwords(data, str(path)))


def _parse_rule(raw: Any, index: int, source: str) -> Any:
    label = f"rule #{index + 1}"
    if isinstance(raw, dict) and isinstance(raw.get("id"), str):
        label = f"rule {raw['id']!r}"
    if not isinstance(raw, dict):
        raise RulePackError(f"{source}: {label}: must be a mapping")
    if "kind" not in raw:
        raise RulePackError(f"{source}: {label}: 'kind' is required (one of {', '.join(get_args(RuleKind))})")
    try:
        return _RULE_ADAPTER.validate_python(raw)
    except ValidationError as exc:
        raise RulePackError(f"{source}: {label}: {_describe(exc)}") from exc


def _describe(exc: ValidationError) -> str:
    """One line per problem, e.g. ``within_first_s: Input should be greater than 0``."""
    problems = []
    for err in exc.errors():
        loc = ""
        for part in err["loc"][1:]:
            loc += f"[{part}]" if isinstance(part, int) else f".{part}" if loc else str(part)
        if err["type"].startswith("union_tag"):
            problems.append(f"kind: {err['msg']}")
            continue
        got = "" if err["type"] in ("missing", "extra_forbidden") else f" (got {err['input']!r:.60})"
        problems.append(f"{loc or 'rule'}: {err['msg']}{got}")
    return "; ".join(problems)


def agent_phrases(pack: RulePack) -> tuple[str, ...]:
    """What only the agent says: the phrases of the packs' required disclosures (the greeting with
    an identification, the recording notice). A mono call's speaker separation names the voice that
    says them the agent (:mod:`pipeline.stages.speakers`), so the engine gets them as plain strings."""
    phrases = (p for r in pack.rules if r.kind == "required_disclosure" and r.role in ("agent", "any")
               for p in r.phrases)
    return tuple(dict.fromkeys(phrases))

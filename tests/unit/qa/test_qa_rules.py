from pathlib import Path

import pytest

from pipeline.errors import CallQAError
from pipeline.qa.errors import RulePackError
from pipeline.qa.rules import default_pack_path, load_packs


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_default_pack_loads_with_every_kind():
    pack = load_packs()
    assert pack.names == ("default-credit-card",)
    kinds = {r.kind for r in pack.rules}
    assert kinds == {
        "keyword",
        "regex",
        "forbidden_phrase",
        "required_disclosure",
        "pii",
        "long_silence",
        "talk_over",
        "speech_rate",
        "talk_ratio",
    }
    assert default_pack_path().is_file()


def test_error_names_the_rule_and_the_problem(tmp_path):
    bad = write(
        tmp_path,
        "bad.yaml",
        """
pack: ops
rules:
  - id: ok.rule
    kind: keyword
    phrases: [hello]
  - id: late.notice
    kind: required_disclosure
    phrases: [recorded]
    within_first_s: -5
""",
    )
    with pytest.raises(RulePackError) as err:
        load_packs([bad])
    message = str(err.value)
    assert "bad.yaml" in message and "'late.notice'" in message and "within_first_s" in message
    assert "greater than 0" in message
    assert isinstance(err.value, CallQAError)


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ("{id: r1, kind: keyword}", "phrases: Field required"),
        ("{id: r1, kind: nonsense, phrases: [x]}", "does not match any of the expected tags"),
        ("{id: r1, phrases: [x]}", "'kind' is required"),
        ("{id: r1, kind: regex, phrases: ['(unclosed']}", "bad regular expression"),
        ("{id: r1, kind: keyword, phrases: [x], severity: urgent}", "severity"),
        ("{id: r1, kind: keyword, phrases: [x], within_first_s: 5, within_last_s: 5}", "not both"),
        ("{id: r1, kind: keyword, phrases: [x], colour: red}", "colour: Extra inputs are not permitted"),
        ("{id: 'bad id!', kind: keyword, phrases: [x]}", "id: String should match pattern"),
        ("{id: r1, kind: pii, types: [passport]}", "types[0]"),
    ],
)
def test_invalid_rules_are_refused(tmp_path, rule, expected):
    path = write(tmp_path, "p.yaml", f"pack: ops\nrules:\n  - {rule}\n")
    with pytest.raises(RulePackError, match="p.yaml") as err:
        load_packs([path], include_default=False)
    assert expected in str(err.value)


def test_not_yaml_and_not_a_pack(tmp_path):
    with pytest.raises(RulePackError, match="not valid YAML"):
        load_packs([write(tmp_path, "a.yaml", "pack: [unclosed\n")], include_default=False)
    with pytest.raises(RulePackError, match="'pack'"):
        load_packs([write(tmp_path, "b.yaml", "rules: []\n")], include_default=False)
    with pytest.raises(RulePackError, match="cannot read"):
        load_packs([tmp_path / "missing.yaml"], include_default=False)


def test_packs_combine_and_a_later_pack_can_replace_a_rule(tmp_path):
    extra = write(
        tmp_path,
        "ops.yaml",
        """
pack: ops-extra
disable: [courtesy.closing]
rules:
  - id: courtesy.closing
    kind: keyword
    match: none_of
    role: agent
    within_last_s: 10
    phrases: [再见]
  - id: ops.brand
    kind: keyword
    phrases: [competitor bank]
""",
    )
    pack = load_packs([extra])
    assert pack.names == ("default-credit-card", "ops-extra")
    assert pack.rule("courtesy.closing").within_last_s == 10
    assert pack.rule("ops.brand") is not None


def test_duplicate_rule_ids_are_refused(tmp_path):
    dup = write(
        tmp_path, "dup.yaml", "pack: d\nrules:\n  - {id: courtesy.closing, kind: keyword, phrases: [x]}\n"
    )
    with pytest.raises(RulePackError, match="courtesy.closing.*already defined.*disable"):
        load_packs([dup])
    twice = write(
        tmp_path,
        "twice.yaml",
        "pack: t\nrules:\n  - {id: a, kind: keyword, phrases: [x]}\n  - {id: a, kind: keyword, phrases: [y]}\n",
    )
    with pytest.raises(RulePackError, match="'a': id used twice"):
        load_packs([twice], include_default=False)
    unknown = write(tmp_path, "u.yaml", "pack: u\ndisable: [no.such.rule]\nrules: []\n")
    with pytest.raises(RulePackError, match="no.such.rule"):
        load_packs([unknown])


def test_disabled_rules_are_dropped(tmp_path):
    path = write(
        tmp_path, "p.yaml", "pack: p\nrules:\n  - {id: a, kind: keyword, phrases: [x], enabled: false}\n"
    )
    assert load_packs([path], include_default=False).rules == ()


def test_a_directory_of_packs_loads_in_name_order(tmp_path):
    write(tmp_path, "b.yaml", "pack: b\nrules:\n  - {id: b.rule, kind: keyword, phrases: [y]}\n")
    write(tmp_path, "a.yml", "pack: a\nrules:\n  - {id: a.rule, kind: keyword, phrases: [x]}\n")
    assert load_packs([tmp_path], include_default=False).names == ("a", "b")


def test_a_phrase_of_punctuation_only_is_refused(tmp_path):
    path = write(tmp_path, "p.yaml", "pack: p\nrules:\n  - {id: dots, kind: keyword, phrases: ['!!']}\n")
    with pytest.raises(RulePackError, match="'dots'.*empty after normalisation"):
        load_packs([path], include_default=False)


def test_hotwords_from_packs_become_one_prompt(tmp_path):
    from pipeline.qa.rules import hotword_prompt

    first = tmp_path / "a.yaml"
    first.write_text("pack: a\nhotwords: [尊享白金卡, Platinum Plus]\nrules: []\n", encoding="utf-8")
    second = tmp_path / "b.yaml"
    second.write_text("pack: b\nhotwords: [Platinum Plus, 分期乐]\nrules: []\n", encoding="utf-8")
    pack = load_packs([first, second], include_default=False)
    assert pack.hotwords == ("尊享白金卡", "Platinum Plus", "分期乐")
    assert hotword_prompt(pack) == "尊享白金卡，Platinum Plus，分期乐。"
    assert hotword_prompt(pack, "zh") == "尊享白金卡，分期乐。"  # one language's terms, its punctuation
    assert hotword_prompt(pack, "en") == "Platinum Plus."
    assert hotword_prompt(load_packs([])) is None
    bad = tmp_path / "c.yaml"
    bad.write_text("pack: c\nhotwords: [ok, '']\nrules: []\n", encoding="utf-8")
    with pytest.raises(RulePackError, match="hotwords"):
        load_packs([bad], include_default=False)

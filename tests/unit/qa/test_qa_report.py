import json

from pipeline.qa import QAEngine, load_packs
from pipeline.qa.charts import score_bins
from pipeline.qa.report import read_results_jsonl, render_report, rule_counts, totals
from pipeline.qa.score import score_findings, summarize_agents

from .helpers import VISA_CARD, call, pack_of, seg


def sample_results():
    engine = QAEngine(load_packs())
    calls = [
        call(seg("agent", 0, 5, "您好，我是客服小王，本次通话将被录音"), seg("customer", 6, 12, "我要查账单，谢谢你们"),
             seg("agent", 13, 20, "好的，已经帮您查好了，感谢来电，再见"), agent_id="wang", call_id="zh-clean"),
        call(seg("agent", 0, 5, "This product has guaranteed returns, <b>no risk</b>"),
             seg("customer", 6, 12, f"card {VISA_CARD}"), agent_id="smith", call_id="en-bad"),
        call(seg("agent", 0, 5, "喂"), seg("customer", 30, 35, "人呢"), agent_id="wang", call_id="zh-silent"),
    ]  # fmt: skip
    return engine.pack, [engine.evaluate(c) for c in calls]


def test_score_weights_and_max_penalties():
    pack = pack_of({"id": "a", "kind": "keyword", "phrases": ["x"], "weight": 30, "max_penalties": 2})
    engine = QAEngine(pack)
    result = engine.evaluate(call(*(seg("agent", i, i + 1, "x") for i in range(5))))
    assert len(result.findings) == 5 and result.score == 40
    assert score_findings(result.findings, None) == 50  # unknown rule: severity default 10 each


def test_aggregates():
    pack, results = sample_results()
    agents = {a.agent_id: a for a in summarize_agents(results)}
    assert agents["wang"].calls == 2 and agents["smith"].calls == 1
    assert agents["smith"].mean_score < agents["wang"].mean_score
    assert totals(results).calls == 3 and totals(results).clean_calls == 1
    counts = {c.rule_id: c for c in rule_counts(results, pack)}
    assert counts["misselling.guaranteed_returns"].severity == "critical"
    assert counts["misselling.guaranteed_returns"].description
    assert [n for _, n in score_bins([0, 55, 100, 99.5])] == [1, 0, 0, 0, 0, 1, 0, 0, 0, 2]


def test_report_is_self_contained_and_escaped():
    pack, results = sample_results()
    html = render_report(results, pack=pack, title="Weekly <QA>")
    for element_id in ("summary", "score-distribution", "findings-by-rule", "rules", "agents", "worst-calls"):
        assert f'id="{element_id}"' in html
    assert "Weekly &lt;QA&gt;" in html
    assert "<b>no risk</b>" not in html and "&lt;b&gt;no risk&lt;/b&gt;" in html
    assert VISA_CARD not in html and "[CARD]" in html
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in html
    assert "<script" not in html
    assert html.index("en-bad") < html.index("zh-silent")  # worst first


def test_report_from_jsonl():
    pack, results = sample_results()
    lines = [json.dumps(r.to_dict(), ensure_ascii=False) for r in results]
    assert read_results_jsonl([*lines, ""]) == results
    assert "zh-silent" in render_report(read_results_jsonl(lines))


def test_empty_report():
    html = render_report([])
    assert 'id="total-calls">0<' in html and "No calls with findings." in html

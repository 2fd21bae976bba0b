"""The report's Jinja2 template, kept in Python so it ships with the package like any module."""

REPORT_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ title }}</title>
<style>
  body { font-family: system-ui, "Noto Sans CJK SC", "Microsoft YaHei", sans-serif; margin: 24px auto;
         max-width: 1100px; color: #1d2330; background: #fff; padding: 0 16px; }
  h1 { margin-bottom: 4px; } h2 { margin-top: 32px; border-bottom: 2px solid #e3e6eb; padding-bottom: 4px; }
  .meta { color: #5b6270; font-size: 13px; }
  .tiles { display: flex; flex-wrap: wrap; gap: 12px; margin-top: 16px; }
  .tile { background: #f3f5f8; border-radius: 8px; padding: 12px 16px; min-width: 140px; }
  .tile .value { font-size: 26px; font-weight: 600; } .tile .label { font-size: 12px; color: #5b6270; }
  table { border-collapse: collapse; width: 100%; font-size: 13px; margin-top: 8px; }
  th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid #e3e6eb; vertical-align: top; }
  th { background: #f3f5f8; } td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
  .sev { display: inline-block; padding: 1px 6px; border-radius: 4px; color: #fff; font-size: 11px; }
  {% for name, colour in severity_colours.items() %}.sev-{{ name }} { background: {{ colour }}; }
  {% endfor %}
  .call { border: 1px solid #e3e6eb; border-radius: 8px; padding: 8px 12px; margin: 12px 0; }
  .call h3 { margin: 4px 0 8px; font-size: 15px; } .evidence { color: #333; font-style: italic; }
  .confidence { color: #666; font-size: 12px; }
  .charts { display: flex; flex-wrap: wrap; gap: 24px; } .chart { overflow-x: auto; }
  .scorebar { background: #e3e6eb; height: 8px; border-radius: 4px; width: 120px; display: inline-block; }
  .scorebar span { display: block; height: 8px; border-radius: 4px; background: #3d6fa8; }
</style>
</head>
<body>
<h1>{{ title }}</h1>
<div class="meta">Generated {{ generated_at }} · rule packs: {{ packs or "—" }}</div>

<section id="summary">
<div class="tiles">
  <div class="tile"><div class="value" id="total-calls">{{ totals.calls }}</div><div class="label">calls</div></div>
  <div class="tile"><div class="value">{{ "%.1f"|format(totals.mean_score) }}</div><div class="label">mean score</div></div>
  <div class="tile"><div class="value">{{ totals.clean_calls }}</div><div class="label">calls without findings</div></div>
  <div class="tile"><div class="value" id="total-findings">{{ totals.findings }}</div><div class="label">findings</div></div>
  <div class="tile"><div class="value">{{ totals.pii_calls }}</div><div class="label">calls with personal data (redacted)</div></div>
</div>
</section>

<section id="charts">
<h2>Charts</h2>
<div class="charts">
  <figure class="chart" id="score-distribution"><figcaption>Score distribution</figcaption>{{ score_chart }}</figure>
  <figure class="chart" id="findings-by-rule"><figcaption>Findings by rule</figcaption>{{ rule_chart }}</figure>
</div>
</section>

<section id="rules">
<h2>Findings per rule</h2>
<table>
<thead><tr><th>rule</th><th>severity</th><th>description</th><th class="num">findings</th><th class="num">calls</th></tr></thead>
<tbody>
{% for r in rules %}<tr><td><code>{{ r.rule_id }}</code></td><td><span class="sev sev-{{ r.severity }}">{{ r.severity }}</span></td>
<td>{{ r.description }}</td><td class="num">{{ r.findings }}</td><td class="num">{{ r.calls }}</td></tr>
{% else %}<tr><td colspan="5">No findings.</td></tr>{% endfor %}
</tbody>
</table>
</section>

<section id="agents">
<h2>Agents</h2>
<table>
<thead><tr><th>agent</th><th class="num">calls</th><th class="num">mean score</th><th></th><th class="num">lowest</th>
<th class="num">findings</th><th class="num">calls with findings</th></tr></thead>
<tbody>
{% for a in agents %}<tr><td>{{ a.agent_id }}</td><td class="num">{{ a.calls }}</td><td class="num">{{ "%.1f"|format(a.mean_score) }}</td>
<td><span class="scorebar"><span style="width: {{ a.mean_score|round|int }}%"></span></span></td>
<td class="num">{{ "%.1f"|format(a.min_score) }}</td><td class="num">{{ a.findings }}</td><td class="num">{{ a.calls_with_findings }}</td></tr>
{% endfor %}
</tbody>
</table>
</section>

<section id="worst-calls">
<h2>Lowest-scoring calls</h2>
{% for c in worst %}<div class="call">
<h3>{{ c.call_id }} · agent {{ c.agent_id or "(unknown)" }} · score {{ "%.1f"|format(c.score) }}</h3>
<table>
<thead><tr><th>time</th><th>rule</th><th>severity</th><th>who</th><th>what</th></tr></thead>
<tbody>
{% for f in c.findings %}<tr><td>{{ f.when }}</td><td><code>{{ f.rule_id }}</code></td>
<td><span class="sev sev-{{ f.severity }}">{{ f.severity }}</span></td><td>{{ f.role or "" }}</td>
<td>{{ f.message }}{% if f.confidence is not none %} <span class="confidence">(confidence {{ "%.2f"|format(f.confidence) }})</span>{% endif %}{% if f.evidence %}<div class="evidence">“{{ f.evidence }}”</div>{% endif %}</td></tr>
{% endfor %}
</tbody>
</table>
</div>
{% else %}<p>No calls with findings.</p>{% endfor %}
</section>
{% if not_judged %}
<section id="not-judged">
<h2>Calls not judged</h2>
<p>Spoken in a language no rule pack is written for: transcribed as spoken, not scored (score 0 on the topic). A person needs to review them.</p>
<table>
<thead><tr><th>call</th><th>agent</th><th>language</th><th>probability</th></tr></thead>
<tbody>
{% for r in not_judged %}<tr><td>{{ r.call_id }}</td><td>{{ r.agent_id or "(unknown)" }}</td><td>{{ r.unsupported_language.language if r.unsupported_language else "" }}</td>
<td class="num">{{ "%.2f"|format(r.unsupported_language.probability) if r.unsupported_language else "" }}</td></tr>
{% endfor %}
</tbody>
</table>
</section>
{% endif %}
</body>
</html>
"""

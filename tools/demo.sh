#!/usr/bin/env bash
# The main job on the bundled sample calls (embedded mode: no broker, no object store).
# Results: out/demo/ (transcripts.jsonl, findings.jsonl, summary.txt, report.html).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
out=${1:-out/demo}
.venv/bin/callqa run tests/fixtures/calls --out "$out" --roles left=agent,right=customer --agent-id demo-agent
echo
echo "first transcript:"
head -n 1 "$out/transcripts.jsonl" | .venv/bin/python -c "import json,sys; t=json.load(sys.stdin); [print(f\"  [{s['start_s']:6.2f}-{s['end_s']:6.2f}] {s['role']:>8}: {s['text']}\") for s in t['segments']]"
echo "open $out/report.html for the compliance report"

"""`callqa report` on a wrong file: exit 2 and a line naming the file, not a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def callqa(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_report_on_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    result = callqa("report", str(tmp_path / "findings.jsonl"), "--out", str(tmp_path / "r.html"))
    assert result.returncode == 2 and "does not exist" in result.stderr and "Traceback" not in result.stderr


def test_report_on_the_transcripts_file_says_which_file_to_give(tmp_path: Path) -> None:
    wrong = tmp_path / "transcripts.jsonl"
    wrong.write_text('{"call_id": "c1", "segments": []}\n')
    result = callqa("report", str(wrong), "--out", str(tmp_path / "r.html"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"error: {wrong}: line 1: not a QA result") and "findings.jsonl" in result.stderr
    assert not (tmp_path / "r.html").exists()

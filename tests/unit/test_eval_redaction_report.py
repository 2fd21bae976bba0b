"""tools/eval_redaction's per-condition summary: what the closing figures are read from."""

from __future__ import annotations

from tools.eval_redaction import by_condition


def test_files_are_summed_per_language_and_layout() -> None:
    def file(recall: float, collateral: float, numbers: list[float]) -> dict:
        return {"recall": recall, "collateral": collateral, "recall_per_number": [("", x) for x in numbers]}

    summary = by_condition(
        {
            "en-check-1-0-8k-ulaw-stereo.wav": file(0.5, 0.01, [1.0, 0.0]),
            "en-check-2-0-8k-ulaw-stereo.wav": file(1.0, 0.03, [1.0, 1.0]),
            "zh-check-1-0-16k-mono.wav": file(0.9, 0.0, [0.9]),
        }
    )
    assert summary == {
        "en 8k-ulaw-stereo": {"files": 2, "numbers_fully_cut": "3/4", "mean_recall": 0.75,
                              "mean_collateral": 0.02, "max_collateral": 0.03},
        "zh 16k-mono": {"files": 1, "numbers_fully_cut": "0/1", "mean_recall": 0.9,
                        "mean_collateral": 0.0, "max_collateral": 0.0},
    }  # fmt: skip

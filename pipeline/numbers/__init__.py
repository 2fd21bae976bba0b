"""Number knowledge shared by the ASR engine and QA: text normalisation (spoken digits as digits),
the cues and shapes of a number being said, the checks of personal numbers, the PII detector and
its fail-closed backstop. The bottom layer: imports nothing from ``pipeline.asr`` or ``pipeline.qa``
(tests/unit/test_import_boundaries.py), so the engine loads no QA engine or report through it.
"""

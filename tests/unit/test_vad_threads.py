"""silero-vad's first import sets torch to one thread for the whole process; the VAD must not
take the encoder's and decoder's cores with it (a 2-core machine ran the engine on one)."""

import subprocess
import sys

PROBE = """
import torch
torch.set_num_threads(2)
from pipeline.asr.vad import SileroVad, VadOptions
SileroVad(VadOptions())
print(torch.get_num_threads())
"""


def test_loading_the_vad_keeps_the_thread_count_torch_was_given() -> None:
    # a process of its own: the import's side effect happens only once per interpreter
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "2"

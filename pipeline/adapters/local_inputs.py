"""What the local paths given to ``callqa run`` hold, checked before the model loads.

A typo in a path or a folder of recordings in a format we do not pick up must be said at
once, in one line, not after minutes of model loading as "0 calls" or as a dead letter
per path. Files under a folder whose extension is not a recording's are not processed;
they are counted so the user learns they were left out.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.adapters.recordings import AUDIO_SUFFIXES
from pipeline.errors import CallQAError


class NoInputs(CallQAError):
    """The paths given name nothing that could be processed."""


@dataclass
class InputScan:
    recordings: int = 0
    ignored: Counter[str] = field(default_factory=Counter)  # extension -> files left out under folders

    def notes(self) -> list[str]:
        if not self.ignored:
            return []
        kinds = ", ".join(f"{ext} x{n}" for ext, n in sorted(self.ignored.items()))
        return [
            f"left out {sum(self.ignored.values())} file(s) whose extension is not a recording's ({kinds}); "
            f"recordings are {', '.join(sorted(AUDIO_SUFFIXES))}"
        ]


def scan_local_inputs(paths: list[str]) -> InputScan:
    """Count the recordings under the local paths; raise :class:`NoInputs` for a path that does not
    exist or when there is nothing to process at all. ``s3://`` paths are listed later, not here."""
    local = [Path(p) for p in paths if not p.startswith("s3://")]
    missing = [str(p) for p in local if not p.exists()]
    if missing:
        raise NoInputs(f"no such file or folder: {', '.join(missing)}")
    scan, suffixes = InputScan(), AUDIO_SUFFIXES
    for path in local:
        if path.is_file():
            scan.recordings += 1  # a file named alone is processed whatever its name; the probe judges it
            continue
        for p in path.rglob("*"):
            if not p.is_file():
                continue
            if p.suffix.lower() in suffixes:
                scan.recordings += 1
            elif not p.name.startswith("."):
                scan.ignored[p.suffix.lower() or "(none)"] += 1
    if local and len(local) == len(paths) and scan.recordings == 0:
        why = scan.notes() or [f"recordings are {', '.join(sorted(AUDIO_SUFFIXES))}"]
        raise NoInputs(f"no recordings in {', '.join(map(str, local))}: {'; '.join(why)}")
    return scan

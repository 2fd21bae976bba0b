"""The package carries its data: the catalog and schemas it reads equal topics/, the source of truth."""

from __future__ import annotations

from pathlib import Path

from pipeline.catalog import SOURCE_TOPICS_DIR, load_catalog, topics_dir

PACKAGE_COPY = Path(__file__).resolve().parents[2] / "pipeline" / "_topics"


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "__init__.py" and "__pycache__" not in p.parts
    }


def test_packaged_topics_equal_the_source_of_truth() -> None:
    source, packaged = _files(SOURCE_TOPICS_DIR), _files(PACKAGE_COPY)
    assert source, "topics/ is empty"
    differ = sorted(k for k in source.keys() | packaged.keys() if source.get(k) != packaged.get(k))
    assert not differ, f"pipeline/_topics differs from topics/ in {differ}: run  cp -r topics/. pipeline/_topics/"


def test_catalog_is_read_through_importlib_resources() -> None:
    catalog = topics_dir() / "catalog.yaml"
    assert catalog.is_file()
    assert Path(str(catalog)).resolve() == (PACKAGE_COPY / "catalog.yaml").resolve()
    names = {spec.name for spec in load_catalog(("short", "long"))}
    assert {"audio.arrivals", "audio.bucket.short", "audio.bucket.long", "asr.transcripts"} <= names

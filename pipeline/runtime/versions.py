"""What ``callqa --version`` and the build-info metric report: package, model and schema versions."""

from __future__ import annotations

from importlib import metadata

from pipeline.events import SCHEMA_VERSION


def package_version() -> str:
    try:
        return metadata.version("callqa")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


def model_version(model: str) -> tuple[str, str]:
    """(name, version) of the configured model, without loading it. An unknown name is reported, not raised:
    ``--version`` must work on a box where the model is not installed yet."""
    from pipeline.asr.errors import ModelNotFoundError
    from pipeline.asr.registry import lookup  # imports torch lazily through pipeline.asr

    try:
        entry = lookup(model)
    except ModelNotFoundError:
        return model, "unregistered"
    return entry.name, entry.version


def versions(model: str) -> dict[str, str]:
    name, version = model_version(model)
    return {"package": package_version(), "model": name, "model_version": version, "schema": SCHEMA_VERSION}


def version_line(model: str) -> str:
    v = versions(model)
    return f"callqa {v['package']} (model {v['model']} {v['model_version']}; event schema {v['schema']})"

from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.events import SCHEMA_VERSION
from pipeline.runtime.versions import versions


def test_version_names_package_model_and_schema() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    v = versions("whisper-base")
    assert v["model_version"] == "openai-whisper-base/ct2-fp16/1.0.0"
    assert f"callqa {v['package']}" in result.output
    assert v["model_version"] in result.output and f"event schema {SCHEMA_VERSION}" in result.output


def test_unknown_model_is_reported_not_raised() -> None:
    assert versions("no-such-model")["model_version"] == "unregistered"

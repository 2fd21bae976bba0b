"""A secret given in a wrong form is never printed back by the error that rejects it (issue 26 item 8)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def callqa(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    # Only the variables under test plus what Python needs: no CALLQA_* leaks in from the caller.
    base = {k: v for k, v in os.environ.items() if not k.startswith("CALLQA_")}
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**base, "PYTHONPATH": str(ROOT), **env},
    )


@pytest.mark.parametrize("args", [("--version",), ("stack", "status")])
@pytest.mark.parametrize(
    "kafka_config",
    [
        '{"sasl.password": 918273645}',  # a number where librdkafka wants a string
        '{"sasl.password": [918273645]}',
        '["sasl.password=918273645"]',  # not a mapping at all: the whole value is the input
        '{"security.protocol": "SASL_SSL", "sasl.password": "918273645"',  # not JSON
    ],
)
def test_kafka_config_secret_is_masked(tmp_path: Path, args: tuple[str, ...], kafka_config: str) -> None:
    result = callqa(*args, env={"CALLQA_KAFKA_CONFIG": kafka_config}, cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "918273645" not in result.stdout + result.stderr
    assert result.stderr.startswith("error: ") and "kafka_config" in result.stderr


def test_the_rejected_setting_is_still_named(tmp_path: Path) -> None:
    result = callqa("--version", env={"CALLQA_KAFKA_CONFIG": '{"sasl.password": 918273645}'}, cwd=tmp_path)
    assert "kafka_config.sasl.password" in result.stderr and "valid string" in result.stderr


@pytest.mark.parametrize("via_option", [False, True])
@pytest.mark.parametrize(
    "text",
    [
        "s3_secret_key: 73519842\n",  # valid YAML, wrong type
        "s3_secret_key: [73519842\n",  # not YAML: the parser quotes the line it stopped at
        "kafka_config:\n  sasl.password: 73519842\n",
        "kafka_config: {sasl.password: 73519842\n",
    ],
)
def test_yaml_settings_file_secret_is_masked(tmp_path: Path, text: str, via_option: bool) -> None:
    path = tmp_path / "callqa.yaml"
    path.write_text(text)
    if via_option:
        result = callqa("--config", str(path), "stack", "status", env={}, cwd=tmp_path)
    else:
        result = callqa("--version", env={"CALLQA_CONFIG": str(path)}, cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "73519842" not in result.stdout + result.stderr
    assert result.stderr.startswith("error: ")


def test_toml_settings_file_secret_is_masked(tmp_path: Path) -> None:
    path = tmp_path / "callqa.toml"
    path.write_text("s3_secret_key = 73519842\n")
    result = callqa("--version", env={"CALLQA_CONFIG": str(path)}, cwd=tmp_path)
    assert result.returncode == 2 and "73519842" not in result.stdout + result.stderr
    assert "s3_secret_key" in result.stderr


def test_a_non_secret_setting_still_shows_its_value(tmp_path: Path) -> None:
    result = callqa("--version", env={"CALLQA_BUCKET_EDGES_S": "[30, 10]"}, cwd=tmp_path)
    assert result.returncode == 2 and "[30.0, 10.0]" in result.stderr

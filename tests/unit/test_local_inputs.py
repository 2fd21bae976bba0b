"""``callqa run`` says at once what is wrong with the paths it was given (before the model loads)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.adapters.local_inputs import NoInputs, scan_local_inputs


def touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    return path


def test_a_missing_path_is_named(tmp_path: Path) -> None:
    touch(tmp_path / "a.wav")
    with pytest.raises(NoInputs, match=r"^no such file or folder: .*/nope$"):
        scan_local_inputs([str(tmp_path), str(tmp_path / "nope")])


def test_a_folder_without_recordings_says_what_it_holds(tmp_path: Path) -> None:
    touch(tmp_path / "a.m4a")
    touch(tmp_path / "sub" / "b.M4A")
    touch(tmp_path / "notes.txt")
    with pytest.raises(NoInputs) as err:
        scan_local_inputs([str(tmp_path)])
    assert str(err.value).startswith(f"no recordings in {tmp_path}: left out 3 file(s)")
    assert ".m4a x2, .txt x1" in str(err.value) and ".wav" in str(err.value)


def test_an_empty_folder_lists_what_counts_as_a_recording(tmp_path: Path) -> None:
    with pytest.raises(NoInputs, match=r"no recordings in .*: recordings are .*\.flac.*\.wav"):
        scan_local_inputs([str(tmp_path)])


def test_files_left_out_beside_recordings_are_counted(tmp_path: Path) -> None:
    touch(tmp_path / "x" / "call 1 ü.wav")
    touch(tmp_path / "call2.FLAC")
    touch(tmp_path / "call3.amr")
    touch(tmp_path / ".DS_Store")
    scan = scan_local_inputs([str(tmp_path)])
    assert scan.recordings == 2
    assert (
        scan.notes() == [scan.notes()[0]] and "left out 1 file(s)" in scan.notes()[0] and ".amr x1" in scan.notes()[0]
    )


def test_a_file_named_alone_is_taken_whatever_its_extension(tmp_path: Path) -> None:
    scan = scan_local_inputs([str(touch(tmp_path / "call.bin"))])
    assert scan.recordings == 1 and scan.notes() == []


def test_remote_inputs_are_not_checked_here() -> None:
    assert scan_local_inputs(["s3://recordings/2026/11"]).recordings == 0


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["/nonexistent/calls"], "error: no such file or folder: /nonexistent/calls"),
        (["{empty}"], "error: no recordings in {empty}: recordings are "),
        (
            ["{empty}", "--roles", "agent,customer"],
            "error: bad channel role 'agent' (expected e.g. left=agent,right=customer)",
        ),
    ],
)
def test_callqa_run_fails_at_once_on_a_bad_path_or_roles(tmp_path: Path, extra: list[str], expected: str) -> None:
    """One line naming the cause, exit 2, before the model is loaded (the run takes no model time)."""
    import subprocess
    import sys

    (tmp_path / "empty").mkdir()
    args = [a.format(empty=tmp_path / "empty") for a in extra]
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "run", *args, "--out", str(tmp_path / "out")],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith(expected.format(empty=tmp_path / "empty")), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()

"""Local recordings' names and call ids (``callqa ingest`` and ``callqa run``): two recordings are
never one object or one call."""

from __future__ import annotations

from pathlib import Path

from pipeline.adapters.recordings import call_ids, plan_uploads, recording_names
from pipeline.run.embedded_inputs import local_call_ids


def touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    return path


def test_one_name_in_two_folders_given_keeps_the_folders(tmp_path: Path) -> None:
    a, b = touch(tmp_path / "siteA" / "0001.wav"), touch(tmp_path / "siteB" / "0001.wav")
    touch(tmp_path / "siteB" / "late" / "0002.wav")
    named = recording_names([tmp_path / "siteA", tmp_path / "siteB"])
    assert [n for _, n in named] == ["siteA/0001.wav", "siteB/0001.wav", "siteB/late/0002.wav"]
    assert [r.key for r in plan_uploads(named, "2026/12/01", {})] == [
        "2026/12/01/siteA/0001.wav", "2026/12/01/siteB/0001.wav", "2026/12/01/siteB/late/0002.wav"]
    ids = local_call_ids([str(tmp_path / "siteA"), str(tmp_path / "siteB")])
    assert (ids[str(a)], ids[str(b)]) == ("siteA/0001", "siteB/0001")


def test_names_stay_as_they_were_where_none_is_shared(tmp_path: Path) -> None:
    touch(tmp_path / "siteA" / "0001.wav")
    touch(tmp_path / "siteB" / "sub" / "0002.wav")
    named = recording_names([tmp_path / "siteA", tmp_path / "siteB"])
    assert [n for _, n in named] == ["0001.wav", "sub/0002.wav"]


def test_two_files_of_one_name_given_alone(tmp_path: Path) -> None:
    a, b = touch(tmp_path / "x" / "call.wav"), touch(tmp_path / "y" / "call.wav")
    assert [n for _, n in recording_names([a, b])] == ["x/call.wav", "y/call.wav"]


def test_a_file_found_twice_is_one_recording(tmp_path: Path) -> None:
    f = touch(tmp_path / "in" / "call.wav")
    assert recording_names([tmp_path / "in", f]) == [(tmp_path / "in" / "call.wav", "call.wav")]


def test_one_call_in_two_formats_gets_two_call_ids(tmp_path: Path) -> None:
    touch(tmp_path / "in" / "call.wav")
    touch(tmp_path / "in" / "call.mp3")
    touch(tmp_path / "in" / "other.wav")
    named = recording_names([tmp_path / "in"])
    assert call_ids(n for _, n in named) == {"call.mp3": "call.mp3", "call.wav": "call.wav", "other.wav": "other"}
    uploads = plan_uploads(named, "", {"roles": "left=agent,right=customer"})
    assert [(r.key, r.metadata.get("call-id")) for r in uploads] == [
        ("call.mp3", "call.mp3"), ("call.wav", "call.wav"), ("other.wav", None)]
    assert uploads[0].metadata["roles"] == "left=agent,right=customer"
    # a call id the operator gave is theirs
    assert plan_uploads(named, "", {"call-id": "c-1"})[0].metadata["call-id"] == "c-1"

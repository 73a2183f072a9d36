"""The one atomic writer: a failure leaves the old file or folder as it was and nothing beside it."""

from pathlib import Path

import pytest

from fpgaplace.util.files import new_folder, write_file, write_with


def test_write_file_replaces_the_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    target.write_text("old")
    write_file(target, "new")
    write_file(tmp_path / "b.bin", b"\x00\x01")
    assert target.read_text() == "new" and (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.bin"]
    assert target.stat().st_mode & 0o777 == 0o644


def test_a_failing_writer_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "model.onnx"
    target.write_text("old")

    def half_then_fail(temporary: Path) -> None:
        temporary.write_text("half")
        raise ValueError("disk full")

    with pytest.raises(ValueError, match="disk full"):
        write_with(target, half_then_fail)
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["model.onnx"]


def test_new_folder_replaces_a_previous_one_only_when_complete(tmp_path: Path) -> None:
    out = tmp_path / "project"
    out.mkdir()
    (out / "old.txt").write_text("old")
    with pytest.raises(RuntimeError), new_folder(out) as tmp:
        (tmp / "half.txt").write_text("half")
        raise RuntimeError("stopped")
    assert [p.name for p in tmp_path.iterdir()] == ["project"] and (out / "old.txt").is_file()
    with new_folder(out) as tmp:
        (tmp / "new.txt").write_text("new")
    assert [p.name for p in out.iterdir()] == ["new.txt"] and [p.name for p in tmp_path.iterdir()] == ["project"]


def test_new_folder_checks_the_target_before_and_before_the_move(tmp_path: Path) -> None:
    out = tmp_path / "split"
    calls = []

    def refuse_once_it_exists(path: Path) -> None:
        calls.append(path.exists())
        if path.exists():
            raise ValueError(f"{path}: exists")

    with pytest.raises(ValueError, match="exists"), new_folder(out, refuse_once_it_exists) as tmp:
        (tmp / "piece.onnx").write_text("x")
        out.mkdir()  # something else took the name meanwhile
    assert calls == [False, True] and [p.name for p in tmp_path.iterdir()] == ["split"]

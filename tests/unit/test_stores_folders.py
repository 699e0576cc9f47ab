"""The directories downloads write in: opened once, component by component, never through a
link that leads outside the destination, and still the same directory when its path changes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from s3bulk._errors import ItemError
from s3bulk._stores.folders import Folders


def _written(folders: Folders, root: Path, below: str, name: str) -> None:
    with folders.held(str(root), below) as fd:
        os.close(os.open(name, os.O_WRONLY | os.O_CREAT, 0o666, dir_fd=fd))


def test_missing_directories_are_made_and_the_opened_one_stays_put_when_its_path_is_swapped(
    tmp_path: Path,
) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    outside.mkdir()
    folders = Folders()
    _written(folders, root, "a/b", "first")
    (root / "a").rename(root / "moved")
    (root / "a").symlink_to(outside)
    _written(folders, root, "a/b", "second")  # the directory opened before, wherever it is now
    assert sorted(os.listdir(root / "moved" / "b")) == ["first", "second"]
    assert list(outside.iterdir()) == []
    with pytest.raises(ItemError, match="outside the destination"):
        _written(Folders(), root, "a/b", "third")  # opened afresh: the link leads outside
    folders.close()


def test_a_link_the_user_made_to_a_directory_inside_the_root_is_followed(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "real" / "deep").mkdir(parents=True)
    (root / "alias").symlink_to(root / "real")
    folders = Folders()
    _written(folders, root, "alias/deep", "file")
    assert (root / "real" / "deep" / "file").exists()
    (root / "up").symlink_to(tmp_path)
    with pytest.raises(ItemError, match="outside the destination"):
        _written(folders, root, "up", "file")


def test_a_file_in_the_way_is_named(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "x").write_bytes(b"an object that landed as a file")
    with pytest.raises(ItemError, match="x is a file, so nothing can go below it"):
        _written(Folders(), root, "x/y", "file")


def test_no_more_directories_stay_open_than_asked_unless_held(tmp_path: Path) -> None:
    folders = Folders(most=2)
    held = folders.hold(str(tmp_path), "held")
    for number in range(5):
        _written(folders, tmp_path, f"d{number}", "file")
    assert len(folders._open) <= 3 and (str(tmp_path), "held") in folders._open
    os.close(os.open("still-open", os.O_WRONLY | os.O_CREAT, 0o666, dir_fd=held))
    folders.release(str(tmp_path), "held")
    folders.close()
    assert folders._open == {}

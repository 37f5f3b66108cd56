"""`EPath`: absolute normalized local paths; remote protocols refused."""

from __future__ import annotations

import os
import pickle

import pytest

from energon_rs.epath import EPath, UnsupportedPathError


def test_paths_are_absolute_and_normalized(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert str(EPath("a/../b")) == str(tmp_path / "b")
    assert EPath(tmp_path) / "x" / "y" == EPath(tmp_path / "x" / "y")
    assert (EPath(tmp_path) / "x.tar").suffix == ".tar"
    assert EPath(tmp_path / "a" / "b").relative_to(tmp_path) == os.path.join("a", "b")
    assert pickle.loads(pickle.dumps(EPath(tmp_path))) == EPath(tmp_path)
    assert sorted([EPath("b"), EPath("a")]) == [EPath("a"), EPath("b")]


def test_write_creates_folders_and_reads_back(tmp_path):
    p = EPath(tmp_path) / "sub" / "f.txt"
    p.write_text("hello")
    assert p.is_file() and p.size() == 5 and p.read_text() == "hello"
    with (EPath(tmp_path) / "b.bin").open("wb") as f:
        f.write(b"\x00\x01")
    assert (EPath(tmp_path) / "b.bin").read_bytes() == b"\x00\x01"
    p.unlink()
    assert not p.is_file()


def test_glob_and_walk_follow_links(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_text("x")
    (tmp_path / "d" / "b.bin").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "d", target_is_directory=True)
    root = EPath(tmp_path)
    assert [p.relative_to(root) for p in root.glob("**/*.txt")] == ["d/a.txt", "link/a.txt"]
    assert sorted(p.relative_to(root) for p in root.walk()) == [
        "d/a.txt", "d/b.bin", "link/a.txt", "link/b.bin"
    ]


def test_other_protocols_are_refused_and_the_default_profile_is_local(tmp_path):
    # Object-store URLs are tested in test_remote.py.
    with pytest.raises(UnsupportedPathError, match="dss://"):
        EPath("dss://name@v1/data")
    with pytest.raises(UnsupportedPathError, match="rclone://"):
        EPath("rclone://remote/data")
    assert EPath(f"msc://default{tmp_path}/a/../b") == EPath(tmp_path / "b")
    assert str(EPath(f"msc://default{tmp_path}")) == str(tmp_path)

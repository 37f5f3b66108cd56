"""`EPath`: absolute normalized local paths, `dss://` dataset versions; other protocols refused."""

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
    with pytest.raises(UnsupportedPathError, match="ftp://"):
        EPath("ftp://remote/data")
    # The reference's deprecated rclone:// is msc://.
    with pytest.warns(DeprecationWarning, match="rclone:// protocol is deprecated"):
        assert EPath(f"rclone://default{tmp_path}/a") == EPath(tmp_path / "a")

    assert EPath(f"msc://default{tmp_path}/a/../b") == EPath(tmp_path / "b")
    assert str(EPath(f"msc://default{tmp_path}")) == str(tmp_path)


def test_dss_paths_name_a_dataset_version_in_the_cache(tmp_path, monkeypatch):
    import energon_rs.epath as epath_mod

    media = tmp_path / "charts" / "v0" / "images"
    media.mkdir(parents=True)
    (media / "a.jpg").write_bytes(b"x")
    (media / "b.txt").write_bytes(b"y")
    (tmp_path / "charts" / "v0" / "link").symlink_to(media, target_is_directory=True)
    monkeypatch.setenv("NVDATASET_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(epath_mod, "NVDATASET_CACHE_DIR", EPath(tmp_path))
    root = EPath("dss://charts@v0")
    assert str(root / "images" / ".." / "images") == "dss://charts@v0/images"
    assert [str(p) for p in sorted(root.glob("**/*.jpg"))] == [
        "dss://charts@v0/images/a.jpg", "dss://charts@v0/link/a.jpg"]
    assert sorted(p.relative_to(root) for p in root.walk()) == [
        "images/a.jpg", "images/b.txt", "link/a.jpg", "link/b.txt"]
    assert (root / "images" / "b.txt").read_bytes() == b"y" and root.is_dir()
    assert root.local_path() == tmp_path / "charts" / "v0" and root.display_name == "charts@v0"
    assert pickle.loads(pickle.dumps(root)) == root
    with pytest.raises(AssertionError, match="version separated by '@'"):
        EPath("dss://charts")
    monkeypatch.setattr(epath_mod, "NVDATASET_CACHE_DIR", None)
    monkeypatch.delenv("NVDATASET_CACHE_DIR")
    with pytest.raises(UnsupportedPathError, match="NVDATASET_CACHE_DIR is not set"):
        root.is_dir()

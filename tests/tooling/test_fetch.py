"""Fetching refuses anything but the pinned upstream, and says what to do when the mirror lost it."""
import hashlib
from dataclasses import replace

import pytest

from semiring_tool import fetch
from semiring_tool.config import Tarball, load_pin
from semiring_tool.progress import ToolError


def test_checksum_mismatch_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_SEMIRING_STATE", str(tmp_path))
    pin = load_pin()
    bogus = tmp_path / "downloads" / pin.orig.name
    bogus.parent.mkdir()
    bogus.write_bytes(b"not the tarball")
    with pytest.raises(ToolError) as e:
        fetch.fetch_one(pin, pin.orig)
    msg = str(e.value)
    assert "checksum mismatch" in msg and pin.orig.sha256 in msg and "Delete it" in msg
    assert bogus.exists()  # the evidence stays for the user to look at


def test_pin_names_tag_commit_and_debian_source():
    pin = load_pin()
    assert pin.git_tag == "v2.6.0" and len(pin.git_commit) == 40
    assert pin.debian_version == "2.6.0+dfsg-7"
    assert pin.orig.sha256 == "099a9601bc40d67656e75735c44abedb0fbe92d08817852ab7472eebb7e6ddff"


def small_pin(tmp_path, mirror):
    """The pin with two small stand-in tarballs, and a directory holding good copies of them."""
    local = tmp_path / "local"
    local.mkdir()
    tarballs = []
    for name, data in (("up.orig.tar.xz", b"upstream"), ("up.debian.tar.xz", b"packaging")):
        (local / name).write_bytes(data)
        tarballs.append(Tarball(name, len(data), hashlib.sha256(data).hexdigest()))
    return replace(load_pin(), mirror=mirror, orig=tarballs[0], packaging=tarballs[1]), local


def test_pool_without_the_pinned_files_says_what_to_get_and_how(tmp_path, monkeypatch, gone_mirror):
    monkeypatch.setenv("TORCH_SEMIRING_STATE", str(tmp_path / "state"))
    pin = load_pin()
    with pytest.raises(ToolError) as e:
        fetch.fetch(pin, gone_mirror)
    first, *files = str(e.value).splitlines()
    assert "HTTP 404" in first and "no longer has" in first
    for t in (pin.orig, pin.packaging):
        assert any(t.name in f and f"{t.size} bytes" in f and t.sha256 in f for f in files)
    assert "scripts/semiring fetch --from DIR" in files[-1]
    assert list((tmp_path / "state" / "downloads").iterdir()) == []


def test_fetch_from_a_directory_fills_the_cache(tmp_path, monkeypatch, gone_mirror):
    monkeypatch.setenv("TORCH_SEMIRING_STATE", str(tmp_path / "state"))
    pin, local = small_pin(tmp_path, gone_mirror)
    orig, packaging = fetch.fetch(pin, source=local)
    assert orig.read_bytes() == b"upstream" and packaging.read_bytes() == b"packaging"
    # From now on the cache serves them: the mirror (all 404) is not asked again.
    assert fetch.fetch(pin) == (orig, packaging)


def test_fetch_from_refuses_a_wrong_or_missing_file(tmp_path, monkeypatch, gone_mirror):
    monkeypatch.setenv("TORCH_SEMIRING_STATE", str(tmp_path / "state"))
    pin, local = small_pin(tmp_path, gone_mirror)
    (local / pin.orig.name).write_bytes(b"something else")
    with pytest.raises(ToolError, match="checksum mismatch"):
        fetch.fetch(pin, source=local)
    assert not (tmp_path / "state" / "downloads" / pin.orig.name).exists()
    (local / pin.orig.name).unlink()
    with pytest.raises(ToolError, match=f"missing; --from needs {pin.orig.name}"):
        fetch.fetch(pin, source=local)

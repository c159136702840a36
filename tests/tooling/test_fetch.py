"""Fetching refuses anything but the pinned upstream."""
import pytest

from semiring_tool import fetch
from semiring_tool.config import load_pin
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

"""Download the pinned Debian source package, verify it, keep it cached."""
from __future__ import annotations

import hashlib
import urllib.request
from pathlib import Path

from .config import Pin, Tarball, state_dir
from .progress import ToolError, say


def downloads_dir() -> Path:
    return state_dir() / "downloads"


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify(path: Path, tarball: Tarball) -> None:
    """Refuse a file whose checksum is not the pinned one."""
    got = sha256_of(path)
    if got != tarball.sha256:
        raise ToolError(
            f"checksum mismatch for {path}:\n  expected sha256 {tarball.sha256}\n"
            f"  got      sha256 {got}\n"
            f"The file is not the pinned upstream. Delete it to download it again, or, if the pin "
            f"itself changed, update upstream.toml together with a rebase of the series.")


def _download(url: str, dest: Path, size: int) -> None:
    tmp = dest.with_suffix(dest.suffix + ".part")
    say(f"downloading {url}")
    with urllib.request.urlopen(url, timeout=60) as resp, open(tmp, "wb") as out:
        done, step = 0, max(size // 10, 1)
        while block := resp.read(1 << 20):
            out.write(block)
            if (done + len(block)) // step != done // step:
                say(f"  {min(100, (done + len(block)) * 100 // size)}% of {size / 1e6:.1f} MB")
            done += len(block)
    tmp.rename(dest)


def fetch_one(pin: Pin, tarball: Tarball, mirror: str | None = None) -> Path:
    dest = downloads_dir() / tarball.name
    if not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        url = f"{(mirror or pin.mirror).rstrip('/')}/{pin.pool}/{tarball.name}"
        try:
            _download(url, dest, tarball.size)
        except OSError as e:
            raise ToolError(f"could not download {url}: {e}") from e
    verify(dest, tarball)
    return dest


def fetch(pin: Pin, mirror: str | None = None) -> tuple[Path, Path]:
    """Return (orig tarball, Debian packaging tarball), both verified."""
    orig = fetch_one(pin, pin.orig, mirror)
    packaging = fetch_one(pin, pin.packaging, mirror)
    say(f"upstream {pin.git_tag} ({pin.git_commit[:12]}) as Debian {pin.debian_version}: verified")
    return orig, packaging

"""Download the pinned Debian source package, verify it, keep it cached."""
from __future__ import annotations

import hashlib
import shutil
import urllib.error
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


def verify(path: Path, tarball: Tarball,
           advice: str = "Delete it to download it again, or, if the pin itself changed, update "
                         "upstream.toml together with a rebase of the series.") -> None:
    """Refuse a file whose checksum is not the pinned one."""
    got = sha256_of(path)
    if got != tarball.sha256:
        raise ToolError(
            f"checksum mismatch for {path}:\n  expected sha256 {tarball.sha256}\n"
            f"  got      sha256 {got}\n"
            f"The file is not the pinned upstream. {advice}")


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


def _gone(pin: Pin, url: str) -> ToolError:
    """The pool lost the pinned revision: say what to get and where to put it."""
    source = pin.pool.rsplit("/", 1)[-1]  # the pool directory is named after the source package
    files = "".join(f"\n  {t.name}  {t.size} bytes  sha256 {t.sha256}" for t in (pin.orig, pin.packaging))
    return ToolError(
        f"the mirror no longer has Debian's {source} {pin.debian_version} (HTTP 404 for {url}; Debian "
        f"drops superseded revisions from its pool). Get these files, e.g. from "
        f"https://snapshot.debian.org/package/{source}/{pin.debian_version}/:{files}\n"
        f"put them in one directory DIR and run: python3 scripts/semiring fetch --from DIR "
        f"(build then finds them in its cache)")


def _copy_local(tarball: Tarball, source: Path, dest: Path) -> None:
    local = source / tarball.name
    if not local.is_file():
        raise ToolError(f"{local}: missing; --from needs {tarball.name} ({tarball.size} bytes, "
                        f"sha256 {tarball.sha256}) in {source}")
    # Checked before copying: a wrong file never enters the downloads cache.
    verify(local, tarball, advice=f"Get the file with the sha256 above into {source}.")
    tmp = dest.with_suffix(dest.suffix + ".part")
    say(f"copying {local} into {dest.parent}")
    shutil.copyfile(local, tmp)
    tmp.rename(dest)


def fetch_one(pin: Pin, tarball: Tarball, mirror: str | None = None, source: Path | None = None) -> Path:
    dest = downloads_dir() / tarball.name
    dest.parent.mkdir(parents=True, exist_ok=True)
    if source is not None:
        _copy_local(tarball, source, dest)
    elif not dest.exists():
        url = f"{(mirror or pin.mirror).rstrip('/')}/{pin.pool}/{tarball.name}"
        try:
            _download(url, dest, tarball.size)
        except OSError as e:
            if isinstance(e, urllib.error.HTTPError) and e.code == 404:
                raise _gone(pin, url) from e
            raise ToolError(f"could not download {url}: {e}") from e
    verify(dest, tarball)
    return dest


def fetch(pin: Pin, mirror: str | None = None, source: Path | None = None) -> tuple[Path, Path]:
    """Return (orig tarball, Debian packaging tarball), both verified.

    `source`: a directory holding local copies of both files, for when the mirror has lost them.
    """
    orig = fetch_one(pin, pin.orig, mirror, source)
    packaging = fetch_one(pin, pin.packaging, mirror, source)
    say(f"upstream {pin.git_tag} ({pin.git_commit[:12]}) as Debian {pin.debian_version}: verified")
    return orig, packaging

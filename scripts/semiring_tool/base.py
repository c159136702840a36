"""The base layer: upstream (Debian's orig tarball) plus Debian's packaging patches, as git commits.

Built once per pin into a cached repository; work trees are cheap local clones of it.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from .config import Pin, state_dir
from .fetch import fetch
from .progress import ToolError, say, run

BASE_TAG = "debian-base"
UPSTREAM_TAG = "upstream"
# Fixed identity and dates: the same pin always gives the same base commits.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "torch-semiring", "GIT_AUTHOR_EMAIL": "torch-semiring@invalid",
    "GIT_COMMITTER_NAME": "torch-semiring", "GIT_COMMITTER_EMAIL": "torch-semiring@invalid",
    "GIT_AUTHOR_DATE": "2025-01-29T00:00:00Z", "GIT_COMMITTER_DATE": "2025-01-29T00:00:00Z",
    # Trees extracted as root keep the tarball's owners; git must still work in them.
    "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*",
}


def git(repo: Path, *args: str, capture: bool = False, check: bool = True,
        env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **GIT_ENV, **(env_extra or {})}
    return run(["git", "-C", str(repo), *args], env=env, capture=capture, check=check)


def base_repo() -> Path:
    return state_dir() / "base"


@dataclass(frozen=True)
class QuiltEntry:
    """One patch of a quilt series, with the options quilt passes to patch(1)."""
    name: str
    strip: int = 1
    reverse: bool = False


def read_quilt_series(text: str, where: str = "series") -> list[QuiltEntry]:
    """Parse a quilt series file as quilt does.

    One patch per line, optionally followed by -pN and -R; '#' starts a comment at the
    start of a line or after whitespace (a '#' inside a patch name is part of the name).
    """
    entries = []
    for n, line in enumerate(text.splitlines(), 1):
        words = re.split(r"(?:^|\s)#", line, maxsplit=1)[0].split()
        if not words:
            continue
        name, *options = words
        entry = QuiltEntry(name)
        for opt in options:
            if re.fullmatch(r"-p\d+", opt):
                entry = replace(entry, strip=int(opt[2:]))
            elif opt == "-R":
                entry = replace(entry, reverse=True)
            else:
                raise ToolError(f"{where}:{n}: option {opt!r} of {name} is not one quilt supports here "
                                f"(-pN, -R)")
        entries.append(entry)
    return entries


def apply_quilt_entry(tree: Path, patches_dir: Path, e: QuiltEntry) -> None:
    """Apply one Debian patch with the options its series line gives, as quilt does, but without fuzz."""
    proc = run(["patch", f"-p{e.strip}", *(["-R"] if e.reverse else []), "--fuzz=0",
                "--no-backup-if-mismatch", "-s", "-i", str(patches_dir / e.name)],
               cwd=tree, capture=True, check=False)
    if proc.returncode != 0:
        raise ToolError(f"Debian patch {e.name} does not apply to the pinned upstream:\n{proc.stdout}")


def _stamp(pin: Pin) -> Path:
    return base_repo() / ".git" / "torch-semiring-base"


def _key(pin: Pin) -> str:
    # The layout version changes whenever this module builds the base differently.
    return f"layout-2 {pin.key}"


def ensure_base(pin: Pin) -> Path:
    """Return the base repository for this pin, creating it if missing or stale."""
    repo = base_repo()
    if _stamp(pin).exists() and _stamp(pin).read_text().strip() == _key(pin):
        return repo
    orig, packaging = fetch(pin)
    say(f"creating the base repository in {repo} (upstream + Debian packaging patches)")
    if repo.exists():
        shutil.rmtree(repo)
    tmp = Path(tempfile.mkdtemp(dir=state_dir(), prefix="base."))
    try:
        with tarfile.open(orig) as tf:
            tf.extractall(tmp, filter="tar")
        (top,) = [p for p in tmp.iterdir() if p.is_dir()]
        with tarfile.open(packaging) as tf:
            tf.extractall(tmp / "packaging", filter="tar")
        top.rename(repo)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "core.autocrlf", "false")
    git(repo, "add", "-A", "-f")
    git(repo, "commit", "-q", "-m",
        f"Import upstream PyTorch {pin.git_tag} ({pin.git_commit}) from {pin.orig.name}")
    git(repo, "tag", UPSTREAM_TAG)
    # debian/ is part of the base: Debian's patches refer to files in it (debian/pocketfft).
    shutil.move(str(tmp / "packaging" / "debian"), str(repo / "debian"))
    git(repo, "add", "-A", "-f")
    git(repo, "commit", "-q", "-m", f"Import Debian's packaging directory ({pin.packaging.name})")
    patches_dir = repo / "debian" / "patches"
    for e in read_quilt_series((patches_dir / "series").read_text(), "debian/patches/series"):
        say(f"  base layer: debian/patches/{e.name}")
        apply_quilt_entry(repo, patches_dir, e)
        git(repo, "add", "-A", "-f")
        git(repo, "commit", "-q", "--allow-empty", "-m", f"Debian {pin.debian_version}: {e.name}")
    git(repo, "tag", BASE_TAG)
    shutil.rmtree(tmp)
    _stamp(pin).write_text(_key(pin) + "\n")
    return repo

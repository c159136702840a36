"""Where things live: the repository, the pin, and the state kept outside the repository."""
from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PATCHES = REPO / "patches"
SERIES = PATCHES / "series"
PIN_FILE = REPO / "upstream.toml"


def state_dir() -> Path:
    """Downloads, the base repository, work trees, the build root and ccache.

    Kept outside the repository so that clones and CI runs share one warm cache.
    """
    return Path(os.environ.get("TORCH_SEMIRING_STATE", "/var/cache/torch-semiring"))


@dataclass(frozen=True)
class Tarball:
    name: str
    size: int
    sha256: str


@dataclass(frozen=True)
class Pin:
    version: str
    git_tag: str
    git_commit: str
    suite: str
    debian_version: str
    mirror: str
    pool: str
    orig: Tarball
    packaging: Tarball
    series_version: int
    runtime_requirements: tuple[str, ...]  # pinned, installed next to the wheel

    @property
    def key(self) -> str:
        """Identifies the pinned upstream in cache stamps."""
        return f"{self.orig.sha256[:16]}-{self.packaging.sha256[:16]}"


def load_pin(path: Path = PIN_FILE) -> Pin:
    with open(path, "rb") as f:
        data = tomllib.load(f)
    up, deb = data["upstream"], data["debian"]
    return Pin(
        version=up["version"],
        git_tag=up["git_tag"],
        git_commit=up["git_commit"],
        suite=deb["suite"],
        debian_version=deb["version"],
        mirror=deb["mirror"],
        pool=deb["pool"],
        orig=Tarball(**deb["orig"]),
        packaging=Tarball(**deb["packaging"]),
        series_version=int(data["series"]["version"]),
        runtime_requirements=tuple(data["runtime"]["requirements"]),
    )

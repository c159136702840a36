"""Messages, errors and subprocesses with visible progress."""
from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Sequence


class ToolError(Exception):
    """A failure the user can act on; printed without a traceback."""


def say(msg: str) -> None:
    print(f"[semiring] {msg}", flush=True)


def fmt_seconds(s: float) -> str:
    s = int(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def run(cmd: Sequence[str], cwd: Path | None = None, env: dict | None = None,
        capture: bool = False, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(cmd), cwd=cwd, env=env, text=True,
                          stdout=subprocess.PIPE if capture else None,
                          stderr=subprocess.STDOUT if capture else None)
    if check and proc.returncode != 0:
        out = f"\n{proc.stdout}" if capture and proc.stdout else ""
        raise ToolError(f"command failed ({proc.returncode}): {' '.join(cmd)}{out}")
    return proc


class Stopwatch:
    def __init__(self) -> None:
        self.start = time.monotonic()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.start


def progress_line(label: str, done: int, total: int, elapsed: float, remaining: float | None,
                  basis: str) -> None:
    """One line of a long step's progress; `basis` says where the estimate comes from."""
    rest = fmt_seconds(remaining) if remaining is not None else "?"
    say(f"{label} [{done}/{total}] elapsed {fmt_seconds(elapsed)}, remaining ~{rest} ({basis})")

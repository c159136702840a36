"""scripts/semiring bench: the patched and the unpatched build, side by side in one run."""
from __future__ import annotations

import json
import statistics

from . import build
from .buildroot import ensure_root
from .config import REPO, Pin
from .progress import ToolError, say


def bench(pin: Pin, rounds: int, repeat: int) -> dict[str, float]:
    """Alternates the two builds `rounds` times; returns patched/unpatched per workload."""
    br = ensure_root(pin)
    variants = [build.variant(pin, unpatched=False, cuda=False), build.variant(pin, unpatched=True, cuda=False)]
    for v in variants:
        if not br.path(build.venv_python(br, v)).exists():
            raise ToolError(f"no installed {v.name} build; run '{v.build_command}' first")
    script = f"{br.expose(REPO, '/repo')}/benchmarks/real_path.py"
    times: dict[str, dict[str, list[float]]] = {v.name: {} for v in variants}
    for r in range(rounds):
        for v in variants if r % 2 == 0 else variants[::-1]:
            out = br.run([build.venv_python(br, v), script, "--repeat", str(repeat)], cwd="/tmp",
                         binds={REPO: "/repo"}, capture=True).stdout
            result = json.loads(out.strip().splitlines()[-1])
            # --system-site-packages venvs: make sure the wheel, not another torch, was timed.
            if not result["version"].endswith(f"+{v.local_version}"):
                raise ToolError(f"{v.name} venv imported torch {result['version']}, "
                                f"expected +{v.local_version}; run '{v.build_command}' again")
            for name, t in result.items():
                if name != "version":
                    times[v.name].setdefault(name, []).append(t)
        say(f"bench round {r + 1}/{rounds} done")
    patched, unpatched = (times[v.name] for v in variants)
    ratios = {}
    print(f"{'workload':28} {'patched ms':>11} {'unpatched ms':>13} {'ratio':>7}")
    for name in patched:
        p, u = statistics.median(patched[name]), statistics.median(unpatched[name])
        ratios[name] = p / u
        print(f"{name:28} {p * 1e3:11.3f} {u * 1e3:13.3f} {p / u:7.4f}")
    print(f"(median over {rounds} alternating rounds of the best of {repeat} runs; ratio = patched/unpatched)")
    return ratios

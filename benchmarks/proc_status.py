"""This process's memory figures, from /proc/self/status (Linux), for the benchmarks."""


def status_kib(field: str) -> int:
    """A field of /proc/self/status in KiB: VmRSS (resident now), VmHWM (its peak), ..."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")

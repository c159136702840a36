"""A process's memory figures, from /proc/<pid>/status (Linux), for the benchmarks."""


def status_kib(field: str, pid: int | str = "self") -> int:
    """A field of /proc/<pid>/status in KiB (this process's by default): VmRSS (resident now),
    VmHWM (its peak), ..."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/{pid}/status")

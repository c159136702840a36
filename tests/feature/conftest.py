"""Project tests that drive the installed patched wheel (run by 'scripts/semiring test')."""
import os
import socket
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The patched source tree the wheel was built from (for the upstream tests).
TREE = Path(os.environ.get("TORCH_SEMIRING_TREE", "/nonexistent"))


def free_port() -> int:
    """A free TCP port on the loopback, for the rendezvous of processes a test spawns."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

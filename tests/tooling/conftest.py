import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))


@pytest.fixture
def patches_copy(tmp_path):
    """A copy of the project's patches/ directory to break in a test."""
    import shutil

    dst = tmp_path / "patches"
    shutil.copytree(REPO / "patches", dst)
    return dst


@pytest.fixture
def gone_mirror():
    """A Debian mirror on 127.0.0.1 whose pool has lost everything: HTTP 404 for every file."""
    import http.server
    import threading

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_error(404)

        do_HEAD = do_GET

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/debian"
    server.shutdown()
    server.server_close()

"""The statistics and the callgrind dump reading behind 'scripts/semiring bench'."""
import pytest

from semiring_tool.bench import _read_dumps, median_interval
from semiring_tool.progress import ToolError


def test_median_interval_uses_binomial_order_statistics():
    # n = 25: P(Binomial(25, 1/2) <= 7) = 0.0216 <= 0.025 < P(<= 8), so the interval is x(8)..x(18).
    xs = [float(i) for i in range(1, 26)][::-1]
    assert median_interval(xs) == (13.0, 8.0, 18.0)


def test_median_interval_refuses_too_few_rounds():
    with pytest.raises(ToolError, match="too few"):
        median_interval([1.0, 1.1, 0.9, 1.0, 1.0])


def _dump(path, trigger, total):
    path.write_text(f"version: 1\ncreator: callgrind-3.24.0\ndesc: Trigger: {trigger}\n"
                    f"events: Ir\nsummary: {total}\n\nfn=(1) main\n1 {total}\ntotals: {total}\n")


def test_read_dumps_keeps_workload_regions_per_step(tmp_path):
    _dump(tmp_path / "semiring.7.1", "Client Request: chain", 1000)
    _dump(tmp_path / "semiring.7.2", "Client Request: mlp", 505)
    _dump(tmp_path / "semiring.7", "Program termination", 10)
    _dump(tmp_path / "unpatched.8.1", "Client Request: chain", 999)
    assert _read_dumps(tmp_path, "semiring", steps=5) == {"chain": 200, "mlp": 101}


def test_read_dumps_without_regions_is_an_error(tmp_path):
    _dump(tmp_path / "semiring.7", "Program termination", 10)
    with pytest.raises(ToolError, match="no workload dumps"):
        _read_dumps(tmp_path, "semiring", steps=5)

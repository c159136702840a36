"""The full tier tolerates only the upstream failures that also happen unpatched."""
from semiring_tool.testing import upstream_verdict

HEADER = "test_x (__main__.TestAutograd.test_x) ... ok\n"


def test_only_known_failures_pass():
    out = HEADER + "ERROR: test_multi_grad_all_hooks (__main__.TestAutograd.test_multi_grad_all_hooks)\nRan 636 tests in 60s\n"
    assert upstream_verdict(out) == 0


def test_new_failure_fails():
    out = HEADER + "FAIL: test_engine (__main__.TestAutograd.test_engine)\nRan 636 tests in 60s\n"
    assert upstream_verdict(out) == 1


def test_crash_before_summary_fails():
    assert upstream_verdict("Segmentation fault\n") == 1

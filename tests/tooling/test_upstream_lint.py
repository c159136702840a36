"""The upstream-lint step selects files as lintrunner does and counts added C++ columns."""
from semiring_tool import upstream_lint as u


def test_globs_select_as_lintrunner_does():
    config = {"include_patterns": ["**/*.py", "torch/csrc/**/*.cpp"],
              "exclude_patterns": ["caffe2/**/*.py", "torch/utils/weak.py"]}
    paths = ["setup.py", "torch/autograd/semiring.py", "caffe2/x/y.py", "torch/utils/weak.py",
             "torch/csrc/autograd/engine.cpp", "aten/src/ATen/native/Semiring.cpp"]
    assert u.selected(config, paths) == ["setup.py", "torch/autograd/semiring.py",
                                         "torch/csrc/autograd/engine.cpp"]


def test_long_added_cxx_lines_are_found_with_their_line_numbers():
    diff = (
        "diff --git a/a.cpp b/a.cpp\n--- a/a.cpp\n+++ b/a.cpp\n@@ -10,0 +11,3 @@\n"
        + "+" + "x" * 80 + "\n"
        + "+" + "y" * 81 + "\n"
        + "+short\n"
        + "diff --git a/t.py b/t.py\n--- a/t.py\n+++ b/t.py\n@@ -1,0 +1 @@\n+" + "z" * 100 + "\n"
        + "diff --git a/tools/autograd/templates/T.cpp b/tools/autograd/templates/T.cpp\n"
        + "--- a/tools/autograd/templates/T.cpp\n+++ b/tools/autograd/templates/T.cpp\n@@ -1,0 +1 @@\n+"
        + "w" * 90 + "\n"
    )
    found = u.long_added_lines(diff)
    assert [(f.path, f.line) for f in found] == [("a.cpp", 12)]
    assert "81 columns" in str(found[0])

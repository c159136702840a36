"""tests/cuda/series_files.py: the files a series creates, rebuilt from its patches alone."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cuda"))
import series_files  # noqa: E402

CREATE = """From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
Subject: [PATCH] add k.cu

---
diff --git a/k.cu b/k.cu
new file mode 100644
index 0000000..1111111
--- /dev/null
+++ b/k.cu
@@ -0,0 +1,4 @@
+// kernel
+int f() {
+  return 1;
+}
diff --git a/other.h b/other.h
index 2222222..3333333 100644
--- a/other.h
+++ b/other.h
@@ -1 +1 @@
-old
+new
"""

CHANGE = """From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
Subject: [PATCH] change k.cu

---
diff --git a/k.cu b/k.cu
index 1111111..4444444 100644
--- a/k.cu
+++ b/k.cu
@@ -1,4 +1,5 @@
 // kernel
+// does one thing
 int f() {
-  return 1;
+  return 2;
 }
"""


def write_series(tmp_path: Path, *patches: str) -> Path:
    d = tmp_path / "patches"
    d.mkdir()
    names = []
    for i, text in enumerate(patches, 1):
        names.append(f"{i:04d}-p.patch")
        (d / names[-1]).write_text(text)
    (d / "series").write_text("# the series\n" + "\n".join(names) + "\n")
    return d


def test_replays_every_patch_of_a_created_file(tmp_path):
    patches = write_series(tmp_path, CREATE, CHANGE)
    touched = series_files.materialize(["k.cu"], tmp_path / "out", patches)
    assert (tmp_path / "out" / "k.cu").read_text() == "// kernel\n// does one thing\nint f() {\n  return 2;\n}\n"
    assert touched == {"k.cu": ["0001-p.patch", "0002-p.patch"]}
    source = series_files.function_source((tmp_path / "out" / "k.cu").read_text(), "int f(")
    assert source == "// kernel\n// does one thing\nint f() {\n  return 2;\n}\n"


def test_refuses_a_hunk_that_does_not_match(tmp_path):
    patches = write_series(tmp_path, CREATE, CHANGE.replace("-  return 1;", "-  return 3;"))
    with pytest.raises(series_files.SeriesFileError, match=r"0002-p.patch: k.cu: hunk at line 1 does not match"):
        series_files.materialize(["k.cu"], tmp_path / "out", patches)


def test_refuses_files_upstream_has_and_files_no_patch_creates(tmp_path):
    patches = write_series(tmp_path, CREATE)
    with pytest.raises(series_files.SeriesFileError, match="which upstream has"):
        series_files.materialize(["other.h"], tmp_path / "out", patches)
    with pytest.raises(series_files.SeriesFileError, match="no patch of .* creates missing.cu"):
        series_files.materialize(["missing.cu"], tmp_path / "out", patches)


def test_the_gpu_check_files_come_from_the_series(tmp_path):
    # The files the GPU check compiles are created by the series (a GPU machine has no
    # upstream tree), and log's BLAS product is found in Semiring.cpp.
    import extension
    series_files.materialize(extension.SERIES_FILES, tmp_path)
    cpp = (tmp_path / "aten/src/ATen/native/Semiring.cpp").read_text()
    assert "Tensor log_mm_blas(" in series_files.function_source(cpp, "Tensor log_mm_blas(")
    assert "REGISTER_DISPATCH(semiring_mm_stub" in (tmp_path / "aten/src/ATen/native/cuda/SemiringKernel.cu").read_text()

"""The full tier also tests the CPU kernels' copies below the machine's best."""
from pathlib import Path

from semiring_tool.testing import lower_cpu_capabilities

AVX2 = "fpu sse2 avx fma avx2"
AVX512 = AVX2 + " avx512f avx512dq avx512bw avx512vl"


def cpuinfo(tmp_path: Path, flags: str) -> Path:
    path = tmp_path / "cpuinfo"
    path.write_text(f"processor\t: 0\nmodel name\t: x\nflags\t\t: {flags}\n\nprocessor\t: 1\nflags\t\t: {flags}\n")
    return path


def test_avx512_machine_tests_default_and_avx2(tmp_path):
    assert lower_cpu_capabilities(cpuinfo(tmp_path, AVX512)) == ["default", "avx2"]


def test_avx2_machine_tests_default(tmp_path):
    assert lower_cpu_capabilities(cpuinfo(tmp_path, AVX2)) == ["default"]


def test_machine_without_avx2_has_only_its_own(tmp_path):
    assert lower_cpu_capabilities(cpuinfo(tmp_path, "fpu sse2 avx")) == []
    assert lower_cpu_capabilities(cpuinfo(tmp_path, AVX2.replace(" fma", "") + " avx512f avx512dq avx512bw avx512vl")) == []

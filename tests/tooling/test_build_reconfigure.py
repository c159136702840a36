"""A series change that removes a file cmake read must make the next build configure again."""
from semiring_tool.build import cmake_inputs, reconfigure_if_stale
from semiring_tool.buildroot import BuildRoot

NINJA = """\
rule RERUN_CMAKE
  command = cmake
build build.ninja: RERUN_CMAKE | /src/CMakeLists.txt $
    aten/core_generated.cmake
build aten/core_generated.cmake: CUSTOM_COMMAND /src/tools/gen.py /src/tools/gone.py || /src/dep.yaml
"""


def test_inputs_include_those_of_generated_inputs(tmp_path):
    (tmp_path / "build.ninja").write_text(NINJA)
    assert sorted(cmake_inputs(tmp_path / "build.ninja")) == [
        "/src/CMakeLists.txt", "/src/dep.yaml", "/src/tools/gen.py", "/src/tools/gone.py"]


def test_a_gone_input_removes_build_ninja(tmp_path, capsys):
    root = tmp_path / "root"
    for f in ("src/CMakeLists.txt", "src/dep.yaml", "src/tools/gen.py", "src/tools/gone.py"):
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        (root / f).write_text("")
    ninja = tmp_path / "build.ninja"
    ninja.write_text(NINJA)
    br = BuildRoot(root)
    reconfigure_if_stale(br, ninja)
    assert ninja.exists()
    (root / "src/tools/gone.py").unlink()
    reconfigure_if_stale(br, ninja)
    assert not ninja.exists()
    assert "configuring again" in capsys.readouterr().out


def test_a_packaged_copy_counts_as_gone_when_its_source_is(tmp_path):
    root = tmp_path / "root"
    (root / "src/torchgen/packaged/autograd").mkdir(parents=True)
    (root / "src/torchgen/packaged/autograd/gen_x.py").write_text("")  # stale copy
    (root / "src/tools/autograd").mkdir(parents=True)
    ninja = tmp_path / "build.ninja"
    ninja.write_text("build build.ninja: RERUN_CMAKE | /src/torchgen/packaged/autograd/gen_x.py\n")
    reconfigure_if_stale(BuildRoot(root), ninja)
    assert not ninja.exists()

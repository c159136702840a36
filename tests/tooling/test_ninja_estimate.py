"""The build's time estimate from ninja's log (.ninja_log) and its [n/N] status lines."""
import pytest

from semiring_tool.ninja_estimate import Estimate, read_log, step_output

# Times in ms, as ninja writes them: a.o 10 s, b.o 20 s, one step with two outputs 4 s,
# lib.so 30 s; b.o was built twice and its later line counts.
LOG = """# ninja log v6
0\t5000\t1\tb.o\taa
0\t10000\t1\ta.o\tbb
10000\t14000\t1\tgen.h\tcc
10000\t14000\t1\tgen.cpp\tcc
20000\t40000\t1\tb.o\tdd
40000\t70000\t1\tlib/libx.so\tee
"""


def compile_line(n, total, out):
    # As PyTorch's setup.py runs ninja (verbose): the command, with the output after -o.
    return f"[{n}/{total}] ccache /usr/bin/c++ -DX -MT {out} -MF {out}.d -o {out} -c /src/{out[:-2]}"


@pytest.fixture
def recorded(tmp_path):
    path = tmp_path / ".ninja_log"
    path.write_text(LOG)
    return read_log(path)


def test_read_log_groups_outputs_by_step_and_keeps_the_latest(recorded):
    assert sorted((sorted(s.outputs), s.seconds) for s in recorded) == [
        (["a.o"], 10.0), (["b.o"], 20.0), (["gen.cpp", "gen.h"], 4.0), (["lib/libx.so"], 30.0)]


def test_read_log_without_a_log(tmp_path):
    assert read_log(tmp_path / "missing") == [] and read_log(None) == []
    (tmp_path / "other").write_text("not a ninja log\n")
    assert read_log(tmp_path / "other") == []


def test_step_output_from_command_description_or_plain_command():
    assert step_output("ccache c++ -MT x/a.cpp.o -MF x/a.cpp.o.d -o x/a.cpp.o -c /s/a.cpp") == "x/a.cpp.o"
    assert step_output(": && c++ -shared -Wl,-soname,libc10.so -o lib/libc10.so @rsp && :") == "lib/libc10.so"
    assert step_output("Building CXX object caffe2/CMakeFiles/t.dir/f.cpp.o") == "caffe2/CMakeFiles/t.dir/f.cpp.o"
    assert step_output("sleep 1 && touch out3") == "out3"


def test_remaining_is_the_recorded_time_of_the_steps_not_yet_built(recorded):
    est = Estimate([], recorded, jobs=1)
    news = est.feed(compile_line(1, 4, "a.o"), elapsed=12.0)
    assert "4 steps to run, expected ~1m04s" in news and "4 at the time recorded" in news
    assert est.basis == "ninja's log"
    assert est.remaining(12.0) == 54.0
    assert est.feed("[2/4] cd /build && python3 gen.py -o gen.h", 15.0) is None
    assert est.remaining(15.0) == 50.0
    assert est.feed("some compiler warning", 16.0) is None
    est.feed(compile_line(3, 4, "b.o"), 30.0)
    assert est.remaining(30.0) == 30.0


def test_jobs_share_the_recorded_time(recorded):
    est = Estimate([], recorded, jobs=2)
    est.feed(compile_line(1, 4, "a.o"), 1.0)
    assert est.remaining(1.0) == 27.0


def test_steps_no_log_names_cost_the_mean_recorded_step(recorded):
    est = Estimate([], recorded, jobs=1)
    est.feed(compile_line(1, 6, "a.o"), 1.0)
    # 3 recorded steps left (54 s) and 2 unknown ones at the mean of 16 s.
    assert est.remaining(1.0) == 54.0 + 2 * 16.0
    est.feed(compile_line(2, 6, "new.o"), 2.0)
    assert est.remaining(2.0) == 54.0 + 16.0


def test_outputs_in_this_build_dirs_own_log_are_already_built(recorded):
    own = [s for s in recorded if s.outputs & {"a.o", "b.o"}]
    est = Estimate(own, recorded, jobs=1)
    est.feed("[1/3] Building CXX object gen.h", 0.0)
    # Left: lib.so (30 s, recorded elsewhere) and one step no log names (mean of all 4: 16 s).
    assert est.remaining(0.0) == 30.0 + 16.0


def test_more_recorded_steps_than_left_costs_their_mean(recorded):
    est = Estimate([], recorded, jobs=1)
    est.feed(compile_line(1, 2, "other.o"), 0.0)
    assert est.remaining(0.0) == 1 * 16.0


def test_without_a_log_the_estimate_follows_this_runs_rate():
    est = Estimate([], [], jobs=2)
    news = est.feed(compile_line(1, 10, "a.o"), 10.0)
    assert "no ninja log of an earlier build" in news and est.basis == "this run's rate"
    assert est.remaining(10.0) is None
    est.feed(compile_line(2, 10, "b.o"), 20.0)
    assert est.remaining(20.0) == 10.0 * 8


def test_a_new_ninja_run_starts_the_estimate_over(recorded):
    est = Estimate([], recorded, jobs=1)
    assert est.feed("[1/1] Re-running CMake...", 0.0) is not None
    assert est.total == 1 and est.remaining(0.0) == 0.0
    news = est.feed(compile_line(1, 4, "a.o"), 5.0)
    assert news is not None and "4 steps to run" in news
    assert (est.done, est.total) == (1, 4) and est.remaining(5.0) == 54.0
    # The same total again, counted from 1: another run.
    est.feed(compile_line(2, 4, "b.o"), 6.0)
    assert est.feed("[1/4] Building CXX object gen.h", 7.0) is not None


"""scripts/semiring test: the fast tier always, the full tier when a build cache exists."""
from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

from . import build, coverage_table, cuda_check, demo, series, upstream_lint
from .base import BASE_TAG
from .buildroot import REPO_BIND, ensure_root, pip_access
from .config import REPO, Pin, state_dir
from .progress import Stopwatch, fmt_seconds, run, say

HOST_PACKAGES = ["pytest==8.3.5", "expecttest==0.3.0", "pyyaml", "typing_extensions",
                 "check-jsonschema==0.33.0"]
WORKFLOW = REPO / "ci" / "github-workflow.yml"
# GitHub-hosted runner labels (docs.github.com, "GitHub-hosted runners"): anything else needs a
# larger or self-hosted runner that a fork does not have.
STANDARD_RUNNERS = {"ubuntu-latest", "ubuntu-24.04", "ubuntu-22.04", "ubuntu-24.04-arm", "ubuntu-22.04-arm"}


def host_python() -> str:
    """A venv on the host with pytest, for the tooling tests (the host Python may lack it)."""
    venv = state_dir() / "host-venv"
    py = venv / "bin" / "python"
    if not py.exists() or subprocess.run([str(py), "-c", "import pytest, yaml, expecttest, check_jsonschema"],
                                         capture_output=True).returncode != 0:
        say(f"creating {venv} with {', '.join(HOST_PACKAGES)} for the tooling tests")
        run([sys.executable, "-m", "venv", str(venv)])
        run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", *HOST_PACKAGES])
    return str(py)


def codegen(tree: Path) -> int:
    """Runs the autograd code generators on the patched tree (no build needed) and their tests."""
    py = host_python()
    with tempfile.TemporaryDirectory() as out:
        run([py, "-B", "-m", "tools.autograd.gen_autograd",
             "aten/src/ATen/native/native_functions.yaml", "aten/src/ATen/native/tags.yaml",
             out, "tools/autograd"], cwd=tree, capture=True)
        generated = {p.name for p in Path(out).iterdir()}
    say(f"codegen: tools/autograd generated {len(generated)} files from the patched tree")
    if not (tree / "tools" / "autograd" / "gen_semiring_rules.py").exists():
        say("codegen: no semiring rule generator in this prefix of the series")
        return 0
    rc = 0
    if (tree / "torch" / "autograd" / "_semiring_rules_generated.py").exists():
        # Prefixes whose rules were a checked-in Python table generated from the yaml.
        rc = subprocess.run([py, "-B", "-m", "tools.autograd.gen_semiring_rules", "--check"], cwd=tree).returncode
        say("codegen: semiring rule table " + ("is current" if rc == 0 else "is STALE"))
    elif "SemiringRules.cpp" in generated:
        say("codegen: the semiring rules generated into SemiringRules.cpp")
    else:
        say("codegen: gen_autograd generated no SemiringRules.cpp")
        rc = 1
    rc = coverage_table.check(tree) or rc
    say("codegen tests (tools/test/test_gen_semiring_rules.py)")
    return rc or subprocess.run([py, "-B", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                 "tools/test/test_gen_semiring_rules.py"], cwd=tree).returncode


def workflow_check(workflow: Path = WORKFLOW) -> int:
    """The fork workflow parses, matches GitHub's workflow schema and uses standard runners."""
    py = host_python()
    script = ("import sys, yaml; w = yaml.safe_load(open(sys.argv[1])); "
              "print(' '.join(str(j.get('runs-on')) for j in w['jobs'].values()))")
    proc = subprocess.run([py, "-c", script, str(workflow)], capture_output=True, text=True)
    if proc.returncode != 0:
        say(f"workflow: {workflow.name} does not parse:\n{proc.stderr.strip().splitlines()[-1]}")
        return 1
    odd = sorted(set(proc.stdout.split()) - STANDARD_RUNNERS)
    if odd:
        say(f"workflow: runs-on {odd} are not standard GitHub-hosted runner labels")
        return 1
    lint = subprocess.run([str(Path(py).parent / "check-jsonschema"), "--builtin-schema",
                           "vendor.github-workflows", str(workflow)], capture_output=True, text=True)
    say(f"workflow: {workflow.name} parses, standard runners; schema: "
        + (lint.stdout.strip().splitlines() or ["?"])[-1])
    if lint.returncode != 0:
        print(lint.stdout + lint.stderr)
    return lint.returncode


GPU_CHECK = REPO / "tests" / "cuda"


def gpu_check_compile(tree: Path) -> int:
    """The GPU check's files, rebuilt from patches/ alone, are the applied tree's, and its
    extension compiles against the pinned stock wheel's headers (tests/cuda/check.py)."""
    sys.path.insert(0, str(GPU_CHECK))
    try:
        import extension
        import series_files
    finally:
        sys.path.remove(str(GPU_CHECK))
    with tempfile.TemporaryDirectory() as out:
        series_files.materialize(extension.SERIES_FILES, Path(out))
        differ = [p for p in extension.SERIES_FILES if (Path(out) / p).read_bytes() != (tree / p).read_bytes()]
    if differ:
        say(f"GPU check: rebuilt from patches/, {', '.join(differ)} differ from the applied series")
        return 1
    say(f"GPU check: its {len(extension.SERIES_FILES)} series files rebuilt from patches/ equal the applied tree's")
    say("GPU check: its compile step (tests/cuda/check.py --compile-only), against stock torch's headers")
    return subprocess.run([sys.executable, str(GPU_CHECK / "check.py"), "--compile-only"], cwd=REPO).returncode


def fast_tier(pin: Pin, pytest_args: list[str], prefix: int | None = None) -> int:
    tree = series.check(pin, upto=prefix)
    rc = codegen(tree)
    say("upstream's linters on what the series adds (flake8, pyfmt, clang-format, 80 columns)")
    rc = upstream_lint.command(tree, BASE_TAG) or rc
    if prefix is None:
        rc = gpu_check_compile(tree) or rc
    rc = workflow_check() or rc
    say("tooling tests (tests/tooling)")
    return subprocess.run([host_python(), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/tooling",
                           *pytest_args], cwd=REPO).returncode or rc


def lower_cpu_capabilities(cpuinfo: Path = Path("/proc/cpuinfo")) -> list[str]:
    """ATen's CPU capabilities below this machine's best that it can run (ATEN_CPU_CAPABILITY)."""
    flags = set()
    for line in cpuinfo.read_text().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    avx2 = {"avx2", "fma"} <= flags
    avx512 = avx2 and {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags
    return ["default", "avx2"] if avx512 else ["default"] if avx2 else []


def full_tier(pin: Pin, rebuild: bool, pytest_args: list[str], prefix: int | None = None) -> int:
    br = ensure_root(pin)
    v = build.variant(pin, unpatched=False, cuda=False, prefix=prefix)
    if rebuild:
        build.build(pin, prefix=prefix)
    py = build.venv_python(br, v)
    repo = str(REPO)
    tree = f"{v.area(br)}/pytorch"
    env = {"PYTHONDONTWRITEBYTECODE": "1",
           "TORCH_SEMIRING_EXPECTED_VERSION": f"+{v.local_version}",
           "TORCH_SEMIRING_TREE": tree}
    # The pinned test requirements, and the demo's model packages (the pretrained decoder the
    # feature tests load), on the feature tests' PYTHONPATH.
    packages = demo.install_requirements(br, py)
    rc = 0
    steps = []
    # A prefix of the series runs the tests it carries; the project's own tests need all of it.
    if v.patches == len(series.read_series()):
        steps.append(("project tests (tests/feature) against the installed wheel",
                      [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"{repo}/tests/feature", *pytest_args],
                      {"PYTHONPATH": packages}))
    else:
        say(f"project tests (tests/feature) not run: they need the whole series, this is {v.local_version}")
    # The tests the prefix carries; those of the CPU kernels run again on every copy of the
    # kernels below the machine's best, which the dispatcher runs (what machines without AVX512
    # or AVX2 run), by asking for them. (file, what it tests, its kernel tests' arguments.)
    carried = [("test/autograd/test_semiring_engine.py", "the engine (builds a C++ extension)", None),
               ("test/test_semiring_kernels.py", "the kernels", []),
               ("test/autograd/test_semiring.py", "the rules and the Python API", ["TestSemiringKernels"])]
    kernel_tests = []
    for path, what, kernel_args in carried:
        test = f"{tree}/{path}"
        if not br.path(test).exists():
            continue
        steps.append((f"upstream-style tests in the patch: {path} ({what})", [py, test], {}))
        if kernel_args is not None:
            kernel_tests.append((" ".join([path, *kernel_args]), [py, test, *kernel_args]))
    for capability in lower_cpu_capabilities():
        for label, argv in kernel_tests:
            steps.append((f"{label} on the {capability} copy of the CPU kernels", argv,
                          {"ATEN_CPU_CAPABILITY": capability}))
    for label, argv, extra_env in steps:
        say(label)
        # pip's access to PyPI too: a test installs the wheel into a fresh venv, as a user would.
        pip_env, pip_binds = pip_access(br)
        proc = subprocess.run(br.command(argv, cwd="/tmp", env={**env, **pip_env, **extra_env},
                                         binds={**REPO_BIND, **pip_binds}))
        rc = rc or proc.returncode
    say("the series' CUDA sources, compiled against the build's headers")
    rc = cuda_check.compile_sources(br.path(tree), cuda_check.series_cuda_sources(v.patches),
                                    br.path("/usr/include/eigen3")) or rc
    say("upstream autograd tests (test/test_autograd.py) against the patched build")
    output = run_with_test_progress(br.command([py, "test_autograd.py", "-v"], cwd=f"{tree}/test", env=env),
                                    "test_autograd.py")
    return upstream_verdict(output) or rc


# unittest -v ends each test's line with its outcome.
OUTCOME = re.compile(r" \.\.\. (ok|FAIL|ERROR|skipped.*|expected failure|unexpected success)$")


def run_with_test_progress(argv: list[str], label: str, every: float = 30.0) -> str:
    """Runs a unittest -v command, printing how many tests ran and failed every `every` seconds."""
    watch, last, done, failed, lines = Stopwatch(), 0.0, 0, 0, []
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        for line in proc.stdout:
            lines.append(line)
            m = OUTCOME.search(line.rstrip("\n"))
            if m:
                done += 1
                failed += m.group(1) in ("FAIL", "ERROR", "unexpected success")
            if watch.elapsed - last >= every:
                last = watch.elapsed
                say(f"  {label}: {done} tests run, {failed} failed, {fmt_seconds(watch.elapsed)}")
    return "".join(lines)


KNOWN_FAILURES = REPO / "tests" / "upstream_known_failures.txt"
# unittest names a failure "test_x (__main__.TestClass.test_x)".
FAILURE_LINE = re.compile(r"^(?:ERROR|FAIL): \S+ \(__main__\.(\S+)\)", re.M)


def upstream_verdict(output: str) -> int:
    """Passes when every failing upstream test is one that also fails unpatched (listed, with why)."""
    ran = re.search(r"^Ran (\d+) tests", output, re.M)
    failed = set(FAILURE_LINE.findall(output))
    known = {ln.split()[0] for ln in KNOWN_FAILURES.read_text().splitlines()
             if ln.strip() and not ln.startswith("#")}
    new = sorted(failed - known)
    say(f"test_autograd.py: ran {ran.group(1) if ran else '?'} tests, {len(failed)} failed "
        f"({len(failed & known)} known to fail unpatched too, see {KNOWN_FAILURES.relative_to(REPO)})")
    if not ran:
        print(output[-3000:])
        return 1
    for t in new:
        say(f"  NEW FAILURE: {t}")
    return 1 if new else 0


def test(pin: Pin, fast: bool = False, rebuild: bool = True, pytest_args: list[str] | None = None,
         prefix: int | None = None) -> int:
    """Runs the fast tier, and the full tier when the build is of the current series.

    pytest_args go to the pytest run of the last tier that runs (the tooling tests when only
    the fast tier runs, the feature tests otherwise). The last line says which tiers ran.
    """
    pytest_args = pytest_args or []
    watch = Stopwatch()
    if fast:
        have, why = False, "--fast"
    elif prefix is not None and rebuild:
        # Asked for by name: the prefix is built (incrementally, in the patched tree), then tested.
        have, why = True, f"--prefix {prefix}: built first"
    else:
        have, why = build.build_state(pin, prefix=prefix)
    say("tier 1 (fast): lint, apply, round trip, codegen, workflow, tooling tests")
    rc = fast_tier(pin, [] if have else pytest_args, prefix)
    if have:
        say(f"tier 2 (full): {why}: incremental build, then every test against the patched build")
        rc = full_tier(pin, rebuild, pytest_args, prefix) or rc
        verdict = "PASSED" if rc == 0 else "FAILED"
    else:
        say(f"tier 2 (full) NOT RUN: {why}")
        only = "--fast" if fast else "no build of this series"
        verdict = f"{'PASSED' if rc == 0 else 'FAILED'} (fast tier only: {only})"
    say(f"tiers run: {'fast + full' if have else 'fast'}; {verdict} in {fmt_seconds(watch.elapsed)}")
    return rc

"""Command line: scripts/semiring <command>."""
from __future__ import annotations

import argparse
from pathlib import Path

from . import series
from .bench import BENCH_DEFAULTS
from .config import load_pin
from .progress import ToolError, say


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/semiring", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="download and verify the pinned upstream")
    f.add_argument("--mirror", help="a Debian mirror to use instead of the pinned one")
    f.add_argument("--from", dest="source", type=Path, metavar="DIR",
                   help="copy and verify local copies of the pinned files (when the mirror lost them)")
    d = sub.add_parser("doctor", help="check the host's prerequisites for build and test")
    d.add_argument("--install", action="store_true",
                   help="apt-get install the Debian packages of missing host tools (as root), then check")
    a = sub.add_parser("apply", help="fresh git work tree: upstream + Debian base + the series")
    a.add_argument("--worktree", type=Path, help="default: $TORCH_SEMIRING_STATE/work/pytorch")
    a.add_argument("--force", action="store_true", help="replace a work tree with unexported changes")
    e = sub.add_parser("export", help="write the work tree's commits back as patches/ (alias: refresh)",
                       aliases=["refresh"])
    e.add_argument("--worktree", type=Path)
    c = sub.add_parser("check", help="lint the series and check that it applies and round-trips")
    c.add_argument("--prefix", type=int, metavar="N", help="apply and round-trip only the first N patches")
    b = sub.add_parser("build", help="build the patched wheel into dist/ and install it in the root's venv")
    b.add_argument("--unpatched", action="store_true", help="the same configuration without the series")
    b.add_argument("--cuda", action="store_true", help="CUDA configuration (needs a CUDA 12.x toolkit)")
    b.add_argument("--prefix", type=int, metavar="N",
                   help="only the first N patches, as upstream would land them (in the patched tree)")
    bn = sub.add_parser("bench", help="ordinary backward: patched vs unpatched build, side by side")
    bn.add_argument("--measure", choices=("instructions", "time", "both"), default="both")
    bn.add_argument("--groups", type=int, default=BENCH_DEFAULTS["groups"],
                    help="timing: groups of server processes (6 or more)")
    bn.add_argument("--samples", type=int, default=BENCH_DEFAULTS["samples"],
                    help="timing: steps per workload and server (a multiple of 24)")
    bn.add_argument("--count-runs", type=int, default=BENCH_DEFAULTS["count_runs"],
                    help="instructions: callgrind runs per build")
    bn.add_argument("--steps", type=int, default=BENCH_DEFAULTS["steps"],
                    help="instructions: steps counted per workload")
    sp = sub.add_parser("stats", help="lines added/removed per upstream file and patch")
    sp.add_argument("--layer")
    sp.add_argument("--churn", action="store_true",
                    help="instead: lines a patch adds that a later patch rewrites (applies the series)")
    me = sub.add_parser("metrics", help="every figure of the RFC's Metrics, from one run (needs both builds)")
    me.add_argument("--write", action="store_true", help="write the tables into the RFC")
    me.add_argument("--decoder", action="store_true",
                    help="only the pretrained decoder's table (benchmarks/decoder_lengths.py)")
    me.add_argument("--paths", action="store_true", help="only the k best paths' table (benchmarks/best_paths.py)")
    st = sub.add_parser("status", help="print the upstreaming status table (from the patch headers)")
    st.add_argument("--write", action="store_true", help="update the table in docs/building.md")
    ct = sub.add_parser("coverage-table", help="which derivatives.yaml entries have semiring rules (docs/)")
    ct.add_argument("--write", action="store_true", help="write docs/derivatives-coverage.md")
    mc = sub.add_parser("model-coverage",
                        help="the backward nodes of the reference models (tests/reference_models.py) and their rules")
    mc.add_argument("models", nargs="*", help="default: all")
    rn = sub.add_parser("run", help="run a command on the patched build (its venv, your directory and files "
                                    "at their own paths)")
    rn.add_argument("--unpatched", action="store_true", help="on `build --unpatched` instead")
    rn.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARGS]",
                    help="e.g. -- python my_script.py")
    sh = sub.add_parser("shell", help="an interactive shell on the patched build (as run)")
    sh.add_argument("--unpatched", action="store_true", help="on `build --unpatched` instead")
    dm = sub.add_parser("demo", help="the paper's analyses on real models, tables and figures (builds if needed)")
    dm.add_argument("--sentences", type=int, default=1000, help="agreement sentences (section 5.2)")
    dm.add_argument("--examples", type=int, default=1000, help="validation examples (section 5.1)")
    dm.add_argument("--prompts", type=int, default=40, help="decoder agreement prompts (SmolLM2)")
    t = sub.add_parser("test", help="the project's tests (see README)")
    t.add_argument("--fast", action="store_true", help="only the checks that need no build")
    t.add_argument("--no-build", action="store_true", help="test the installed build without rebuilding")
    t.add_argument("--prefix", type=int, metavar="N",
                   help="check, build and test the first N patches (with --no-build: test its build)")
    t.add_argument("pytest_args", nargs="*", help="passed to pytest (after --)")
    args = ap.parse_args(argv)
    if args.cmd == "run":
        args.argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
        if not args.argv:
            rn.error("nothing to run: give a command, e.g. scripts/semiring run -- python my_script.py")
    pin = load_pin()
    try:
        if args.cmd == "fetch":
            from .fetch import fetch
            fetch(pin, args.mirror, args.source)
        elif args.cmd == "doctor":
            from .doctor import install, report
            return 0 if (install(pin) if args.install else report(pin)) else 1
        elif args.cmd == "apply":
            series.apply(pin, args.worktree, force=args.force)
        elif args.cmd in ("export", "refresh"):
            series.export(args.worktree)
        elif args.cmd == "check":
            series.check(pin, upto=args.prefix)
        elif args.cmd == "build":
            from .build import build
            build(pin, unpatched=args.unpatched, cuda=args.cuda, prefix=args.prefix)
        elif args.cmd == "bench":
            from .bench import bench
            measures = {"instructions", "time"} if args.measure == "both" else {args.measure}
            if not bench(pin, measures, args.groups, args.samples, args.count_runs, args.steps).within:
                return 1
        elif args.cmd == "metrics":
            from .metrics import command as metrics
            return metrics(pin, write=args.write, decoder_only=args.decoder, paths_only=args.paths)
        elif args.cmd == "stats" and args.churn:
            from .churn import measure, report
            from .base import BASE_TAG
            tree = series.check(pin)
            print(report(measure(tree, BASE_TAG), series.read_series()), end="")
        elif args.cmd == "stats":
            from .stats import table
            print(table(layer=args.layer), end="")
        elif args.cmd == "status":
            if args.write:
                series.write_status()
            else:
                print(series.status_table(), end="")
        elif args.cmd == "coverage-table":
            from .coverage_table import command
            command(pin, write=args.write)
        elif args.cmd == "model-coverage":
            from .model_coverage import command as model_coverage
            return model_coverage(pin, args.models)
        elif args.cmd == "run":
            from .run import run_command
            return run_command(pin, args.argv, unpatched=args.unpatched)
        elif args.cmd == "shell":
            from .run import shell
            return shell(pin, unpatched=args.unpatched)
        elif args.cmd == "demo":
            from .demo import command as demo
            return demo(pin, args.sentences, args.examples, args.prompts)
        elif args.cmd == "test":
            from .testing import test
            return test(pin, fast=args.fast, rebuild=not args.no_build, pytest_args=args.pytest_args,
                        prefix=args.prefix)
    except ToolError as err:
        say(f"error: {err}")
        return 1
    return 0

"""The command line: `barrierproof check|prove|replay|tla|confirm ...`.

Exit codes: 0 verified/proved, 1 violation, 2 bounded/unknown, 3 input error.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import sys
import time
from typing import Callable, Sequence

from .checker.check import Options, check_kernel, error_verdict
from .checker.engines.explore import Limits
from .checker.report.text import timeline
from .checker.verdict import EXIT_CODES, Verdict
from .config import apply_config
from .loader import Target, resolve
from .model.ir import Kernel, ModelError

# Engines by name: module and function(kernel, params, options, source, args) -> Verdict.
ENGINES = {
    "explore": None,
    "tlc": ("barrierproof.checker.engines.tlc", "check_kernel_tlc"),
    "symbolic": ("barrierproof.checker.symbolic.prove", "prove_kernel"),
}


def _fail(message: str, hint: str | None = None) -> int:
    print(f"error: {message}" + (f" (hint: {hint})" if hint else ""), file=sys.stderr)
    return 3


def parse_params(items: Sequence[str]) -> dict[str, int]:
    params = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ModelError(f"--param {item!r} is not NAME=VALUE", hint="e.g. --param stages=3")
        try:
            params[name.strip()] = int(value, 0)
        except ValueError:
            raise ModelError(f"--param {item!r}: {value!r} is not an integer",
                             hint="parameters are integers, e.g. --param steps=8") from None
    return params


def parse_codes(text: str | None) -> frozenset[str]:
    if not text:
        return frozenset()
    return frozenset(c.strip().upper() for c in text.split(",") if c.strip())


def _engine(name: str) -> Callable | None:
    spec = ENGINES[name]
    if spec is None:
        return None
    module, fn = spec
    try:
        return getattr(importlib.import_module(module), fn)
    except (ImportError, AttributeError) as err:
        raise ModelError(f"engine {name!r} is not available: {err}",
                         hint="install the extra it needs (barrierproof[tla] for tlc)") from None


class _Progress:
    """States, depth and rate on a terminal's stderr while a long search runs; with --progress
    and no terminal (a CI log), one plain line every 10 seconds instead."""

    def __init__(self, enabled: bool, live: bool = True):
        self.enabled = enabled
        self.live = live
        self.status = None
        self.label = ""
        self.next_line = 0.0

    def callback(self, info: dict) -> None:
        if not self.enabled:
            return
        text = (f"{self.label}: {info['states']:,} states, depth {info['depth']}, "
                f"{info['rate']:,.0f} states/s")
        if not self.live:
            if time.monotonic() >= self.next_line:
                self.next_line = time.monotonic() + 10
                print(text, file=sys.stderr, flush=True)
            return
        if self.status is None:
            from rich.console import Console
            self.status = Console(stderr=True).status(text)
            self.status.start()
        else:
            self.status.update(text)

    def stop(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None


class _Interrupts:
    """Ctrl-C ends the search under way with a `bounded` verdict (the explorer turns it into
    one); remember it, so the protocols not yet checked are reported as such, not run."""

    def __enter__(self) -> "_Interrupts":
        self.seen = False
        try:
            self.previous = signal.signal(signal.SIGINT, self._handler)
        except ValueError:      # not the main thread: leave Ctrl-C alone
            self.previous = None
        return self

    def _handler(self, signum, frame):
        self.seen = True
        raise KeyboardInterrupt

    def __exit__(self, *exc) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)


def _not_checked(target: Target, why: str) -> Verdict:
    return Verdict(target.name, "bounded", source=target.ref, coverage=why,
                   expected=target.expect)


def _params_for(kernel: Kernel, params: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in params.items() if k in kernel.params}


def _error_or_violation(target: Target, err: ModelError, name: str | None = None,
                        ref: str | None = None) -> Verdict:
    verdict = error_verdict(name or target.name, err, ref or target.ref)
    verdict.expected = target.expect
    return verdict


def run_targets(targets: list[Target], params: dict[str, int], options: Options,
                engine: str, args, progress: _Progress, cache=None,
                interrupts: _Interrupts | None = None) -> list[Verdict]:
    verdicts = []
    engine_fn = _engine(engine)
    used: set[str] = set()
    for n, target in enumerate(targets):
        progress.label = target.name
        try:
            kernels = target.build_all()
        except ModelError as err:
            kernels = []
            verdicts.append(_error_or_violation(target, err))
        except KeyboardInterrupt:
            kernels = []
            verdicts.append(_not_checked(target, "interrupted (Ctrl-C) before a verdict"))
            if interrupts is not None:
                interrupts.seen = True
        for i, kernel in enumerate(kernels):
            # Later kernels of one Pallas function: `file.py::fn#2`, ...
            ref = target.ref if i == 0 else f"{target.ref}#{i + 1}"
            progress.label = kernel.name
            try:
                if target.expect and not kernel.expect:
                    kernel = kernel.replace(expect=target.expect)
                kp = _params_for(kernel, params)
                used |= set(kp)

                def compute(kernel=kernel, kp=kp, ref=ref) -> Verdict:
                    if engine_fn is None:
                        return check_kernel(kernel, kp, options, ref)
                    return engine_fn(kernel, kp, options, ref, args)
                verdict = compute() if cache is None else \
                    cache.check(kernel, kp, options, engine, ref, args, compute)
            except ModelError as err:
                verdict = _error_or_violation(target, err, kernel.name, ref)
            except KeyboardInterrupt:
                verdict = _not_checked(target, "interrupted (Ctrl-C) before a verdict")
                if interrupts is not None:
                    interrupts.seen = True
            finally:
                progress.stop()
            verdicts.append(verdict)
            if interrupts is not None and interrupts.seen:
                break
        if interrupts is not None and interrupts.seen:
            verdicts += [_not_checked(t, "not checked: interrupted (Ctrl-C)")
                         for t in targets[n + 1:]]
            return verdicts
    unused = sorted(set(params) - used - set(getattr(args, "config_only_params", ())))
    if unused and targets:
        raise ModelError(f"no protocol has parameter(s) {', '.join(unused)}",
                         hint="check the spelling of --param")
    return verdicts


def _write_traces(verdicts: list[Verdict], directory: str) -> None:
    os.makedirs(directory, exist_ok=True)
    for v in verdicts:
        if v.trace is not None:
            path = os.path.join(directory, f"{v.name}.trace.json")
            with open(path, "w") as f:
                f.write(v.trace.dumps())


def exit_code(verdicts: list[Verdict], expect: bool = False) -> int:
    if expect:
        return 0 if all(v.expected and v.matches(v.expected) for v in verdicts) else 1
    codes = {EXIT_CODES[v.verdict] for v in verdicts}
    for code in (3, 1, 2):
        if code in codes:
            return code
    return 0


# --format NAME -> (module, function(verdicts) -> str); junit also takes `expect`.
REPORTERS = {
    "text": ("barrierproof.checker.report.text", "text_report"),
    "json": ("barrierproof.checker.report.text", "json_report"),
    "sarif": ("barrierproof.checker.report.sarif", "sarif_report"),
    "junit": ("barrierproof.checker.report.junit", "junit_report"),
    "html": ("barrierproof.checker.report.html", "html_report"),
}


def render(fmt: str, verdicts: list[Verdict], expect: bool = False) -> str:
    module, fn = REPORTERS[fmt]
    report = getattr(importlib.import_module(module), fn)
    return report(verdicts, expect=expect) if fmt == "junit" else report(verdicts)


def cmd_check(args, engine: str | None = None) -> int:
    apply_config(args)       # [tool.barrierproof] in pyproject.toml, under the flags
    if not args.paths:
        return _fail("nothing to check", "give PATH arguments, or `paths` under "
                     "[tool.barrierproof] in pyproject.toml")
    params = parse_params(args.param)
    limits = Limits(max_states=args.max_states, max_depth=args.max_depth, timeout=args.timeout,
                    max_memory_mb=args.max_memory)
    progress = _Progress((sys.stderr.isatty() or args.progress) and not args.quiet,
                         live=sys.stderr.isatty())
    options = Options(limits, not args.no_reduction, parse_codes(args.ignore),
                      parse_codes(args.select) or None, progress.callback)
    targets: list[Target] = []
    for spec in args.paths:
        targets += resolve(spec)
    if not targets:
        return _fail(f"no protocols found in {' '.join(args.paths)}",
                     "define protocols with @protocol, or name Pallas kernels in EXPECT")
    from .cache import Cache
    cache = None if args.no_cache else Cache(args.cache_dir)
    with _Interrupts() as interrupts:
        verdicts = run_targets(targets, params, options, engine or args.engine, args, progress,
                               cache, interrupts)
    if cache is not None and cache.hits and not args.quiet:
        where = os.path.relpath(args.cache_dir)
        print(f"{cache.hits} of {len(verdicts)} verdicts from the cache "
              f"({args.cache_dir if where.startswith('..') else where}); "
              "--no-cache checks again", file=sys.stderr)
    if args.trace_dir:
        _write_traces(verdicts, args.trace_dir)
    if args.format == "text" and not args.output and sys.stdout.isatty():
        from .checker.report.console import print_report
        print_report(verdicts)
        return exit_code(verdicts, args.expect)
    text = render(args.format, verdicts, args.expect)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return exit_code(verdicts, args.expect)


def cmd_replay(args) -> int:
    from .model.interpreter import ReplayError, Trace, replay
    from .model.semantics import System
    try:
        with open(args.trace) as f:
            trace = Trace.from_json(json.load(f))
    except (OSError, ValueError, KeyError, TypeError) as err:
        return _fail(f"{args.trace}: not a barrierproof trace ({err})",
                     "write one with `check --trace-dir DIR` or `--format json`")
    if not trace.source:
        return _fail(f"{args.trace} does not say which protocol it belongs to")
    targets = resolve(trace.source)
    kernel = targets[0].build()
    system = System(kernel, trace.params, trace.grid_position)
    try:
        run = replay(system, trace.actions)
    except ReplayError as err:
        return _fail(f"{args.trace} does not replay on {trace.source}: {err}",
                     "the protocol changed since the trace was written; check it again")
    replayed = run.trace(trace.source)
    print(f"{trace.source}: replayed {len(replayed.steps)} steps -> {run.outcome}"
          + (f" {run.violation.code} {run.violation.message}" if run.violation else ""))
    print(timeline(replayed))
    for d in (run.violation.details if run.violation else []):
        print(f"  {d}")
    claimed = (trace.violation or {}).get("code")
    got = run.violation.code if run.violation else None
    if claimed != got:
        return _fail(f"{args.trace} does not replay to what it claims: "
                     f"{claimed or trace.outcome}, but the run ends {got or run.outcome}")
    from .model import reference
    try:
        ref = reference.replay_trace(kernel, trace)
    except reference.ReferenceError as err:
        return _fail(f"{args.trace}: the independent reference refuses it: {err}",
                     "the engine and the reference rules disagree: please report it")
    print(f"independent reference (model/reference.py): {ref.outcome}"
          + (f" {ref.code}" if ref.code else ""))
    if ref.code != got or ref.barrier_mismatches:
        return _fail(f"{args.trace}: the independent reference ends {ref.code or ref.outcome}"
                     + (f"; {ref.barrier_mismatches[0]}" if ref.barrier_mismatches else ""),
                     "the engine and the reference rules disagree: please report it")
    return 1 if run.violation else 0


def cmd_run(args) -> int:
    """One random schedule on the interpreter, shown as a timeline."""
    from .model.interpreter import random_run
    from .model.semantics import compile_systems
    params = parse_params(args.param)
    codes = set()
    for spec in args.paths:
        for target in resolve(spec):
            kernel = target.build()
            system = compile_systems(kernel, _params_for(kernel, params))[0]
            run = random_run(system, args.seed, args.max_steps)
            print(f"{target.ref}: random schedule (seed {args.seed}), {len(run.actions)} steps "
                  f"-> {run.outcome}" + (f" {run.violation.code} {run.violation.message}"
                                         if run.violation else ""))
            print(timeline(run.trace(target.ref)))
            for d in (run.violation.details if run.violation else []):
                print(f"  {d}")
            codes.add({"terminated": 0, "violation": 1, "deadlock": 1}.get(run.outcome, 2))
    return next((c for c in (1, 2) if c in codes), 0)


def _delegate(module: str, fn: str) -> Callable:
    def run(args) -> int:
        try:
            handler = getattr(importlib.import_module(module), fn)
        except (ImportError, AttributeError) as err:
            return _fail(f"`{args.command}` is not available: {err}")
        return handler(args)
    return run


def _add_check_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", metavar="PATH[::NAME]",
                   help="Python files or directories with protocols or Pallas kernels "
                        "(default: `paths` of [tool.barrierproof] in pyproject.toml)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="set a protocol parameter (repeatable)")
    p.add_argument("--format", choices=sorted(REPORTERS), default=None,
                   help="text (default; colour and tables on a terminal), json, sarif "
                        "(code scanning), junit (test reports), html (timelines)")
    p.add_argument("-o", "--output", help="write the report to a file")
    p.add_argument("--max-states", type=int, default=None, metavar="N",
                   help="default 5000000")
    p.add_argument("--max-depth", type=int, default=None, metavar="N")
    p.add_argument("--timeout", type=float, default=None, metavar="S")
    p.add_argument("--max-memory", type=int, default=None, metavar="MB", help="default 16000")
    p.add_argument("--no-reduction", action="store_true", help="turn symmetry reduction off")
    p.add_argument("--ignore", metavar="CODES", help="comma-separated codes to ignore")
    p.add_argument("--select", metavar="CODES", help="only these codes count")
    p.add_argument("--trace-dir", metavar="DIR", help="write each counterexample as JSON here")
    p.add_argument("--expect", action="store_true",
                   help="exit 0 only if every verdict matches its declared expectation")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    p.add_argument("--progress", action="store_true",
                   help="show progress even when stderr is not a terminal (a line every 10 s)")
    p.add_argument("--config", metavar="PYPROJECT", help="read [tool.barrierproof] from this file")
    p.add_argument("--no-config", action="store_true", help="ignore pyproject.toml")
    p.add_argument("--no-cache", action="store_true",
                   help="check everything again; neither read nor write the proof cache")
    p.add_argument("--cache-dir", metavar="DIR",
                   help="where the proof cache lives (default: .barrierproof_cache next to the "
                        "pyproject.toml, or $BARRIERPROOF_CACHE_DIR)")


class _Parser(argparse.ArgumentParser):
    """Usage errors are input errors: exit 3, one line."""

    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(3, f"error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="barrierproof",
        description="Prove GPU barrier protocols deadlock-free, or show the shortest "
                    "interleaving that breaks them.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("check", help="check protocols and kernels exhaustively")
    _add_check_flags(p)
    p.add_argument("--engine", choices=sorted(ENGINES), default="explore")
    p.add_argument("--workers", type=int, default=1, help="TLC worker threads (--engine tlc)")
    p.set_defaults(run=cmd_check)

    p = sub.add_parser("prove", help="prove protocols for every value of their parameters (Z3)")
    _add_check_flags(p)
    p.add_argument("--symbolic", action="append", default=[], metavar="NAME",
                   help="a parameter to quantify over (repeatable; default: declared ones)")
    p.set_defaults(run=lambda a: cmd_check(a, "symbolic"))

    p = sub.add_parser("replay", help="re-execute a counterexample trace on the interpreter")
    p.add_argument("trace", metavar="TRACE.json")
    p.set_defaults(run=cmd_replay)

    p = sub.add_parser("run", help="run one random schedule on the interpreter")
    p.add_argument("paths", nargs="+", metavar="PATH[::NAME]")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-steps", type=int, default=100_000)
    p.set_defaults(run=cmd_run)

    p = sub.add_parser("graph", help="write the state graph of a small protocol as DOT")
    p.add_argument("path", metavar="PATH::NAME")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("-o", "--output", metavar="FILE.dot", help="default: stdout")
    p.add_argument("--max-states", type=int, default=2000, metavar="N",
                   help="refuse larger graphs (default 2000)")
    p.set_defaults(run=_delegate("barrierproof.checker.report.graph", "cli_main"))

    p = sub.add_parser("tla", help="emit TLA+ specs (and their TLC configs)")
    p.add_argument("paths", nargs="+", metavar="PATH[::NAME]")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("-o", "--output", required=True, metavar="DIR")
    p.set_defaults(run=_delegate("barrierproof.checker.engines.tla", "cli_main"))

    p = sub.add_parser("confirm", help="run a Pallas kernel in JAX's GPU interpret mode")
    p.add_argument("paths", nargs="+", metavar="PATH::NAME")
    p.add_argument("--timeout", type=float, default=20.0, metavar="S")
    p.add_argument("--runs", type=int, default=1, help="interpreter runs (schedules differ)")
    p.add_argument("--json", action="store_true", help="print the outcomes as JSON")
    p.add_argument("--quiet-seconds", dest="quiet", type=float, default=5.0, metavar="S",
                   help="a run whose barriers make no progress for S seconds while a thread "
                        "waits is reported hung")
    p.set_defaults(run=_delegate("barrierproof.confirm", "cli_main"))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except ModelError as err:
        return _fail(str(err))
    except KeyboardInterrupt:
        return _fail("interrupted")
    except BrokenPipeError:
        return 0

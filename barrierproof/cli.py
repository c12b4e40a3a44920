"""The command line: `barrierproof check|prove|replay|tla|confirm ...`.

Exit codes: 0 verified/proved, 1 violation, 2 bounded/unknown, 3 input error.

This module is parsing and running: one parser per command, the run loop (in this process or in
a pool of workers, with the cache, signals and limits) and the summary. Engines, reporters and
the other commands' work live elsewhere (checker/engine_registry.py, outputs.py, commands.py).
It stays one module of about 950 lines because the parsers and the run loop share the option
names, the exit-code rules and the signal handling; split, each half would re-state them.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Sequence

from . import __version__
from .checker.check import Options, error_verdict
from .checker.engine_registry import ENGINES
from .checker.engines.explore import Limits
from .checker.report.text import timeline
from .checker.report.views import trace_stem
from .checker.verdict import EXIT_CODES, Verdict
from .config import apply_config
from . import guard
from .guard import GRACE_SECONDS, Interrupts, LimitReached, Watchdog
from .loader import Target
from .outputs import (REPORTERS, add_flags as add_ci_flags, exit_status, output_paths, render,
                      write_reports)
from . import isolate, suppress
from .model.ir import ModelError
from .model.interpreter import ReplayError
from .validate import check_args, check_codes, writable_dir
from . import streams
from .safe_write import refuse_overwriting_inputs, write_into_dir, write_output
from .exhausted import EXHAUSTED, exhausted_verdict
from .flags import fail as _fail, params_for as _params_for, parse_params


def _steps(n: int) -> str:
    return f"{n} step" if n == 1 else f"{n} steps"


def parse_codes(text: str | None, flag: str = "--select/--ignore") -> frozenset[str]:
    """Codes of --select/--ignore; an unknown one is an input error, never a silent pass."""
    return check_codes(text, flag)


class _Progress:
    """States, depth and rate on a terminal's stderr while a long search runs; with --progress
    and no terminal (a CI log), one plain line every 10 seconds instead: the latest state, held
    back while a line is due within the window and written when it opens, so a phase entered
    just after another line is shown, and a long phase is shown again every 10 s with its time
    so far (the prover enters a phase once, whatever it costs)."""

    INTERVAL = 10.0

    def __init__(self, enabled: bool, live: bool = True):
        self.enabled = enabled
        self.live = live
        self.status = None
        self.label = ""
        self.next_line = 0.0
        self.pending: str | None = None     # the latest text, not written yet
        self.shown: tuple[str, float] | None = None     # the last phase written, and since when
        self.timer = None
        self.lock = threading.Lock()

    def callback(self, info: dict) -> None:
        if not self.enabled:
            return
        if "phase" in info:     # the prover: the phase it is in, and how much budget is spent
            self.show(f"{self.label}: prove: {info['phase']} ({min(1.0, info['spent']):.0%} of "
                      f"the --timeout {info['seconds']:g} budget spent)", phase=True)
            return
        text = (f"{self.label}: {info['states']:,} states, depth {info['depth']}, "
                f"{info['rate']:,.0f} states/s")
        if info.get("bytes_per_state"):
            text += f", {info['bytes_per_state']:,.0f} bytes/state"
        if info.get("shortest_found"):      # depth first: a violation in hand, being shortened
            text += f", a violation in {info['shortest_found']} steps (shortening)"
        self.show(text)

    def show(self, text: str, phase: bool = False) -> None:
        if not self.live:
            with self.lock:
                self.pending = text
                self.shown = (text, time.monotonic()) if phase else None
                self._due()
            return
        if self.status is None:
            from rich.console import Console
            self.status = Console(stderr=True).status(text)
            self.status.start()
        else:
            self.status.update(text)

    def _due(self) -> None:
        """Write the pending line if the window is open, else when it opens (under the lock)."""
        now = time.monotonic()
        if now >= self.next_line:
            self._write(now)
        elif self.timer is None:
            self._arm(self.next_line - now)

    def _tick(self) -> None:
        with self.lock:
            if self.timer is None:      # stopped meanwhile
                return
            self.timer = None
            now = time.monotonic()
            if now < self.next_line:    # a line was written meanwhile: wait for the next window
                self._arm(self.next_line - now)
                return
            if self.pending is None and self.shown is not None:     # a phase still running
                text, since = self.shown
                self.pending = f"{text}, {now - since:.0f} s in this phase"
            if self.pending is not None:
                self._write(now)

    def _arm(self, delay: float) -> None:
        self.timer = threading.Timer(delay, self._tick)
        self.timer.daemon = True
        self.timer.start()

    def _write(self, now: float) -> None:
        print(self.pending, file=sys.stderr, flush=True)
        self.pending = None
        self.next_line = now + self.INTERVAL
        if self.shown is not None and self.timer is None:   # shown again if it lasts
            self._arm(self.INTERVAL)

    def stop(self) -> None:
        with self.lock:
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
            self.pending = self.shown = None
        if self.status is not None:
            self.status.stop()
            self.status = None


def _not_checked(target: Target, why: str) -> Verdict:
    return Verdict(target.name, "bounded", source=target.ref, coverage=why,
                   expected=target.expect)


def _error_or_violation(target: Target, err: ModelError, name: str | None = None,
                        ref: str | None = None) -> Verdict:
    verdict = error_verdict(name or target.name, err, ref or target.ref)
    verdict.expected = target.expect
    return verdict


def _stopped(target: Target, name: str, ref: str, what: str, engine: str) -> Verdict:
    """The watchdog stopped a build or an engine: a limit, so `bounded` (`unknown` for the
    prover, whose verdicts have no partial coverage)."""
    kind = ENGINES[engine].when_stopped
    verdict = Verdict(name, kind, source=ref, coverage=f"stopped: {what}; nothing was concluded",
                      expected=target.expect, engine=engine)
    if ENGINES[engine].wall_factor != 1.0 and "wall-clock" in what:    # a work budget (prove)
        verdict.notes.append("the prover's work budget for this --timeout was not spent: its "
                             "verdict depends on input and budget only, but this machine was "
                             "too slow to spend it in time; a larger --timeout gives it room")
    return verdict


def _engine_fault(target: Target, name: str, ref: str, err: ReplayError,
                  engine: str) -> Verdict:
    """An engine's counterexample that the interpreter does not replay to the engine's code:
    a fault of barrierproof, never a verdict on the kernel, so `unknown` (exit 2), not a
    traceback whose exit status would read as a violation."""
    verdict = Verdict(name, "unknown", source=ref, expected=target.expect, engine=engine,
                      coverage=f"internal error: {guard.safe_text(err)}; nothing was concluded")
    verdict.notes.append("the engines disagree on this protocol: please report it; "
                         "`--engine explore` may still decide it")
    return verdict


def run_targets(targets: list[Target], params: dict[str, int], options: Options,
                engine: str, args, progress: _Progress, cache=None,
                interrupts: Interrupts | None = None) -> list[Verdict]:
    jobs = getattr(args, "jobs", None) or os.cpu_count() or 1
    if jobs > 1 and len(targets) > 1:
        verdicts, used, build_failed, hits = _run_in_parallel(targets, params, options, engine,
                                                              args, jobs, interrupts)
        if cache is not None:
            cache.hits += hits          # the workers' lookups, for the summary line
    else:
        verdicts, used, build_failed = _run_here(targets, params, options, engine, args,
                                                 progress, cache, interrupts)
    unused = sorted(set(params) - used - set(getattr(args, "config_only_params", ())))
    # A protocol that failed to build may be the one with the parameter: its error says more.
    if unused and targets and not build_failed:
        raise ModelError(f"no protocol has parameter(s) {', '.join(unused)}",
                         hint="check the spelling of --param")
    return verdicts


def _run_in_parallel(targets: list[Target], params: dict[str, int], options: Options,
                     engine: str, args, jobs: int, interrupts: Interrupts | None = None
                     ) -> tuple[list[Verdict], set[str], bool, int]:
    """One target per task in `jobs` fresh processes (spawned: a traced JAX must not be
    forked); verdicts come back in the order of `targets`, through the same cache. Workers get
    this run's limits for user code; a Ctrl-C or SIGTERM ends them and keeps what is done."""
    import concurrent.futures
    import dataclasses
    import multiprocessing
    plain = argparse.Namespace(**{k: v for k, v in vars(args).items() if not callable(v)})
    quiet = dataclasses.replace(options, progress=None)
    context = multiprocessing.get_context("spawn")
    results: list = [None] * len(targets)
    used: set[str] = set()
    failed = False
    hits = 0
    pool = concurrent.futures.ProcessPoolExecutor(min(jobs, len(targets)), mp_context=context,
                                                  initializer=_worker_signals,
                                                  initargs=(os.getpid(),))
    futures = {}
    for n, t in enumerate(targets):
        if t.kind == "error":     # a file that does not import: reported here
            results[n], _, _ = _run_here([t], params, quiet, engine, args, _Progress(False))
            failed = True
        else:
            futures[n] = pool.submit(_check_one, (t.ref, t.expect, params, quiet, engine,
                                                  plain, guard.budget, t.entry))
    try:
        for n, future in futures.items():
            try:
                results[n], names, broken, found = future.result()
            except (RecursionError, MemoryError, TypeError, ValueError, AttributeError,
                    ImportError) as err:    # a result that did not come back (not picklable)
                results[n] = [_error_or_violation(targets[n], ModelError(
                    f"the worker checking {targets[n].ref} failed: {type(err).__name__}: "
                    f"{guard.safe_text(err)}", hint="run it with --jobs 1 to see more"))]
                names, broken, found = set(), True, 0
            used |= names
            failed = failed or broken
            hits += found
    except (KeyboardInterrupt, concurrent.futures.process.BrokenProcessPool):
        if interrupts is not None:
            interrupts.seen = True
        _wind_down(pool, futures, results)
    finally:
        # Every result is in (or the run was interrupted): a worker's exit could wait forever
        # on a thread the user's code left running, so the workers end here. Joined before
        # returning: Python 3.11's exit hook would otherwise race the pool's manager thread for
        # its wake-up pipe and print a traceback.
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            if process.is_alive():
                process.kill()
        pool.shutdown(wait=True, cancel_futures=True)
    for n, t in enumerate(targets):
        if results[n] is None:
            results[n] = [_not_checked(t, f"not checked: {_why(interrupts)}")]
    return [v for found in results for v in found], used, failed, hits


# Seconds the running workers get after an interrupt to hand back what they covered.
WIND_DOWN_SECONDS = 10.0


def _wind_down(pool, futures: dict, results: list) -> None:
    """After a Ctrl-C or SIGTERM: the workers stop their searches and report them as `bounded`
    with the states they covered (a terminal's Ctrl-C reaches them directly; a signal sent to
    this process only is passed on); tasks not started are cancelled; a worker that does not
    answer within WIND_DOWN_SECONDS (or a second Ctrl-C) is ended and its target reported as
    not checked."""
    import concurrent.futures
    import signal as signals
    pending = {n: f for n, f in futures.items() if results[n] is None and not f.cancel()}
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for process in processes:
        try:
            os.kill(process.pid, signals.SIGINT)
        except (OSError, TypeError):
            pass
    try:
        concurrent.futures.wait(pending.values(), timeout=WIND_DOWN_SECONDS)
    except KeyboardInterrupt:
        pass
    for n, future in pending.items():
        if future.done() and not future.cancelled() and future.exception() is None:
            results[n] = future.result()[0]
    for process in processes:
        if process.is_alive():
            process.kill()          # SIGKILL: a worker takes SIGTERM as one more interrupt


_WORKER_INTERRUPTED = False


def _worker_signals(parent: int) -> None:
    """A worker remembers a Ctrl-C or SIGTERM that arrives between tasks (inside one, the
    task's own Interrupts turn it into a `bounded` verdict); once interrupted it takes no task.
    It dies with the run: a SIGKILL of barrierproof (a CI runner's last resort) leaves no
    worker searching on with nobody to report to."""
    import signal as signals
    guard.die_with_parent(parent)

    def remember(signum, frame):
        global _WORKER_INTERRUPTED
        _WORKER_INTERRUPTED = True
    for sig in Interrupts.SIGNALS:
        signals.signal(sig, remember)


def _check_one(task) -> tuple[list[Verdict], set[str], bool, int]:
    """A worker: find the target again by its reference and check it; also how many of its
    verdicts came from the cache."""
    ref, expect, params, options, engine, args, budget, entry = task
    guard.budget = budget           # the limits for user code (build, trace) of this run
    try:
        family = ENGINES[engine].reads_families
        # Built by the parent's child as it imported the file: the kernels come as data.
        matches = [isolate.target_of(entry, family)] if entry is not None and \
            entry.get("built") is not None else isolate.resolve(ref, family=family)
    except (ModelError, LimitReached, *EXHAUSTED) as err:   # its import or build: its verdict
        from .loader import _broken_target
        broken = _broken_target(ref.partition("::")[0], err)
        broken.ref, broken.name = ref, ref.rpartition("::")[2]
        matches = [broken]
    for t in matches:
        t.expect = t.expect or expect
    from .cache import Cache
    cache = None if args.no_cache else Cache(args.cache_dir)
    global _WORKER_INTERRUPTED
    if _WORKER_INTERRUPTED:
        return [_not_checked(t, "not checked: interrupted") for t in matches], set(), False, 0
    with Interrupts() as interrupts:
        # A signal passed on by the parent is a real interrupt, not the user's own
        # KeyboardInterrupt: user_code tells them apart by the run's Interrupts.
        guard.current = interrupts
        try:
            found = _run_here(matches, params, options, engine, args, _Progress(False), cache,
                              interrupts)
        finally:
            guard.current = None
    _WORKER_INTERRUPTED = _WORKER_INTERRUPTED or interrupts.seen
    return (*found, cache.hits if cache is not None else 0)


def _run_here(targets: list[Target], params: dict[str, int], options: Options,
              engine: str, args, progress: _Progress, cache=None,
              interrupts: Interrupts | None = None) -> tuple[list[Verdict], set[str], bool]:
    verdicts = []
    chosen = ENGINES[engine]
    engine_fn = chosen.load()
    settings = chosen.make_settings(args)   # its flags, parsed by argparse, as its dataclass
    used: set[str] = set()
    build_failed = False
    limits = options.limits
    # The engines keep their own limits; the watchdog is the net behind them.
    # prove's --timeout is a work budget (checker/symbolic/prove.py Budget): its net is far
    # behind, so load does not change its verdict.
    factor = chosen.wall_factor
    net = None if limits.timeout is None else limits.timeout * factor + GRACE_SECONDS
    stop_solver = chosen.stop_solver if chosen.interrupt else None
    mem_text = None if limits.max_memory_mb is None else (
        f"memory limit (--max-memory {limits.max_memory_mb} MB + 25% headroom)")
    net_text = None if net is None else (
        f"wall-clock limit (--timeout {limits.timeout:g}s"
        + (f" x {factor:g}" if factor != 1.0 else "") + f" + {GRACE_SECONDS:g}s grace)")
    for n, target in enumerate(targets):
        progress.label = target.name
        family = chosen.reads_families and target.build_family is not None
        try:
            kernels = [target.build_family()] if family else target.build_all()
        except ModelError as err:
            kernels = []
            build_failed = True
            verdicts.append(_error_or_violation(target, err))
        except LimitReached as stop:
            kernels = []
            build_failed = True
            verdicts.append(_stopped(target, target.name, target.ref, stop.what, engine))
        except EXHAUSTED as err:
            kernels = []
            build_failed = True
            verdicts.append(exhausted_verdict(target.name, target.ref, err, "building",
                                              target.expect, engine))
        except KeyboardInterrupt:
            kernels = []
            verdicts.append(_not_checked(target, f"{_why(interrupts)} before a verdict"))
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
                    with Watchdog(net, limits.max_memory_mb and limits.max_memory_mb * 1.25,
                                  f"checking {kernel.name}", net_text, stop_solver, mem_text):
                        return engine_fn(kernel, kp, options, ref, settings)
                verdict = compute() if cache is None else \
                    cache.check(kernel, kp, options, engine, ref, args, compute)
                if family and verdict.verdict == "violation" and verdict.trace is not None:
                    verdict = target.replay_family(verdict, options)
            except ModelError as err:
                verdict = _error_or_violation(target, err, kernel.name, ref)
            except ReplayError as err:
                verdict = _engine_fault(target, kernel.name, ref, err, engine)
            except LimitReached as stop:
                verdict = _stopped(target, kernel.name, ref, stop.what, engine)
            except EXHAUSTED as err:
                verdict = exhausted_verdict(kernel.name, ref, err, "checking", target.expect,
                                            engine)
            except KeyboardInterrupt:
                verdict = _not_checked(target, f"{_why(interrupts)} before a verdict")
                if interrupts is not None:
                    interrupts.seen = True
            finally:
                progress.stop()
            verdicts.append(verdict)
            if interrupts is not None and interrupts.seen:
                break
        if interrupts is not None and interrupts.seen:
            verdicts += [_not_checked(t, f"not checked: {_why(interrupts)}")
                         for t in targets[n + 1:]]
            return verdicts, used, build_failed
    return verdicts, used, build_failed


def _why(interrupts: Interrupts | None) -> str:
    return interrupts.why() if interrupts is not None else "interrupted (Ctrl-C)"


def trace_file_names(verdicts: list[Verdict]) -> dict[int, str]:
    """A file name per verdict with a trace: the protocol's name reduced to [A-Za-z0-9._-] (no
    `/`, no `..`: the file stays inside --trace-dir), numbered when two would collide.

    >>> v = lambda n: Verdict(n, "violation", trace=object())
    >>> sorted(trace_file_names([v("ring"), v("ring"), v("../x/y"), v("")]).values())
    ['protocol.trace.json', 'ring-2.trace.json', 'ring.trace.json', 'x_y.trace.json']
    """
    names: dict[int, str] = {}
    taken: set[str] = set()
    for i, v in enumerate(verdicts):
        if v.trace is None:
            continue
        stem = trace_stem(v.name)
        name, n = stem, 1
        while name.lower() in taken:        # case-insensitive file systems collide too
            n += 1
            name = f"{stem}-{n}"
        taken.add(name.lower())
        names[i] = f"{name}.trace.json"
    return names


def _write_traces(verdicts: list[Verdict], directory: str) -> None:
    for i, name in trace_file_names(verdicts).items():
        write_into_dir(directory, name, verdicts[i].trace.dumps())


def exit_code(verdicts: list[Verdict], expect: bool = False) -> int:
    if expect:
        return 0 if all(v.expected and v.matches(v.expected) for v in verdicts) else 1
    codes = {EXIT_CODES[v.verdict] for v in verdicts}
    for code in (3, 1, 2):
        if code in codes:
            return code
    return 0


def _attach_fixes(verdicts: list[Verdict], targets: list[Target], params: dict[str, int],
                  options: Options) -> None:
    """Verified repairs for every violation (`--fix`); kernels are built again, so a cached
    verdict gets them too."""
    from .checker.repair import attach_fixes, repairable
    from .fixcmd import rebuild_with
    wanted = {v.source: v for v in verdicts if v.source and repairable(v)}
    quiet = Options(options.limits, options.reduction, options.ignore, options.select)
    for target in targets:
        if not any(ref.partition("#")[0] == target.ref for ref in wanted):
            continue
        try:
            kernels = target.build_all()
        except (ModelError, LimitReached):
            continue
        for i, kernel in enumerate(kernels):
            ref = target.ref if i == 0 else f"{target.ref}#{i + 1}"
            if ref in wanted:
                attach_fixes(wanted[ref], kernel, _params_for(kernel, params), quiet,
                             rebuild=rebuild_with(kernel))


def cmd_check(args, engine: str | None = None) -> int:
    config = apply_config(args)      # [tool.barrierproof] in pyproject.toml, under the flags
    refuse_overwriting_inputs(args, output_paths(args), config.path)
    if not args.paths:
        return _fail("nothing to check", "give PATH arguments, or `paths` under "
                     "[tool.barrierproof] in pyproject.toml")
    check_args(args)         # flags and config values alike, before any user code runs
    params = parse_params(args.param)
    if not args.no_cache and os.path.exists(args.cache_dir) and not os.path.isdir(args.cache_dir):
        writable_dir(args.cache_dir, "--cache-dir")
    limits = Limits(max_states=args.max_states, max_depth=args.max_depth, timeout=args.timeout,
                    max_memory_mb=args.max_memory)
    progress = _Progress((sys.stderr.isatty() or args.progress) and not args.quiet,
                         live=sys.stderr.isatty())
    options = Options(limits, not args.no_reduction, parse_codes(args.ignore, "--ignore"),
                      parse_codes(args.select, "--select") or None, progress.callback,
                      store=getattr(args, "store", None) or "tuple",
                      # unreduced, breadth first unless asked: the compiled core runs it
                      order=getattr(args, "search", None) or
                      ("bfs" if args.no_reduction else "dfs"),
                      core=getattr(args, "core", None),
                      workers=getattr(args, "workers", None) or 1)
    for spec in args.paths:     # every path exists before any file is imported
        path = spec.partition("::")[0]
        if not os.path.exists(path):
            raise ModelError(f"{path} does not exist",
                             hint="give a .py file, a directory, or file.py::NAME")
    guard.budget = (guard.build_limit(args.build_timeout, limits.timeout), limits.max_memory_mb)
    from .cache import Cache
    cache = None if args.no_cache else Cache(args.cache_dir)
    rechecks = 0        # targets checked again with a suppressed code ignored (suppress.py)
    with Interrupts() as interrupts:
        guard.current = interrupts
        try:
            chosen = engine or args.engine
            # Each file is built as it is imported (one child per file, whose kernels come
            # back as data); in parallel, the workers are sent those kernels.
            targets, verdicts = _collect(args.paths, interrupts,
                                         getattr(args, "verbose", False), args.exclude,
                                         build=True,
                                         family=chosen in ENGINES and
                                         ENGINES[chosen].reads_families)
            if not targets and not verdicts:
                return _fail(f"no protocols found in {' '.join(args.paths)}",
                             "define protocols with @protocol, declare Gluon launches with Launch(...), "
                             "name Pallas or CuTe DSL kernel functions in EXPECT, or give "
                             "file.py::NAME")
            if not interrupts.seen:
                verdicts += run_targets(targets, params, options, engine or args.engine, args,
                                        progress, cache, interrupts)
            if not interrupts.seen:     # a suppressed finding: that target again (suppress.py)
                def again(target: Target, opts: Options) -> list[Verdict]:
                    return run_targets([target], params, opts, engine or args.engine, args,
                                       progress, cache, interrupts)
                chosen = engine or args.engine
                verdicts, rechecks = suppress.apply_all(
                    verdicts, targets, options, again,
                    chosen in ENGINES and ENGINES[chosen].locates_suppressions, chosen)
            if getattr(args, "fix", False) and not interrupts.seen:
                _attach_fixes(verdicts, targets, params, options)
        finally:
            guard.current = None
            interrupts.quiet()      # the report below is written whatever arrives now
        if cache is not None and cache.hits and not args.quiet:
            where = os.path.relpath(args.cache_dir)
            print(f"{cache.hits} of {len(verdicts) + rechecks} verdicts from the cache "
                  f"({args.cache_dir if where.startswith('..') else where}); "
                  "--no-cache checks again", file=sys.stderr)
        if getattr(args, "confirm", False):
            confirm_in_jax(verdicts, {t.ref: t.kind for t in targets})
        return _report(verdicts, args)


def confirm_in_jax(verdicts: list[Verdict], kinds: dict[str, str]) -> None:
    """Each Pallas violation with a counterexample is run in JAX's interpreter with the trace's
    order of barrier events forced on its threads; the verdict's notes say what JAX did, and
    "reproduced in JAX's interpreter" only when its outcome and message class agree."""
    import json
    import tempfile
    from . import confirm as jax_confirm
    for v in verdicts:
        if v.verdict != "violation" or v.trace is None or kinds.get(v.source) != "pallas":
            continue
        with tempfile.NamedTemporaryFile("w", suffix=".trace.json", delete=False) as f:
            json.dump(v.trace.to_json(), f)
        try:
            result = jax_confirm.confirm_all([v.source], timeout=90.0, schedule=f.name)[0]
        finally:
            os.unlink(f.name)
        what = f"{result.outcome}" + (f": {result.message}" if result.message else "")
        if result.outcome in ("raised", "hung") and \
                jax_confirm.agrees(v.label, result.outcome, result.message):
            v.notes.append(f"reproduced in JAX's interpreter under this schedule ({what})")
        elif v.label in jax_confirm.INTERPRETER_BLIND:
            v.notes.append(f"JAX's interpreter does not check {v.codes[0]} (copies land at "
                           f"issue, pending arrivals are not checked at exit): {what}")
        else:
            v.notes.append(f"not reproduced in JAX's interpreter under this schedule ({what})")


def _collect(specs: list[str], interrupts: Interrupts, verbose: bool = False,
             exclude: Sequence[str] = (), build: bool = True, family: bool = False
             ) -> tuple[list[Target], list[Verdict]]:
    """The targets of every path. A file that cannot be imported is its own `error` verdict
    when several paths are given (one file must not hide the others), a plain input error when
    it is the only one; a signal while importing reports what was not reached as `bounded`."""
    targets: list[Target] = []
    skipped: list[tuple[str, str]] = []
    for n, spec in enumerate(specs):
        try:
            targets += isolate.resolve(spec, skipped, exclude, build=build, family=family)
            if verbose:     # -v: the files of a directory that were not checked, and why
                for path, why in skipped:
                    print(f"skipped {path}: {why}", file=sys.stderr)
            skipped.clear()
        except (ModelError, LimitReached) as err:
            if len(specs) == 1 and isinstance(err, ModelError):
                raise
            from .loader import _broken_target
            targets.append(_broken_target(spec.partition("::")[0], err))
        except KeyboardInterrupt:
            interrupts.seen = True
            left = [Verdict(Path(s.partition("::")[0]).stem or s, "bounded", source=s,
                            coverage=f"not checked: {interrupts.why()} while importing")
                    for s in specs[n:]]
            return [], [_not_checked(t, f"not checked: {interrupts.why()}")
                        for t in targets] + left
    return targets, []


def _report(verdicts: list[Verdict], args) -> int:
    """Traces, then the report: a write that fails now (a full disk) is an input error with a
    message, never a traceback that loses the verdicts."""
    code = exit_status(exit_code(verdicts, args.expect), args)
    try:
        if args.trace_dir:
            _write_traces(verdicts, args.trace_dir)
        write_reports(verdicts, args)       # the -o files and the console (outputs.py)
    except BrokenPipeError:
        return streams.broken_pipe(code)
    except OSError as err:
        where = err.filename or args.trace_dir
        return _fail(f"cannot write {where}: {err.strerror or err}",
                     "check the disk and the path; the verdicts were "
                     + ", ".join(f"{v.name} {v.label}" for v in verdicts[:5])
                     + (" ..." if len(verdicts) > 5 else ""))
    return code


def _load_traces(path: str) -> list[dict]:
    """The traces in a file: one trace (`check --trace-dir`), or every counterexample of a JSON
    report (`check --format json`). Shapes are checked (schema.py) before anything runs."""
    from .schema import ShapeError, check_trace, check_verdict
    from .tracefile import read_bounded
    try:
        data = json.loads(read_bounded(path))
    except OSError as err:
        raise ModelError(f"cannot read {path}: {err.strerror or err}") from None
    except (ValueError, RecursionError) as err:
        raise ModelError(f"{path} is not JSON ({str(err)[:120]})",
                         hint="give a trace written by `check --trace-dir DIR`") from None
    try:
        if isinstance(data, list):      # a JSON report: its verdicts' counterexamples
            for i, item in enumerate(data):
                try:
                    check_verdict(item)
                except ShapeError as err:
                    raise ShapeError(f"$[{i}]{str(err)[1:]}") from None
            traces = [v["trace"] for v in data if v.get("trace")]
            if not traces:
                raise ModelError(f"{path} is a report without counterexamples: nothing to replay")
            return traces
        check_trace(data)
        return [data]
    except ShapeError as err:
        raise ModelError(f"{path} is not a barrierproof trace: {err}",
                         hint="write one with `check --trace-dir DIR` or `--format json`") from None


def _replay_targets(trace_path: str, source: str | None, given: str | None) -> list[Target]:
    """The protocol a trace is replayed on. A trace is data: the code it names is never
    imported (a received trace could name any file, setup.py included); the user says with
    `--protocol PATH[::NAME]`, and of a file's protocols the trace only picks its own by name."""
    if not given:
        raise ModelError(f"{trace_path}: replay runs a protocol's code, and only --protocol "
                         f"says which (the trace names {source!r}, which is not imported)",
                         hint=f"barrierproof replay {trace_path} --protocol "
                              f"{source or 'PATH::NAME'}")
    targets = isolate.resolve(given)
    if len(targets) > 1 and source:
        name = source.partition("::")[2].partition("#")[0]
        targets = [t for t in targets if name in (t.name, t.ref.rpartition("::")[2])] or targets
    return targets


def cmd_replay(args) -> int:
    codes = []
    for data in _load_traces(args.trace):
        if len(data["actions"]) > args.max_steps:
            print(f"error: {args.trace} holds a schedule of {len(data['actions']):,} steps, more "
                  f"than --max-steps {args.max_steps:,} (hint: raise --max-steps to replay it)",
                  file=sys.stderr)
            codes.append(2)
            continue
        with guard.Watchdog(args.timeout, args.max_memory, f"replaying {args.trace}",
                            f"replay's time limit (--timeout {args.timeout:g}s)",
                            memory_text=f"replay's memory limit (--max-memory {args.max_memory} MB)"):
            try:
                codes.append(_replay_one(args, data))
            except LimitReached as stop:
                print(f"error: {stop.what}; nothing was concluded (hint: raise the limit, or "
                      "check the trace's parameters)", file=sys.stderr)
                codes.append(2)
    for code in (3, 1, 2):
        if code in codes:
            return code
    return 0


def _replay_one(args, data: dict) -> int:
    from .checker.report.safe import printable, printable_copy
    from .model.interpreter import ReplayError, Trace, replay
    from .model.semantics import System
    try:
        trace = Trace.from_json(data)
    except TypeError as err:
        return _fail(f"{args.trace}: not a barrierproof trace ({err})",
                     "write one with `check --trace-dir DIR` or `--format json`")
    targets = _replay_targets(args.trace, trace.source, args.protocol)
    source = targets[0].ref if len(targets) == 1 else args.protocol
    shown = printable(source)
    if len(targets) != 1:
        return _fail(f"{shown} names {len(targets)} protocols; a trace replays on one",
                     "pass --protocol PATH::NAME")
    kernel = targets[0].build()
    try:
        system = System(kernel, trace.params, trace.grid_position)
        run = replay(system, trace.actions, witness=trace.witness_actions)
    except (ReplayError, ModelError) as err:
        return _fail(f"{args.trace} does not replay on {shown}: {printable(str(err))}",
                     "the protocol changed since the trace was written; check it again")
    replayed = printable_copy(run.trace(source))
    print(f"{shown}: replayed {_steps(len(replayed.steps))} -> {run.outcome}"
          + (f" {run.violation.code} {run.violation.message}" if run.violation else ""))
    print(timeline(replayed))
    if run.witness is not None:       # parity aliasing: the other schedule, as a timeline too
        print("the other schedule:")
        print(timeline(printable_copy(run.witness.trace(source))))
    for d in (run.violation.details if run.violation else []):
        print(f"  {printable(d)}")
    claimed = (trace.violation or {}).get("code")
    got = run.violation.code if run.violation else None
    if claimed != got:
        return _fail(f"{args.trace} does not replay to what it claims: "
                     f"{printable(str(claimed or trace.outcome))}, but the run ends "
                     f"{got or run.outcome}")
    from .model import reference
    if not reference.covers(kernel):
        print("independent reference (model/reference): does not model "
              + ", ".join(reference.uncovered(kernel)))
        return 1 if run.violation else 0
    try:
        ref = reference.replay_trace(kernel, trace)
    except reference.ReferenceError as err:
        return _fail(f"{args.trace}: the independent reference refuses it: {err}",
                     "the engine and the reference rules disagree: please report it")
    print(f"independent reference (model/reference): {ref.outcome}"
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
        for target in isolate.resolve(spec):
            kernel = target.build()
            system = compile_systems(kernel, _params_for(kernel, params))[0]
            run = random_run(system, args.seed, args.max_steps)
            print(f"{target.ref}: random schedule (seed {args.seed}), {_steps(len(run.actions))} "
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
                        "(code scanning), junit (test reports), html (timelines), github "
                        "(workflow annotations)")
    p.add_argument("-o", "--output", action="append", metavar="[FORMAT=]PATH",
                   help="write FORMAT's report to PATH beside the console report "
                        "(repeatable); a plain PATH takes the --format report instead of "
                        "the console")
    p.add_argument("--max-states", type=int, default=None, metavar="N",
                   help="default 5000000")
    p.add_argument("--max-depth", type=int, default=None, metavar="N")
    p.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="seconds per protocol (default: none)")
    p.add_argument("--build-timeout", type=float, default=None, metavar="S",
                   help="seconds for importing and building each file's code (default: "
                        f"--timeout if given, else {guard.DEFAULT_BUILD_TIMEOUT:g})")
    p.add_argument("--max-memory", type=int, default=None, metavar="MB", help="default 16000")
    p.add_argument("--no-reduction", action="store_true", help="turn every reduction off (symmetry, partial-order)")
    p.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="check protocols in N processes (default: all cores); verdicts are "
                        "reported in the same order")
    p.add_argument("--store", choices=["tuple", "exact", "fingerprint"], default=None,
                   help="explorer state store: tuple (default), exact (packed bytes), "
                        "fingerprint (64-bit, least memory; reports the collision probability)")
    p.add_argument("--search", choices=["dfs", "bfs"], default=None,
                   help="explorer order: dfs (default: depth first, a violation early, then "
                        "shortened to the shortest unless a limit stops it), bfs (breadth "
                        "first: a bounded search covers every state to its depth; the default with "
                        "--no-reduction, where the compiled core runs it)")
    p.add_argument("--core", choices=["auto", "python", "compiled"], default=None,
                   help="what runs the unreduced search: auto (default, or $BARRIERPROOF_CORE: "
                        "the compiled C core where it is built and accepts the protocol), "
                        "python, compiled (an error if it is not built); only speed differs")
    p.add_argument("--ignore", metavar="CODES", help="comma-separated codes to ignore")
    p.add_argument("--select", metavar="CODES", help="only these codes count")
    p.add_argument("--trace-dir", metavar="DIR", help="write each counterexample as JSON here")
    p.add_argument("--expect", action="store_true",
                   help="exit 0 only if every verdict matches its declared expectation")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress display; the console shows only failures and the summary")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="list the files of a directory that were not checked, and why")
    p.add_argument("--progress", action="store_true",
                   help="show progress even when stderr is not a terminal (a line every 10 s)")
    p.add_argument("--config", metavar="PYPROJECT", help="read [tool.barrierproof] from this file")
    p.add_argument("--no-config", action="store_true", help="ignore pyproject.toml")
    p.add_argument("--no-cache", action="store_true",
                   help="check everything again; neither read nor write the proof cache")
    p.add_argument("--fix", action="store_true",
                   help="for each violation, search for verified repairs (slower)")
    p.add_argument("--cache-dir", metavar="DIR",
                   help="where the proof cache lives (default: .barrierproof_cache next to the "
                        "pyproject.toml, or $BARRIERPROOF_CACHE_DIR)")
    add_ci_flags(p)


def _workers(value: str) -> int:
    from .checker.engines.mproc import workers_count
    try:
        return workers_count(value)
    except ValueError:
        raise argparse.ArgumentTypeError("a positive count or auto") from None


def _add_tlc_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", type=_workers, default=1, metavar="N",
                   help="parallel workers, a count or auto (every core): TLC worker threads "
                        "(--engine tlc); explorer processes for its unreduced breadth-first "
                        "search (--no-reduction; checker/engines/mproc.py)")
    p.add_argument("--distributed", type=int, metavar="K",
                   help="TLC's distributed mode (--engine tlc): a TLC server and K worker "
                        "processes of --workers threads each, on this machine")
    p.add_argument("--port", type=int, metavar="P",
                   help="the TCP port of the distributed TLC server (default: a free one)")
    p.add_argument("--bind", metavar="ADDRESS", default=None,
                   help="the address TLC's distributed server and workers listen on (default "
                        "127.0.0.1: Java RMI has no authentication, so another address lets "
                        "anyone who reaches it drive them)")


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
    parser.add_argument("--version", action="version", version=f"barrierproof {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("check", help="check protocols and kernels exhaustively")
    _add_check_flags(p)
    p.add_argument("--engine", choices=sorted(ENGINES), default=None,
                   help="explore (default), tlc or symbolic; default: `engine` of "
                        "[tool.barrierproof], else explore")
    _add_tlc_flags(p)
    p.add_argument("--confirm", action="store_true",
                   help="replay every Pallas counterexample in JAX's interpret mode under its "
                        "own schedule, and say whether JAX reproduces it")
    p.set_defaults(run=cmd_check)

    p = sub.add_parser("tlc", help="check with TLC on the emitted TLA+ spec "
                                   "(= check --engine tlc)")
    _add_check_flags(p)
    _add_tlc_flags(p)
    p.set_defaults(run=cmd_check, engine="tlc")

    p = sub.add_parser("prove", help="prove protocols for every value of their parameters (Z3)")
    _add_check_flags(p)
    p.add_argument("--symbolic", action="append", default=[], metavar="NAME",
                   help="a parameter to quantify over (repeatable; default: declared ones)")
    p.set_defaults(run=lambda a: cmd_check(a, "symbolic"))

    p = sub.add_parser("fix", help="suggest a verified repair of a DSL protocol as a diff")
    p.add_argument("path", metavar="PATH::NAME")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--apply", action="store_true", help="edit the file, then check it again")
    p.add_argument("--pick", type=int, default=1, metavar="N", help="which suggestion (default 1)")
    p.add_argument("--max-fixes", type=int, default=3, metavar="N")
    p.add_argument("--budget", type=float, default=30.0, metavar="S",
                   help="seconds for the repair search (default 30)")
    p.set_defaults(run=_delegate("barrierproof.fixcmd", "cmd_fix"))

    p = sub.add_parser("replay", help="re-execute a counterexample trace on the interpreter")
    p.add_argument("trace", metavar="TRACE.json",
                   help="a trace from `check --trace-dir`, or a JSON report (`--format json`)")
    p.add_argument("--max-steps", type=int, default=1_000_000, metavar="N",
                   help="refuse a schedule longer than N steps (default 1000000)")
    p.add_argument("--timeout", type=float, default=60.0, metavar="S",
                   help="seconds for building the protocol and replaying (default 60)")
    p.add_argument("--max-memory", type=int, default=4000, metavar="MB",
                   help="memory for building and replaying (default 4000)")
    p.add_argument("--protocol", metavar="PATH[::NAME]",
                   help="replay on this protocol (required: the code a trace names is never "
                        "imported); of a file's protocols, the one the trace names")
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
    p.set_defaults(run=_delegate("barrierproof.commands", "cmd_graph"))

    p = sub.add_parser("tla", help="emit TLA+ specs (and their TLC configs)")
    p.add_argument("paths", nargs="+", metavar="PATH[::NAME]")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("-o", "--output", required=True, metavar="DIR")
    p.set_defaults(run=_delegate("barrierproof.commands", "cmd_tla"))

    p = sub.add_parser("confirm", help="run a Pallas kernel in JAX's GPU interpret mode")
    p.add_argument("paths", nargs="+", metavar="PATH::NAME")
    p.add_argument("--timeout", type=float, default=20.0, metavar="S")
    p.add_argument("--runs", type=int, default=1, help="interpreter runs (schedules differ)")
    p.add_argument("--json", action="store_true", help="print the outcomes as JSON")
    p.add_argument("--races", action="store_true",
                   help="run JAX's race detector too (one schedule per run)")
    p.add_argument("--quiet-seconds", dest="quiet", type=float, default=5.0, metavar="S",
                   help="a run whose barriers make no progress for S seconds while a thread "
                        "waits is reported hung")
    p.add_argument("--schedule", metavar="TRACE.json", default=None,
                   help="force the order of a counterexample's barrier events (a trace written "
                        "by check --trace-dir, or a JSON report) on the interpreter's threads")
    p.set_defaults(run=_delegate("barrierproof.confirm", "cli_main"))
    return parser


def run() -> None:
    """The console command: main(), then an exit that no thread of a user's code holds up."""
    guard.exit_process(main())


def main(argv: Sequence[str] | None = None) -> int:
    closed = streams.reopen_closed()
    parser = build_parser()
    args = parser.parse_args(argv)
    interrupts = None
    try:
        check_args(args)
        streams.require_stdout(args, closed)
        refuse_overwriting_inputs(args, output_paths(args))
        with Interrupts() as interrupts:     # SIGTERM as Ctrl-C, for every command
            code = args.run(args)
        sys.stdout.flush()      # here, not at exit: a closed pipe must change the exit code
        return code
    except ModelError as err:
        return _fail(str(err))
    except KeyboardInterrupt:
        print(f"barrierproof: {_why(interrupts)}: stopped before a verdict", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return streams.broken_pipe(None)
    except LimitReached as stop:    # user code of a command without verdicts (run, replay)
        print(f"barrierproof: {stop.what}: stopped before a verdict", file=sys.stderr)
        return 2
    except RecursionError:
        return _fail("an expression nests too deeply (Python's recursion limit)",
                     "build deep sums in smaller steps")
    except MemoryError:
        print("barrierproof: memory ran out: stopped before a verdict", file=sys.stderr)
        return 2
    except OSError as err:      # our own reads and writes: user code's errors are ModelErrors
        output = getattr(args, "output", None)   # a failed flush names no file
        path = err.filename or (output if isinstance(output, str) else None)
        where = f"{path}: " if path else ""
        return _fail(f"{where}{err.strerror or err}", "check the path, its permissions and "
                     "the free disk space")

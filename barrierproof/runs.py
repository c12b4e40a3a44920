"""Running the targets of `check`/`prove`/`tlc`: in this process, or one target per task in a
pool of fresh worker processes, with the cache, the progress display, signals and limits; and
the verdicts that stand for a target not concluded (not checked, stopped, an engine's fault)."""

from __future__ import annotations

import argparse
import difflib
import multiprocessing.context
import os
import signal
import sys
import threading
import time
import weakref

from .checker.check import Options, error_verdict
from .checker.engine_registry import ENGINES
from .checker.verdict import Verdict
from . import guard
from .guard import GRACE_SECONDS, Interrupts, LimitReached, Watchdog
from .loader import Target
from . import isolate
from .model.ir import ModelError
from .model.interpreter import ReplayError
from .exhausted import EXHAUSTED, exhausted_verdict
from .flags import params_for as _params_for


class Progress:
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


def not_checked(target: Target, why: str) -> Verdict:
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
                engine: str, args, progress: Progress, cache=None,
                interrupts: Interrupts | None = None) -> list[Verdict]:
    jobs = getattr(args, "jobs", None) or os.cpu_count() or 1
    if jobs > 1 and len(targets) > 1:
        verdicts, used, build_failed, known, hits = _run_in_parallel(
            targets, params, options, engine, args, jobs, interrupts)
        if cache is not None:
            cache.hits += hits          # the workers' lookups, for the summary line
    else:
        verdicts, used, build_failed, known = _run_here(targets, params, options, engine, args,
                                                 progress, cache, interrupts)
    unused = sorted(set(params) - used - set(getattr(args, "config_only_params", ())))
    # A protocol that failed to build may be the one with the parameter: its error says more;
    # after an interrupt the protocols not built yet may be the ones that have it.
    interrupted = interrupts is not None and interrupts.seen
    if unused and targets and not build_failed and not interrupted:
        hint = unknown_param_hint(unused, known)
        if any(t.build_family is not None for t in targets):
            # @sizes are read by `prove`; `check` traces the function once, at its defaults
            hint += ("; sizes declared with @sizes are covered by `prove` (every size), while "
                     "`check` traces the function at its keyword defaults: change a default to "
                     "check another size (docs/prove.md)")
        elif any(t.kind == "pallas" for t in targets):
            # a Pallas function's own keyword arguments are Python, fixed when it is traced
            hint += ("; a Pallas kernel function's keyword arguments are not parameters: "
                     "change their defaults, or declare sizes with @sizes (docs/prove.md)")
        raise ModelError(f"no protocol has parameter(s) {', '.join(unused)}", hint=hint)
    return verdicts


def unknown_param_hint(unused: list[str], known: set[str]) -> str:
    """The parameters the checked protocols do have, the closest to a misspelt one first."""
    if not known:
        return "the protocols checked take no parameters: drop --param"
    close = [m for name in unused for m in difflib.get_close_matches(name, sorted(known), n=1)]
    hint = f"did you mean {', '.join(f'--param {c}=...' for c in close)}? " if close else ""
    return hint + f"the protocols' parameters: {', '.join(sorted(known))}"


def _run_in_parallel(targets: list[Target], params: dict[str, int], options: Options,
                     engine: str, args, jobs: int, interrupts: Interrupts | None = None
                     ) -> tuple[list[Verdict], set[str], bool, set[str], int]:
    """One target per task in `jobs` fresh processes (spawned: a traced JAX must not be
    forked); verdicts come back in the order of `targets`, through the same cache. Workers get
    this run's limits for user code; a Ctrl-C or SIGTERM ends them and keeps what is done."""
    import concurrent.futures
    import dataclasses
    plain = argparse.Namespace(**{k: v for k, v in vars(args).items() if not callable(v)})
    quiet = dataclasses.replace(options, progress=None)
    context = _QuietSpawn()
    results: list = [None] * len(targets)
    used: set[str] = set()
    known: set[str] = set()
    failed = False
    hits = 0
    pool = concurrent.futures.ProcessPoolExecutor(min(jobs, len(targets)), mp_context=context,
                                                  initializer=_worker_signals,
                                                  initargs=(os.getpid(),))
    futures = {}
    quiet_manager = _quiet_manager_thread()
    try:
        # Submitting starts the workers: a Ctrl-C meanwhile also winds down those started.
        for n, t in enumerate(targets):
            if t.kind == "error":     # a file that does not import: reported here
                results[n], _, _, _ = _run_here([t], params, quiet, engine, args,
                                                Progress(False))
                failed = True
            else:
                futures[n] = pool.submit(_check_one, (t.ref, t.expect, params, quiet, engine,
                                                      plain, guard.budget, t.entry))
        for n, future in futures.items():
            try:
                results[n], names, broken, theirs, found = future.result()
            except (RecursionError, MemoryError, TypeError, ValueError, AttributeError,
                    ImportError) as err:    # a result that did not come back (not picklable)
                results[n] = [_error_or_violation(targets[n], ModelError(
                    f"the worker checking {targets[n].ref} failed: {type(err).__name__}: "
                    f"{guard.safe_text(err)}", hint="run it with --jobs 1 to see more"))]
                names, broken, theirs, found = set(), True, set(), 0
            used |= names
            known |= theirs
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
        for process in {*(getattr(pool, "_processes", None) or {}).values(), *_STARTED}:
            if process.is_alive():
                process.kill()
        try:
            pool.shutdown(wait=True, cancel_futures=True)
        except RuntimeError:    # interrupted inside submit, before the pool's manager thread
            pass                # started: no thread to join, its workers were killed above
        quiet_manager()
    for n, t in enumerate(targets):
        if results[n] is None:
            results[n] = [not_checked(t, f"not checked: {interrupt_reason(interrupts)}")]
    return [v for found in results for v in found], used, failed, known, hits


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
    processes = list({*(getattr(pool, "_processes", None) or {}).values(), *_STARTED})
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


class _QuietStart(multiprocessing.context.SpawnProcess):
    """A spawned worker that starts with SIGINT blocked: a terminal's Ctrl-C while it is still
    importing stays pending (not a KeyboardInterrupt traceback in its bootstrap) until
    `_worker_signals` has its handler in place. Only the starting thread blocks it, only while
    the child is forked: a blocked signal is deferred, not lost, so this process still takes
    its own Ctrl-C at once. (Module level: the spawned child unpickles it.)

    This process's own handlers are held off too until the child has its whole task: another
    thread may take the signal while the starting one blocks it, and an interrupt raised
    between the child's exec and the write of its task leaves it reading an empty pipe (an
    EOFError traceback)."""

    def start(self):
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        with _SignalsHeld() as held:
            try:
                super().start()     # the child keeps the mask across its exec
                _STARTED.add(self)  # a Ctrl-C due now may beat the pool's own record of it
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        held.deliver()


class _SignalsHeld:
    """The run's signals only remembered inside the block; `deliver` then hands the first one
    to the handler that was in place, as if it came now. Outside the main thread (which alone
    may set handlers) nothing is held."""

    def __enter__(self) -> "_SignalsHeld":
        self.previous: dict = {}
        self.pending: list[int] = []
        if threading.current_thread() is threading.main_thread():
            for sig in Interrupts.SIGNALS:
                self.previous[sig] = signal.signal(sig, lambda s, f: self.pending.append(s))
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)

    def deliver(self) -> None:
        if not self.pending:
            return
        handler = self.previous[self.pending[0]]
        if callable(handler):
            handler(self.pending[0], sys._getframe(1))
        elif handler == signal.SIG_DFL:
            signal.raise_signal(self.pending[0])


_STARTED: "weakref.WeakSet[_QuietStart]" = weakref.WeakSet()


class _QuietSpawn(multiprocessing.context.SpawnContext):
    Process = _QuietStart


def _quiet_manager_thread():
    """Python 3.11's pool, when a worker is killed, fails a cancelled task again from its
    manager thread (InvalidStateError, printed as a traceback): that one error is dropped while
    the pool runs; the returned function puts the previous hook back."""
    import concurrent.futures
    import concurrent.futures.process as process
    previous = threading.excepthook
    manager = getattr(process, "_ExecutorManagerThread", ())   # private: absent, nothing dropped

    def hook(info):
        if not (isinstance(info.thread, manager)
                and issubclass(info.exc_type, concurrent.futures.InvalidStateError)):
            previous(info)
    threading.excepthook = hook

    def restore():
        if threading.excepthook is hook:
            threading.excepthook = previous
    return restore


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
    # Started with SIGINT blocked (`_QuietStart`): a Ctrl-C pending since is taken now.
    signals.pthread_sigmask(signals.SIG_UNBLOCK, {signals.SIGINT})


def _check_one(task) -> tuple[list[Verdict], set[str], bool, set[str], int]:
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
        return [not_checked(t, "not checked: interrupted") for t in matches], set(), False, \
            set(), 0
    with Interrupts() as interrupts:
        # A signal passed on by the parent is a real interrupt, not the user's own
        # KeyboardInterrupt: user_code tells them apart by the run's Interrupts.
        guard.current = interrupts
        try:
            found = _run_here(matches, params, options, engine, args, Progress(False), cache,
                              interrupts)
        finally:
            guard.current = None
    _WORKER_INTERRUPTED = _WORKER_INTERRUPTED or interrupts.seen
    return (*found, cache.hits if cache is not None else 0)


def _run_here(targets: list[Target], params: dict[str, int], options: Options,
              engine: str, args, progress: Progress, cache=None,
              interrupts: Interrupts | None = None
              ) -> tuple[list[Verdict], set[str], bool, set[str]]:
    """The verdicts, the --param names some kernel used, whether a build failed, and every
    parameter name of the kernels built (to name them when a --param is misspelt)."""
    verdicts = []
    chosen = ENGINES[engine]
    engine_fn = chosen.load()
    settings = chosen.make_settings(args)   # its flags, parsed by argparse, as its dataclass
    used: set[str] = set()
    known: set[str] = set()
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
            verdicts.append(not_checked(target, f"{interrupt_reason(interrupts)} before a verdict"))
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
                known |= set(kernel.params)

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
                verdict = not_checked(target, f"{interrupt_reason(interrupts)} before a verdict")
                if interrupts is not None:
                    interrupts.seen = True
            finally:
                progress.stop()
            verdicts.append(verdict)
            if interrupts is not None and interrupts.seen:
                break
        if interrupts is not None and interrupts.seen:
            verdicts += [not_checked(t, f"not checked: {interrupt_reason(interrupts)}")
                         for t in targets[n + 1:]]
            return verdicts, used, build_failed, known
    return verdicts, used, build_failed, known


def interrupt_reason(interrupts: Interrupts | None) -> str:
    return interrupts.why() if interrupts is not None else "interrupted (Ctrl-C)"

"""Run a Pallas kernel on JAX's GPU interpreter and report what the real thing did.

`barrierproof confirm kernel.py::NAME` runs NAME (a zero-argument function that calls Pallas
Mosaic GPU kernels) with `interpret=InterpretGPUParams()` forced on every kernel, in a child
process under a watchdog, and reports one of:

- `completed`: every kernel returned;
- `raised`: JAX raised, with its message (a barrier-rule violation the interpreter checks, such
  as "Barrier arrival was completed again before previous completion was observed by a thread.",
  or a tracing error such as "MMA barrier must have orders_tensor_core set to True.");
- `hung`: threads waited on barriers and no barrier made progress for a few seconds: a
  deadlock, which the interpreter cannot report itself;
- `timeout`: still running when the watchdog expired, without such a stall (a large kernel is
  slow on the interpreter): no conclusion;
- `unsupported`: the interpreter cannot run this kernel (tcgen05, ClusterBarrier, run_state, ...);
- `error`: the target could not be loaded or crashed in a way that says nothing about barriers.

The interpreter runs each Pallas thread as a real CPU thread, so one run is one schedule; a
schedule-dependent bug may need several runs (`--runs N`: the first run that raises or hangs
decides). When a rule check raises in one thread, the interpreter logs the error and the other
threads wait forever; the child therefore reports the logged exception and exits at once.

This module is also the oracle of the tests: barrierproof's verdict on each example kernel is
compared with what the interpreter did (`agrees`).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Iterable, Sequence

OUTCOMES = ("completed", "raised", "hung", "timeout", "unsupported", "error")
MARKER = "BARRIERPROOF-CONFIRM "
EXIT_CODES = {"completed": 0, "raised": 1, "hung": 1, "timeout": 2, "unsupported": 2,
              "error": 3}
DEFAULT_TIMEOUT = 20.0   # seconds for one run, jax import included
QUIET_SECONDS = 5.0      # no barrier progress for this long while a thread waits: hung


@dataclass
class Run:
    outcome: str
    message: str = ""
    seconds: float = 0.0


@dataclass
class Confirmation:
    """What the interpreter did with one target over one or more runs."""

    target: str
    outcome: str
    message: str = ""
    runs: list[Run] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.outcome]

    def one_line(self) -> str:
        n = len(self.runs)
        if n <= 1:
            tail = ""
        elif self.outcome == "completed":
            tail = f" ({n} runs)"
        else:
            tail = f" (run {self._deciding()} of {n})"
        text = f"{self.target}: {self.outcome}{tail}"
        if self.message:
            text += f": {self.message}"
        return text

    def _deciding(self) -> int:
        for k, run in enumerate(self.runs, 1):
            if run.outcome == self.outcome:
                return k
        return len(self.runs)

    def to_json(self) -> dict:
        data = asdict(self)
        data["exit_code"] = self.exit_code
        return data


# ----------------------------------------------------------------------------------------------
# Parent side
# ----------------------------------------------------------------------------------------------

def _child_command(targets: Sequence[str], quiet: float,
                   schedule: str | None = None, races: bool = False) -> tuple[list[str], dict]:
    env = dict(os.environ)
    env.setdefault("JAX_PLATFORMS", "cpu")
    env["PYTHONUNBUFFERED"] = "1"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, "-m", "barrierproof.confirm", "--quiet-seconds", str(quiet)]
    if schedule:
        cmd += ["--schedule", os.path.abspath(schedule)]
    if races:
        cmd += ["--races"]
    cmd += ["--child", *targets]
    return cmd, env


def run_batch(targets: Sequence[str], timeout: float = DEFAULT_TIMEOUT,
              quiet: float = QUIET_SECONDS, schedule: str | None = None,
              races: bool = False) -> list[tuple[str, Run]]:
    """Run targets one after another in one fresh process (JAX is imported once), until one of
    them does not complete: a raise or a hang leaves the interpreter unusable, so the child
    reports it and exits. Returns (target, Run) for the targets reached, in order; `timeout`
    bounds each target."""
    cmd, env = _child_command(targets, quiet, schedule, races)
    lines: queue.Queue = queue.Queue()
    with tempfile.TemporaryFile("w+") as errors:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errors, text=True, env=env,
                                start_new_session=True)

        def read() -> None:
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
        results: list[tuple[str, Run]] = []
        last = time.perf_counter()
        try:
            while len(results) < len(targets):
                current = targets[len(results)]
                left = timeout - (time.perf_counter() - last)
                try:
                    line = lines.get(timeout=max(0.05, left))
                except queue.Empty:
                    results.append((current, Run(
                        "timeout", f"still running after {timeout:g}s without a barrier stall",
                        time.perf_counter() - last)))
                    break
                if line is None:                     # the process ended without a verdict
                    errors.seek(0)
                    tail = errors.read().strip().splitlines()
                    last_line = tail[-1] if tail else f"exit status {proc.wait()}"
                    results.append((current, Run("error", "the interpreter process died: "
                                                 + last_line, time.perf_counter() - last)))
                    break
                if not line.startswith(MARKER):
                    continue
                data = json.loads(line[len(MARKER):])
                now = time.perf_counter()
                run = Run(data.get("outcome", "error"), data.get("message", ""), now - last)
                results.append((data.get("target") or current, run))
                last = now
                if run.outcome != "completed":
                    break
        finally:
            _kill(proc)
            proc.wait()
    return results


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)   # the child and any thread pools it started
    except (ProcessLookupError, PermissionError):
        proc.kill()


def confirm(target: str, runs: int = 1, timeout: float = DEFAULT_TIMEOUT,
            quiet: float = QUIET_SECONDS, races: bool = False) -> Confirmation:
    """Run a target up to `runs` times; the first run that raises or hangs decides.

    >>> confirm("examples/pallas/handoff.py::handoff").outcome     # doctest: +SKIP
    'completed'
    """
    return confirm_all([target], runs, timeout, jobs=1, quiet=quiet, races=races)[0]


def confirm_all(targets: Sequence[str], runs: int | dict = 1, timeout: float = DEFAULT_TIMEOUT,
                jobs: int | None = None, quiet: float = QUIET_SECONDS,
                schedule: str | None = None, races: bool = False) -> list[Confirmation]:
    """Confirm several targets (`runs` may be a per-target dict), spread over `jobs` worker
    processes; each worker runs its targets in batches (`run_batch`), restarting after every
    target that raises or hangs. With `races`, the interpreter's race detector runs too and a
    completed run's message says whether it saw a race on its one schedule."""
    targets = list(dict.fromkeys(targets))
    jobs = jobs or max(1, min(len(targets), os.cpu_count() or 1))
    done: dict[str, list[Run]] = {t: [] for t in targets}

    def wanted(t: str) -> int:
        return max(1, runs.get(t, 1) if isinstance(runs, dict) else runs)

    def worker(mine: list[str]) -> None:
        pending = [t for t in mine for _ in range(wanted(t))]
        while pending:
            reached = run_batch(pending, timeout, quiet, schedule, races)
            for target, run in reached:
                done[target].append(run)
            pending = pending[len(reached):]
            bad = {t for t, r in reached if r.outcome != "completed"}
            pending = [t for t in pending if t not in bad]

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(worker, [targets[k::jobs] for k in range(jobs)]))
    out = []
    for t in targets:
        last = done[t][-1] if done[t] else Run("error", "not run")
        out.append(Confirmation(t, last.outcome, last.message, done[t]))
    return out


# How barrierproof's verdicts and the interpreter's outcomes correspond. The interpreter is blind
# to some rules (SEMANTICS.md section 4): TMA copies land at issue, so nothing is ever in flight
# (BP105); pending arrivals at exit are not checked (BP104); a thread that never waited is not
# checked at exit. A tx-count that never returns to zero (BP130) leaves its waiters hanging.
AGREEING = {
    "verified": {"completed"},
    "proved": {"completed"},
    "violation:BP100": {"hung", "raised"},
    "violation:BP101": {"raised", "hung"},
    "violation:BP102": {"raised", "hung"},
    "violation:BP103": {"raised"},
    "violation:BP110": {"raised"},
    "error:BP110": {"raised"},          # JAX rejects it while tracing, so do we
    "violation:BP121": {"raised", "hung"},
    "violation:BP130": {"hung"},
    "error:BP120": {"raised", "hung"},
}
# Races: `confirm` runs one schedule (copies land at issue) without the interpreter's race
# detector, so a racy kernel completes there.
INTERPRETER_BLIND = {"violation:BP104", "violation:BP105", "violation:BP200", "violation:BP201"}


# The interpreter's own rule messages (jax/_src/pallas/mosaic_gpu/interpret/shared_memory.py and
# the tracer), by class, with the barrierproof codes each class can stand for. A phase overrun
# (BP101) shows in the interpreter as whichever of its rules trips first: a second completion
# before a wait (rule 1), a wait on a phase already passed (rule 3), or an unobserved phase at
# deallocation (rule 2). The interpreter does not bound-check barrier indices (BP120): a wrong
# index shows as the phases it leaves unobserved.
MESSAGE_CLASSES = (
    ("completed-twice", "completed again before previous completion was observed",
     {"BP101", "BP121"}),
    ("phase-passed", r"is awaiting phase \d+, but barrier is already at phase",
     {"BP101", "BP102"}),
    ("unobserved-at-exit", "did not observe all phases", {"BP101", "BP103", "BP120"}),
    ("tensor-core-order", r"orders[_ ]tensor[_ ]core", {"BP110"}),
    ("unsupported-barrier", "Unsupported barrier type", {"BP111"}),
)


def message_class(message: str) -> tuple[str, set[str]]:
    """(class, codes it can stand for) of an interpreter error message; ("unrecognized", set())
    for any other exception, which agrees with no verdict."""
    import re
    for name, pattern, codes in MESSAGE_CLASSES:
        if re.search(pattern, message):
            return name, codes
    return "unrecognized", set()


def agrees(verdict_label: str, outcome: str, message: str | None = None) -> bool:
    """Does a barrierproof verdict (`verified`, `violation:BP101`, ...) agree with what the
    interpreter did? Verdicts on rules the interpreter cannot see agree with `completed`. With
    the interpreter's `message`, a raise agrees only if its class can stand for the code."""
    if outcome in ("unsupported", "error", "timeout"):
        return False
    if verdict_label in INTERPRETER_BLIND:
        return outcome == "completed"
    if outcome not in AGREEING.get(verdict_label, set()):
        return False
    if outcome == "raised" and message is not None:
        return verdict_label.partition(":")[2] in message_class(message)[1]
    if outcome == "hung" and message is not None:
        return "blocked in JAX's Barrier.wait" in message   # its own threads sit in its waits
    return True


# ----------------------------------------------------------------------------------------------
# Child side: runs inside the fresh process
# ----------------------------------------------------------------------------------------------

_report_lock = threading.Lock()
_current = {"target": ""}


def _report(outcome: str, message: str = "", final: bool = True) -> None:
    """Print the result of the current target; unless it completed, leave at once: other
    interpreter threads may be stuck forever."""
    with _report_lock:
        sys.stdout.write(MARKER + json.dumps({"target": _current["target"], "outcome": outcome,
                                              "message": message}) + "\n")
        sys.stdout.flush()
        if final:
            sys.stderr.flush()
            os._exit(0)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


def _classify(exc: BaseException) -> str:
    """NotImplementedError is the interpreter's "cannot run this"; anything else it raises
    (ValueError from its barrier checks, "Unsupported barrier type" for a TMA arrival on a
    cluster barrier, a tracing error) is its verdict on the kernel."""
    return "unsupported" if isinstance(exc, NotImplementedError) else "raised"


class _CallbackErrors:
    """The interpreter's checks raise inside io_callbacks, which JAX logs before the process
    hangs: catch the log record and report it."""

    def __init__(self):
        import logging

        class Handler(logging.Handler):
            def emit(self, record):
                exc = record.exc_info[1] if record.exc_info else None
                if exc is not None:
                    _report(_classify(exc), _first_line(exc))

        self.handler = Handler(level=logging.ERROR)
        logging.getLogger("jax._src.callback").addHandler(self.handler)


class _Progress:
    """Counts barrier arrivals and completed waits in the interpreter; a watchdog thread reports
    `hung` when none happen for `quiet` seconds while some thread is blocked in a wait."""

    def __init__(self, quiet: float):
        from jax._src.pallas.mosaic_gpu.interpret import shared_memory

        self.events = 0
        self.waiting = 0
        self.quiet = quiet
        self.turnstile = None
        barrier = shared_memory.Barrier
        arrive, wait = barrier.arrive, barrier.wait
        progress = self

        def counted_arrive(self_, *args, **kwargs):
            progress.events += 1
            return arrive(self_, *args, **kwargs)

        def counted_wait(self_, *args, **kwargs):
            progress.waiting += 1
            try:
                return wait(self_, *args, **kwargs)
            finally:
                progress.waiting -= 1
                progress.events += 1

        barrier.arrive = counted_arrive
        barrier.wait = counted_wait
        if quiet > 0:
            threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        last, since = self.events, time.monotonic()
        while True:
            time.sleep(0.1)
            if self.events != last or self.waiting == 0:
                last, since = self.events, time.monotonic()
            elif time.monotonic() - since >= self.quiet:
                where = blocked_in_wait()
                if self.turnstile is not None:
                    where += "; " + self.turnstile.status()
                _report("hung", f"{where}; no barrier progress for {self.quiet:g}s (deadlock)")


def schedule_of(trace: dict) -> list[tuple[int, str]]:
    """The order of synchronization events a barrierproof trace forces on JAX's interpreter:
    (Pallas thread index, "arrive" or "wait") per thread step. A TMA copy arrives in the
    interpreter when it is issued (copies land at issue there), so the issue step stands for
    its arrival and the model's separate landing steps have no counterpart."""
    if "steps" not in trace and isinstance(trace.get("trace"), dict):
        trace = trace["trace"]                     # one object of a JSON report
    # The interpreter numbers the threads of a cluster flatly, block after block.
    blocks: dict[str, int] = {}
    per_block: dict[str, int] = {}
    for agent in trace.get("agents", []):
        block = agent.split(".")[0] if re.match(r"b[\d,]+\.", agent) else ""
        if "." not in agent[len(block) + 1 if block else 0:]:      # warps are not threads
            blocks.setdefault(block, len(blocks))
            per_block[block] = per_block.get(block, 0) + 1
    events = []
    for step in trace["steps"]:
        if step["agent_kind"] != "thread":
            continue
        text = step["text"]
        kind = "wait" if text.startswith("barrier_wait(") else \
            "arrive" if text.startswith(("barrier_arrive(", "copy_gmem_to_smem(")) else None
        if kind is None:
            continue
        match = re.fullmatch(r"(?:(b[\d,]+)\.)?[A-Za-z_]+(\d+)", step["agent"])
        if match is None:
            raise ValueError(f"agent {step['agent']!r} is not a Pallas thread")
        block, thread = match.group(1) or "", int(match.group(2))
        events.append((blocks.get(block, 0) * per_block.get(block, 0) + thread, kind))
    return events


class _Turnstile:
    """Lets JAX's interpreter threads through Barrier.arrive / Barrier.wait only in the
    schedule's order; once the schedule is used up every call goes through freely. A call that
    is not the next one waits its turn (and counts as waiting, for the hang watchdog)."""

    def __init__(self, schedule: list[tuple[int, str]], progress: "_Progress",
                 grid: tuple[int, ...] = ()):
        from jax._src.pallas.mosaic_gpu.interpret import shared_memory
        self.schedule = schedule
        self.grid = tuple(grid)
        self.pos = 0
        self.cv = threading.Condition()
        self.progress = progress
        progress.turnstile = self
        barrier = shared_memory.Barrier
        arrive, wait = barrier.arrive, barrier.wait
        gate = self

        def gated_arrive(self_, *args, **kwargs):
            info = kwargs.get("logging_info")
            if not gate.ours(info):
                return arrive(self_, *args, **kwargs)
            with gate.turn(getattr(info, "thread_id", None), "arrive"):
                return arrive(self_, *args, **kwargs)

        def gated_wait(self_, device_id, local_thread_id, *args, **kwargs):
            if not gate.ours(kwargs.get("logging_info")):
                return wait(self_, device_id, local_thread_id, *args, **kwargs)
            with gate.turn(local_thread_id, "wait"):
                return wait(self_, device_id, local_thread_id, *args, **kwargs)

        barrier.arrive = gated_arrive
        barrier.wait = gated_wait

    def ours(self, info) -> bool:
        """Is the call from the trace's grid position? (Other blocks run freely.)"""
        coords = tuple(getattr(info, "grid_point_coords", None) or ())
        return not self.grid or not coords or coords == self.grid

    def status(self) -> str:
        if self.pos >= len(self.schedule):
            return f"the forced schedule ({len(self.schedule)} events) was played to its end"
        thread, kind = self.schedule[self.pos]
        return (f"the forced schedule stopped at event {self.pos + 1} of "
                f"{len(self.schedule)} (thread {thread} {kind})")

    def turn(self, thread, kind):
        gate = self

        class Turn:
            def __enter__(self_):
                with gate.cv:
                    gated = False
                    while gate.pos < len(gate.schedule) and \
                            gate.schedule[gate.pos] != (thread, kind):
                        if not gated:
                            gate.progress.waiting += 1
                            gated = True
                        gate.cv.wait(0.05)
                    if gated:
                        gate.progress.waiting -= 1
                    self_.counted = gate.pos < len(gate.schedule)

            def __exit__(self_, *exc):
                if self_.counted:
                    with gate.cv:
                        gate.pos += 1
                        gate.cv.notify_all()
                return False

        return Turn()


def blocked_in_wait() -> str:
    """Where the interpreter's threads are, from their Python stacks: how many sit in JAX's
    `Barrier.wait` and on which line of it (its condition-variable wait)."""
    from jax._src.pallas.mosaic_gpu.interpret import shared_memory
    wait_file = os.path.abspath(shared_memory.__file__)
    places = []
    for frame in sys._current_frames().values():
        while frame is not None:
            code = frame.f_code
            if code.co_name == "wait" and os.path.abspath(code.co_filename) == wait_file:
                places.append(f"Barrier.wait (shared_memory.py:{frame.f_lineno})")
                break
            frame = frame.f_back
    if not places:
        return "no thread is in Barrier.wait"
    return f"{len(places)} thread(s) blocked in JAX's " + ", ".join(sorted(set(places)))


def _child(targets: Sequence[str], quiet: float, schedule: str | None = None,
           races: bool = False) -> None:
    try:
        import jax
        from jax._src.pallas.mosaic_gpu.interpret.params import (InterpretGPUParams,
                                                                  force_gpu_interpret_mode)
        from barrierproof.model import pallas
    except Exception as exc:  # pragma: no cover - environment problem
        _report("error", f"cannot import jax: {_first_line(exc)}")
        return
    _CallbackErrors()
    progress = _Progress(quiet)
    if schedule:
        try:
            with open(schedule) as f:
                data = json.load(f)
            if isinstance(data, list):          # a JSON report: its first trace
                data = next(item["trace"] for item in data if item.get("trace"))
            grid = tuple((data.get("grid_position") or {}).values())
            _Turnstile(schedule_of(data), progress, grid)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            _report("error", f"{schedule}: not a barrierproof trace ({exc})")
            return
    for target in targets:
        _current["target"] = target
        path, _, name = target.partition("::")
        try:
            module = pallas.import_file(path)
            fn = getattr(module, name, None)
            from barrierproof.model.dsl import Protocol
            if isinstance(fn, Protocol):
                _report("error", f"{path}::{name} is a DSL protocol, not a Pallas kernel: "
                        "confirm runs kernels in JAX's interpret mode; check or prove a "
                        "protocol instead", final=False)
                continue
            if fn is None or not callable(fn):
                _report("error", f"{path} has no function {name}", final=False)
                continue
            facts = pallas.device_facts_of(fn)
        except Exception as exc:
            _report("error", str(exc), final=False)
            continue
        try:
            params = InterpretGPUParams(detect_races=True) if races else InterpretGPUParams()
            with pallas.device_facts(**facts), force_gpu_interpret_mode(params):
                out = fn()
                jax.block_until_ready(out)
        except Exception as exc:
            _report(_classify(exc), _first_line(exc))
            return
        _report("completed", _race_report() if races else "", final=False)
    sys.stdout.flush()
    os._exit(0)


def _race_report() -> str:
    """What JAX's race detector (vector clocks over the one schedule that ran) saw."""
    try:
        from jax._src.pallas.mosaic_gpu.interpret import interpret_pallas_call
        found = interpret_pallas_call.get_races().races_found
    except Exception as exc:  # pragma: no cover - depends on the JAX version
        return f"race detector unavailable: {_first_line(exc)}"
    return ("the interpreter's race detector found a race on this schedule" if found
            else "the interpreter's race detector found no race on this schedule")


# ----------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------

def cli_main(args) -> int:
    """`barrierproof confirm PATH::NAME... [--timeout S] [--runs N] [--json]`."""
    targets: list[str] = []
    for spec in args.paths:
        if "::" in spec:
            targets.append(spec)
            continue
        from .model import pallas
        try:
            module = pallas.import_file(spec)
        except Exception as exc:
            print(f"barrierproof: error: {exc}", file=sys.stderr)
            return 3
        names = list(pallas.targets(module))
        if not names:
            print(f"barrierproof: error: {spec} declares no Pallas kernels (EXPECT = {{...}})",
                  file=sys.stderr)
            return 3
        targets += [f"{spec}::{n}" for n in names]
    timeout = getattr(args, "timeout", DEFAULT_TIMEOUT)
    runs = getattr(args, "runs", 1)
    quiet = getattr(args, "quiet", None) or QUIET_SECONDS
    schedule = getattr(args, "schedule", None)
    if schedule and len(targets) != 1:
        print("barrierproof: error: --schedule replays one trace: give one PATH::NAME",
              file=sys.stderr)
        return 3
    results = confirm_all(targets, runs, timeout, quiet=quiet, schedule=schedule,
                          races=getattr(args, "races", False))
    if getattr(args, "json", False):
        print(json.dumps([r.to_json() for r in results], indent=2))
    else:
        for r in results:
            print(r.one_line())
    return max((r.exit_code for r in results), default=0)


def _main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m barrierproof.confirm")
    parser.add_argument("--child", nargs="+", metavar="PATH::NAME", help=argparse.SUPPRESS)
    parser.add_argument("paths", nargs="*", metavar="PATH::NAME")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--schedule", metavar="TRACE.json", default=None)
    parser.add_argument("--races", action="store_true")
    parser.add_argument("--quiet-seconds", dest="quiet", type=float, default=QUIET_SECONDS,
                        help="report a hang after this long without barrier progress")
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.child:
        _child(args.child, args.quiet, args.schedule, args.races)
        return 3   # not reached: _child always reports and exits
    if not args.paths:
        parser.error("give PATH::NAME")
    return cli_main(args)


if __name__ == "__main__":
    raise SystemExit(_main())

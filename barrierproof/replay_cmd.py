"""`barrierproof replay` (a counterexample trace re-executed on the interpreter, on a protocol
the user names) and `barrierproof run` (one random schedule)."""

from __future__ import annotations

import json
import sys

from .checker.report.text import timeline
from . import guard
from .guard import LimitReached
from .loader import Target
from . import isolate
from .model.ir import ModelError
from .model.interpreter import ReplayError
from .flags import fail as _fail, params_for as _params_for, parse_params


def _steps(n: int) -> str:
    return f"{n} step" if n == 1 else f"{n} steps"


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
    except ModelError as err:       # the trace's parameters: its own hint says what to change
        where = f"{err.loc}: " if err.loc else ""
        return _fail(f"{args.trace}: its parameters {printable(str(trace.params))} do not build "
                     f"{shown}: {where}{printable(err.message)}", err.hint)
    # An action number the protocol does not have: the trace was edited or is another's.
    for i, action in enumerate(trace.actions + (trace.witness_actions or [])):
        if not 0 <= action < system.n_actions:
            return _fail(f"{args.trace}: action {action} is none of the {system.n_actions} "
                         f"actions of {shown}", "replay the trace on the protocol that wrote it")
    try:
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

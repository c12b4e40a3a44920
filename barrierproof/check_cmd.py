"""`barrierproof check` (and `prove`, `tlc`): the targets of every path collected, run
(runs.py), suppressed findings checked again, repairs attached, confirmed in JAX if asked; then
the traces, the reports and the exit code."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Sequence

from .checker.check import Options
from .checker.engine_registry import ENGINES
from .checker.engines.explore import Limits
from .checker.report.views import trace_stem
from .checker.verdict import EXIT_CODES, Verdict
from .config import apply_config
from . import guard
from .guard import Interrupts, LimitReached
from .loader import Target
from .outputs import exit_status, output_paths, write_reports
from . import isolate, suppress
from .model.ir import ModelError
from .validate import check_args, check_codes, writable_dir
from . import streams
from .safe_write import refuse_overwriting_inputs, write_into_dir
from .flags import fail as _fail, params_for as _params_for, parse_params
from .runs import Progress, not_checked, run_targets


def parse_codes(text: str | None, flag: str = "--select/--ignore") -> frozenset[str]:
    """Codes of --select/--ignore; an unknown one is an input error, never a silent pass."""
    return check_codes(text, flag)


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
    progress = Progress((sys.stderr.isatty() or args.progress) and not args.quiet,
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
            return [], [not_checked(t, f"not checked: {interrupts.why()}")
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

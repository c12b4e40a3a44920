"""`barrierproof fix PATH::NAME [--apply]`: the best verified repair of a protocol as a patch.

The patch (a git-style diff) goes to stdout, everything else to stderr, so `barrierproof fix
f.py::p > fix.diff && git apply fix.diff` works. `--apply` edits the file and checks the protocol
again from the edited source: the exit code is that check's (0 when the repair holds).
"""

from __future__ import annotations

import os
import sys
import tempfile

from .checker.check import Options, check_kernel
from .checker.repair import repairable, suggest_fixes
from .checker.repair.source import SourceEdit, apply_edits
from .isolate import resolve
from .loader import forget_file
from .model.ir import Kernel, ModelError


def rebuild_with(kernel: Kernel):
    """For the repair search: build `kernel`'s protocol from a patched copy of its source (in a
    temporary directory, the file itself untouched), so a patch is offered only if it makes
    exactly the repair that was verified."""
    def rebuild(edits: list[SourceEdit]) -> Kernel | None:
        file = os.path.abspath(kernel.loc.file)
        if kernel.source != "dsl" or any(os.path.abspath(e.file) != file for e in edits):
            return None
        with open(file) as f:
            lines = f.read().splitlines(keepends=True)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, os.path.basename(file))
            with open(path, "w") as f:
                f.write("".join(apply_edits(lines, edits)))
            sys.path.insert(0, os.path.dirname(file))    # its own imports still resolve
            try:
                for name in dict.fromkeys([kernel.name, kernel.loc.function]):
                    try:
                        found = resolve(f"{path}::{name}")
                    except ModelError:
                        continue
                    if len(found) == 1:
                        return found[0].build()
                return None
            finally:
                sys.path.remove(os.path.dirname(file))
                forget_file(path)
    return rebuild


def _say(text: str) -> None:
    print(text, file=sys.stderr)


def _one_target(spec: str):
    targets = resolve(spec)
    if len(targets) != 1:
        names = ", ".join(t.ref for t in targets[:5]) or "none"
        raise ModelError(f"`fix` repairs one protocol; {spec} names {len(targets)} ({names})",
                         hint="name one: PATH::NAME")
    return targets[0]


def cmd_fix(args) -> int:
    from .flags import parse_params
    params = parse_params(args.param)
    target = _one_target(args.path)
    if target.kind != "dsl":
        raise ModelError(f"{target.ref} is a {target.kind} kernel: `fix` edits DSL protocols only",
                         hint="`barrierproof check --fix` describes repairs of Pallas kernels")
    kernel = target.build()
    params = {k: v for k, v in params.items() if k in kernel.params}
    verdict = check_kernel(kernel, params, Options(), target.ref)
    if not repairable(verdict):
        _say(f"{target.ref}: {verdict.label}: nothing to fix")
        return verdict.exit_code
    _say(f"{target.ref}: {verdict.label} at {verdict.diagnostics[0].location}: "
         f"{verdict.diagnostics[0].message}")
    repair = suggest_fixes(kernel, params, Options(), verdict, max_fixes=args.max_fixes,
                           budget=args.budget, rebuild=rebuild_with(kernel))
    if not repair.fixes:
        _say(f"no fix suggested: {repair.reason} ({repair.seconds:.1f}s)")
        return 1
    for n, fix in enumerate(repair.fixes, 1):
        _say(f"fix {n} ({fix.verdict} after the edit): {fix.description}  [{fix.location}]")
    if args.pick > len(repair.fixes):
        raise ModelError(f"--pick {args.pick}: there {'is' if len(repair.fixes) == 1 else 'are'} "
                         f"only {len(repair.fixes)} suggestion(s)",
                         hint=f"pick one of 1..{len(repair.fixes)}")
    pick = args.pick - 1
    fix, cand = repair.fixes[pick], repair.chosen[pick]
    if not cand.source:
        _say(f"fix {pick + 1} has no exact source form; edit by hand at {fix.location}: "
             f"{fix.edit['text']}")
        return 3 if args.apply else 0
    sys.stdout.write(fix.patch or "")
    if not args.apply:
        return 0
    _write(cand.source)
    forget_file(target.path)
    again = _one_target(target.ref).build()
    after = check_kernel(again, params, Options(), target.ref)
    _say(f"applied fix {pick + 1} to {target.path}; checked again: {after.label}"
         + (f" ({after.coverage})" if after.coverage else ""))
    return after.exit_code


def _write(edits: list[SourceEdit]) -> None:
    for path in sorted({e.file for e in edits}):
        with open(path) as f:
            lines = f.read().splitlines(keepends=True)
        with open(path, "w") as f:
            f.write("".join(apply_edits(lines, [e for e in edits if e.file == path])))

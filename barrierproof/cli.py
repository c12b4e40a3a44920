"""The command line: `barrierproof check|prove|replay|tla|confirm ...`.

Exit codes: 0 verified/proved, 1 violation, 2 bounded/unknown, 3 input error.

This module is the parser (one per command, the flags they share) and `main`, which turns
every error into its exit code. The commands it runs: check_cmd.py (`check`, `prove`, `tlc`,
over runs.py's run loop: this process or a pool of workers, with the cache, signals and
limits), replay_cmd.py (`replay`, `run`) and, imported when asked for, commands.py, fixcmd.py
and confirm.py; engines and reporters live in checker/engine_registry.py and outputs.py.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Callable, Sequence

from . import __version__
from .checker.engine_registry import ENGINES
from . import guard
from .guard import Interrupts, LimitReached
from .outputs import REPORTERS, add_flags as add_ci_flags, output_paths
from .model.ir import ModelError
from .validate import check_args
from . import streams
from .safe_write import refuse_overwriting_inputs
from .flags import fail as _fail
from .check_cmd import cmd_check
from .replay_cmd import cmd_replay, cmd_run
from .runs import interrupt_reason


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
                   help="what runs a breadth-first search: auto (default, or $BARRIERPROOF_CORE: "
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
        print(f"barrierproof: {interrupt_reason(interrupts)}: stopped before a verdict", file=sys.stderr)
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

"""User code in a child process: the command's verdicts are computed where no user code ran.

A protocol file is a Python program, and what it does at import or build time could otherwise
decide the gate: `os._exit(0)`, an `atexit` hook, a rebound `barrierproof` function or
`Verdict`, a signal handler or mask, a fork that holds the report's pipe. So the CLI imports
and builds each file in a forked child (`run`): the child sends back plain data only (the
kernels' IR, the targets' names, the errors' messages), read by an unpickler that accepts the
IR's own classes and nothing else, and the engines run in the parent on that data.

The child is its own process group; its stdout and stderr go through a pipe the parent copies
to its stderr while it waits, so nothing the child leaves behind holds the report's output. The
parent holds the limits: the child's time (the build timeout per piece of user code, plus the
watchdog's last resort) and the resident memory of its process group (`--max-memory`); past
either, the group is killed and the file's targets are `bounded`. A child that ends without a
result (it exited, crashed or was killed) makes its file an input error."""

from __future__ import annotations

import io
import os
import pickle
import select
import signal
import struct
import sys
import time
from pathlib import Path
from typing import Callable

from . import guard
from .guard import LimitReached
from .model import ir
from .model.ir import Kernel, Loc, ModelError

# Seconds past a region's build limit before the parent kills the child: the child's own
# watchdog stops the user's code first and reports the limit with its message.
SLACK = guard.Watchdog.LAST_RESORT + 5.0
# How often the parent measures the child's memory.
POLL = 0.1
_HEARTBEAT = b"H"
_RESULT = b"R"


class _IrUnpickler(pickle.Unpickler):
    """Plain data and the IR's classes only: a child cannot make the parent run code."""

    def find_class(self, module: str, name: str):
        if module == ir.__name__:
            obj = getattr(ir, name, None)
            if isinstance(obj, type) and obj.__module__ == ir.__name__:
                return obj
        raise pickle.UnpicklingError(f"{module}.{name} is not plain data")


def plain(data: bytes):
    return _IrUnpickler(io.BytesIO(data)).load()


# -- errors as data ----------------------------------------------------------------------------

def error_data(err: BaseException) -> tuple:
    """An error of the user's code, as data the parent can raise again."""
    if isinstance(err, ModelError):
        loc = err.loc if isinstance(err.loc, Loc) else None
        return ("model", str(err.message), loc, err.hint if isinstance(err.hint, str) else None,
                err.code if isinstance(err.code, str) else None)
    if isinstance(err, LimitReached):
        return ("limit", str(err.what))
    if isinstance(err, (RecursionError, MemoryError)):
        return ("exhausted", type(err).__name__, guard.safe_text(err))
    return ("model", f"{type(err).__name__}: {guard.safe_text(err)}", None, None, None)


def error_of(data: tuple) -> BaseException:
    kind = data[0]
    if kind == "limit":
        return LimitReached(data[1])
    if kind == "exhausted":
        return (RecursionError if data[1] == "RecursionError" else MemoryError)(data[2])
    _, message, loc, hint, code = data
    return ModelError(message, loc=loc, hint=hint, code=code)


# -- the child ---------------------------------------------------------------------------------

def _child(work: Callable[[], object], result_fd: int, output_fd: int) -> None:
    """Runs in the forked child: never returns."""
    code = 0
    try:
        os.setpgid(0, 0)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1) + \
                ((signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ()):
            signal.signal(sig, signal.SIG_DFL)
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        os.close(output_fd)
        # What the user's code prints reaches the pipe even where sys.stdout was not fd 1 (a
        # test's capture), unbuffered: the child ends with os._exit, which flushes nothing.
        sys.stdout, sys.stderr = (io.TextIOWrapper(io.FileIO(fd, "w", closefd=False),
                                                   encoding="utf-8", errors="backslashreplace",
                                                   write_through=True) for fd in (1, 2))
        # No other descriptor of the parent's (a worker pool's pipes, the report's file) is
        # left to the user's code and what it forks.
        os.closerange(3, result_fd)
        os.closerange(result_fd + 1, _max_fd())
        guard.current = None
        depth = sys.getrecursionlimit()

        def beat(doing: str) -> None:
            _send(result_fd, _HEARTBEAT, doing.encode("utf-8", "replace")[:500])

        def last_words(what: str) -> None:    # the watchdog's last resort: still a limit
            _send(result_fd, _RESULT, pickle.dumps(("error", ("limit", what))))
        guard.on_user_code, guard.on_last_resort = beat, last_words
        try:
            payload = ("ok", work())
        except BaseException as err:     # the user's code, or what it did to ours
            payload = ("error", error_data(err))
        sys.setrecursionlimit(max(depth, sys.getrecursionlimit()))   # the user's is not ours
        try:
            data = pickle.dumps(payload, protocol=5)
        except BaseException as err:
            data = pickle.dumps(("error", ("model", "the built model cannot be sent back: "
                                           f"{type(err).__name__}: {guard.safe_text(err)}",
                                           None, None, None)))
        _send(result_fd, _RESULT, data)
    except BaseException:
        code = 70
    finally:
        os._exit(code)


def _max_fd() -> int:
    try:
        return min(os.sysconf("SC_OPEN_MAX"), 1 << 16)
    except (OSError, ValueError):
        return 1024


def _send(fd: int, kind: bytes, data: bytes) -> None:
    message = kind + struct.pack("!Q", len(data)) + data
    while message:
        message = message[os.write(fd, message):]


# -- the parent --------------------------------------------------------------------------------

def _group_rss_mb(pgid: int) -> float:
    """Resident memory of every process of the child's group (its forks included)."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        pids = [str(pgid)]
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
            if int(fields[2]) != pgid:      # field 5 (pgrp), after state and ppid
                continue
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * page
        except (OSError, ValueError, IndexError):
            continue
    return total / 2 ** 20


def _kill(pid: int) -> None:
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except OSError:
            pass


def _relay(data: bytes) -> None:
    try:
        sys.stderr.write(data.decode("utf-8", "replace"))
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def run(work: Callable[[], object], doing: str, path: str):
    """`work()` in a forked child, its result returned as plain data; an error of the user's
    code is raised again here (ModelError, LimitReached, RecursionError, MemoryError)."""
    if not hasattr(os, "fork"):     # no fork (Windows): the walls of guard.py only
        return work()
    seconds, max_memory = guard.budget
    memory_cap = None if max_memory is None else max_memory * 1.25
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    result_r, result_w = os.pipe()
    output_r, output_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(result_r)
        os.close(output_r)
        _child(work, result_w, output_w)
    os.close(result_w)
    os.close(output_w)
    try:
        os.setpgid(pid, pid)       # also here: no race with a kill before the child's own call
    except OSError:
        pass
    buffer = b""
    result = None
    stop: BaseException | None = None
    limit = (seconds or guard.DEFAULT_BUILD_TIMEOUT) + SLACK
    deadline = time.monotonic() + limit
    next_poll = 0.0
    status = None
    open_fds = [result_r, output_r]
    try:
        while result is None:
            exited = status is not None
            # Once the child is gone, what it wrote is drained without waiting (a fork it left
            # may hold the pipes open forever).
            ready, _, _ = select.select(open_fds, [], [], 0 if exited else POLL)
            for fd in ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    open_fds.remove(fd)
                elif fd == output_r:
                    _relay(chunk)
                else:
                    buffer += chunk
            while result is None and len(buffer) >= 9:
                size = struct.unpack("!Q", buffer[1:9])[0]
                if len(buffer) < 9 + size:
                    break
                kind, body, buffer = buffer[:1], buffer[9:9 + size], buffer[9 + size:]
                if kind == _HEARTBEAT:      # a new piece of user code: its own time limit
                    deadline = time.monotonic() + limit
                    doing = body.decode("utf-8", "replace") or doing
                elif kind == _RESULT:
                    result = body
                else:
                    buffer = b""
            if result is not None or (exited and (result_r not in ready or
                                                  result_r not in open_fds)):
                break       # the result, or the child is gone and nothing more is coming
            if not exited:
                done, status_now = os.waitpid(pid, os.WNOHANG)
                if done:
                    status = status_now
            now = time.monotonic()
            if now > deadline:
                stop = LimitReached(f"time limit {seconds or guard.DEFAULT_BUILD_TIMEOUT:g}s "
                                    f"reached while {doing} (its process did not stop)")
                break
            if memory_cap is not None and now >= next_poll:
                next_poll = now + 0.25
                if _group_rss_mb(pid) > memory_cap:
                    stop = LimitReached(f"memory limit {max_memory:g} MB reached while {doing}")
                    break
    finally:
        _kill(pid)          # its forks in the group too; a child that sent its result is done
        if status is None:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        for fd in (result_r, output_r):
            try:
                os.close(fd)
            except OSError:
                pass
    if stop is not None:
        raise stop
    if result is None:
        how = _ended(status)
        raise ModelError(f"the process importing and building {os.path.basename(path)} ended "
                         f"({how}) without a result while {doing}", loc=Loc(path, 1),
                         hint="a protocol file must not end its process (os._exit, a signal, a "
                              "crash in native code); run it with python to see why")
    try:
        state, value = plain(result)
    except Exception as err:
        raise ModelError(f"the process building {os.path.basename(path)} sent back something "
                         f"other than a model ({guard.safe_text(err)})", loc=Loc(path, 1),
                         hint="a protocol file must not write to barrierproof's pipes") from None
    if state == "error":
        raise error_of(value)
    return value


def _ended(status: int | None) -> str:
    if status is None:
        return "its status is unknown"
    if os.WIFSIGNALED(status):
        try:
            return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
        except ValueError:
            return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.WEXITSTATUS(status)}"


# -- targets built in a child ------------------------------------------------------------------

def _describe(spec: str, build: bool, family: bool) -> list[dict]:
    """In the child: the targets of one file (or file::NAME) as data, built when asked."""
    from .loader import resolve
    out = []
    targets = resolve(spec)
    constants = _constants(spec.partition("::")[0])
    for t in targets:
        entry = {"ref": t.ref, "name": t.name, "kind": t.kind, "expect": t.expect,
                 "path": t.path, "ignore": sorted(t.ignore),
                 "family": t.build_family is not None, "constants": constants}
        if build:
            entry["built"] = _build(t, family and t.build_family is not None)
        out.append(entry)
    return out


def _constants(path: str) -> dict[str, int]:
    """The module-level integer constants of the file's module (a repair spells its counts
    with them: checker/repair/spelling.py)."""
    from .checker.repair.spelling import module_constants
    want = os.path.realpath(path)
    for module in list(sys.modules.values()):
        if os.path.realpath(getattr(module, "__file__", None) or "") == want:
            return module_constants(vars(module))
    return {}


def _build(t, family: bool) -> tuple:
    try:
        kernels = [t.build_family()] if family else t.build_all()
    except BaseException as err:     # the user's code: an error of this target only
        return ("error", error_data(err))
    if not all(isinstance(k, Kernel) for k in kernels):
        return ("error", ("model", f"{t.ref} built something other than kernels", None, None,
                          None))
    try:    # a model too deep to send is this target's error, not its file's
        pickle.dumps(kernels, protocol=5)
    except RecursionError as err:
        return ("error", error_data(err))
    return ("ok", family, kernels)


def _one(ref: str):
    from .loader import resolve
    found = [t for t in resolve(ref.partition("#")[0]) if t.ref == ref] or resolve(ref)
    return found[0]


def _target(entry: dict, family: bool):
    """A Target of the parent: its builds are the child's kernels, or another child's."""
    from .loader import Target
    ref, path, name = entry["ref"], entry["path"], entry["name"]
    built = entry.get("built")
    if entry.get("constants"):
        from .checker.repair.spelling import remember_constants
        remember_constants(path, entry["constants"])
    cache: dict[bool, list[Kernel]] = {}
    if built is not None and built[0] == "ok":
        cache[built[1]] = built[2]

    def kernels(as_family: bool) -> list[Kernel]:
        if built is not None and built[0] == "error":
            raise error_of(built[1])
        if as_family not in cache:
            _preload(path)
            cache[as_family] = run(lambda: _built_or_raise(ref, as_family), f"building {name}",
                                   path)
        return list(cache[as_family])

    def retrace(values):
        _preload(path)
        return run(lambda: _one(ref).retrace(values), f"tracing {name} again", path)

    def replay_family(verdict, options):
        from .family import judge_member
        return judge_member(verdict, name, retrace(verdict.params), options)
    t = Target(ref, name, entry["kind"], lambda: kernels(False)[0], entry["expect"], path,
               lambda: kernels(False), ignore=frozenset(entry["ignore"]), entry=entry)
    if entry["family"]:
        t.build_family = lambda: kernels(True)[0]
        t.replay_family, t.retrace = replay_family, retrace
    return t


def target_of(entry: dict, family: bool):
    """A target sent as data (`Target.entry`) made a Target again, in a pool's worker: what the
    child built is used as it is; anything else is built in a child of the worker's."""
    return _target(entry, family)


def _built_or_raise(ref: str, family: bool) -> list[Kernel]:
    t = _one(ref)
    built = _build(t, family and t.build_family is not None)
    if built[0] == "error":
        raise error_of(built[1])
    return built[2]


def _preload(path: str) -> None:
    """Import here, before forking, the frameworks a file imports (jax, triton, cutlass: none
    starts a thread at import): each child then starts with them loaded instead of importing
    them again. Libraries only, never the user's code; one that fails is the child's to
    report."""
    import ast
    import importlib
    from .loader import FRONTENDS
    try:
        tree = ast.parse(Path(path).read_bytes())
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return
    names = {a.name.partition(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
             for a in n.names}
    names |= {(n.module or "").partition(".")[0] for n in ast.walk(tree)
              if isinstance(n, ast.ImportFrom) and not n.level}
    for frontend in FRONTENDS:
        if names & set(frontend.frameworks):
            for module in (*frontend.frameworks, f"{__package__}.model.{frontend.name}"):
                try:
                    importlib.import_module(module)
                except Exception:
                    pass


def resolve(spec: str, skipped: list[tuple[str, str]] | None = None,
            exclude=(), build: bool = True, family: bool = False) -> list:
    """loader.resolve with every import and build of user code in a child: the targets of one
    argument, built at once (`build`, the family IR where `family`) or on first use, each in
    a child of its own."""
    from .loader import directory_targets
    path, _, only = spec.partition("::")
    if not os.path.exists(path):
        raise ModelError(f"{path} does not exist", loc=None,
                         hint="give a .py file, a directory, or file.py::NAME")
    if not os.path.isdir(path):
        _preload(path)
        entries = run(lambda: _describe(spec, build, family),
                      f"importing {os.path.basename(path)}", path)
        return [_target(e, family) for e in entries]
    if only:
        raise ModelError(f"{spec}: ::NAME needs a file, not a directory")
    return directory_targets(path, skipped, exclude,
                             lambda file: resolve(file, build=build, family=family))

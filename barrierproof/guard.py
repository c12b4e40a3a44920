"""The walls around a user's code and around a run: signals, limits, argv and stdout.

A protocol file is a Python program. The command line imports and builds it in a child
process (isolate.py), so nothing it does there reaches the verdicts; these walls stand inside
that child (and around a library caller's `barrierproof.check`, which runs the user's code in
its own process), so that what it does ends in a clear verdict:

- `sys.exit()` or a stray `KeyboardInterrupt` in the user's code is that file's `error` verdict;
- it sees `sys.argv == [its own path]`, not barrierproof's flags, and what it prints goes to
  stderr, so `--format json` on stdout stays JSON;
- a `Watchdog` holds `--timeout` and `--max-memory` while it runs (an endless loop or a huge
  thread count ends in a `bounded` verdict, not a hung CI job), and the engines run under the
  same watchdog with a small grace period as a safety net behind their own limits.

SIGINT, SIGTERM and SIGHUP at any moment end the run the same way: the protocols not finished
are `bounded`, the report of what was reached is written (`Interrupts`).
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import sys
import threading
import time
from typing import Callable, Iterator

from .model.ir import Loc, ModelError

# The engines' own limits act first; the watchdog stops them only if they overrun this much.
GRACE_SECONDS = 2.0


class LimitReached(BaseException):
    """The watchdog's stop. A BaseException, so the user's `except Exception:` cannot eat it."""

    def __init__(self, what: str):
        super().__init__(what)
        self.what = what


def rss_mb() -> float:
    """This process's resident memory now (peak where /proc is missing)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class _AsyncStop(LimitReached):
    """The watchdog's stop delivered as an asynchronous exception (CPython raises it in the main
    thread between two bytecodes), for code that took SIGUSR1 away from the watchdog. CPython
    instantiates it without arguments: the message is the firing watchdog's."""

    def __init__(self, *args):
        super().__init__(args[0] if args else (_firing or "limit reached"))


_firing: str | None = None


def _raise_in(thread_id: int, exc: type[BaseException] | None) -> None:
    """Schedule `exc` in the thread (None: cancel what is scheduled)."""
    import ctypes
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc is not None else None)


class Watchdog:
    """Raise LimitReached in the main thread once `seconds` have passed or resident memory
    exceeds `max_memory_mb`. Polls from a helper thread; the stop arrives as a signal (SIGUSR1)
    so it interrupts pure-Python loops and sleeps alike. Off the main thread, or with no limit,
    it does nothing."""

    POLL = 0.05
    # After firing, seconds for the main thread to stop before the process ends with exit 2:
    # user code blocked in native code with the watchdog's signal ignored cannot be unwound.
    LAST_RESORT = 10.0

    def __init__(self, seconds: float | None, max_memory_mb: float | None, doing: str,
                 time_text: str | None = None, on_fire: Callable[[], None] | None = None,
                 memory_text: str | None = None):
        self.seconds = seconds
        self.time_text = time_text
        self.memory_text = memory_text
        # A solver deep in native code sees no Python signal: this stops it from here.
        self.on_fire = on_fire
        self.max_memory_mb = max_memory_mb
        self.doing = doing
        self.fired: str | None = None
        self._active = False
        self._stop = threading.Event()

    def __enter__(self) -> "Watchdog":
        if (self.seconds is None and self.max_memory_mb is None) or \
                threading.current_thread() is not threading.main_thread():
            return self
        self._main = threading.main_thread().ident
        self._previous = signal.signal(signal.SIGUSR1, self._handler)
        self._active = True
        self._start = time.monotonic()
        self._thread = threading.Thread(target=self._watch, daemon=True,
                                        name="barrierproof-watchdog")
        self._thread.start()
        return self

    def _handler(self, signum, frame) -> None:
        if self._active and self.fired and not _in_finalizer(frame):
            raise LimitReached(self.fired)

    def _watch(self) -> None:
        global _firing
        next_kick = 0.0
        fired_at = None
        while not self._stop.wait(self.POLL):
            now = time.monotonic()
            if self.fired is None:
                if self.seconds is not None and now - self._start > self.seconds:
                    self.fired = (f"{self.time_text or f'time limit {self.seconds:g}s'} "
                                  f"reached while {self.doing}")
                elif self.max_memory_mb is not None and rss_mb() > self.max_memory_mb:
                    self.fired = (f"{self.memory_text or f'memory limit {self.max_memory_mb:g} MB'}"
                                  f" reached while {self.doing}")
                fired_at = now
            # Again every half second: code that catches BaseException once is stopped anyway.
            if self.fired is not None and now >= next_kick:
                next_kick = now + 0.5
                if self.on_fire is not None:
                    try:
                        self.on_fire()
                    except Exception:   # a stop that cannot stop: the signal still goes out
                        pass
                if signal.getsignal(signal.SIGUSR1) == self._handler:
                    signal.pthread_kill(self._main, signal.SIGUSR1)
                else:       # the user's code took the signal: stop it between bytecodes
                    _firing = self.fired
                    _raise_in(self._main, _AsyncStop)
                if now - fired_at > self.LAST_RESORT:
                    _last_resort(self.fired)

    def __exit__(self, *exc) -> None:
        if not self._active:
            return
        self._active = False
        self._stop.set()
        self._thread.join()
        if self.fired is not None:
            _raise_in(self._main, None)     # a stop scheduled as the region ended: dropped
        signal.signal(signal.SIGUSR1, self._previous)


def _last_resort(what: str) -> None:
    """The main thread did not stop: end the process with the limits' exit code, saying why."""
    try:
        if on_last_resort is not None:
            on_last_resort(what)
        else:
            sys.stderr.write(f"barrierproof: {what}; the code under way does not stop (it "
                             "blocks in native code or ignores signals): exiting without a "
                             "report\n")
            sys.stderr.flush()
    finally:
        os._exit(2)


def _in_finalizer(frame) -> bool:
    """Whether the stop arrived inside an object's `__del__` (a Z3 term freed mid-query):
    Python prints an exception raised there as "Exception ignored" and drops it, so the stop
    waits for the watchdog's next kick instead."""
    while frame is not None:
        if frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


class Interrupts:
    """SIGINT (Ctrl-C), SIGTERM (a CI job cancelled) and SIGHUP (its terminal gone) end the
    work under way as a KeyboardInterrupt, which the explorer turns into a `bounded` verdict;
    `received` remembers it, so the protocols not yet checked are reported as such, and the
    report is still written. A KeyboardInterrupt without a signal came from a user's code."""

    # SIGHUP: the terminal or the runner's session went away; the report is still wanted.
    SIGNALS = (signal.SIGINT, signal.SIGTERM) + ((signal.SIGHUP,) if hasattr(signal, "SIGHUP")
                                                  else ())

    def __enter__(self) -> "Interrupts":
        self.received: str | None = None
        self.previous = {}
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self.previous[sig] = signal.signal(sig, self._handler)
        return self

    @property
    def seen(self) -> bool:
        return self.received is not None

    @seen.setter
    def seen(self, value: bool) -> None:
        if value and self.received is None:
            self.received = "SIGINT"

    def _handler(self, signum, frame):
        first = self.received is None
        self.received = self.received or signal.Signals(signum).name
        if first:
            raise KeyboardInterrupt

    def why(self) -> str:
        return "interrupted (Ctrl-C)" if self.received in (None, "SIGINT") else \
            f"interrupted ({self.received})"

    def quiet(self) -> None:
        """From here on (writing the report) a further signal is only remembered."""
        for sig in self.previous:
            signal.signal(sig, lambda s, f: None)

    def __exit__(self, *exc) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


# The run's Interrupts, so the loader can tell a real Ctrl-C from a user's `raise
# KeyboardInterrupt`; and the limits on the user's code (--timeout, --max-memory), set by the
# command before it imports anything.
current: Interrupts | None = None
# Without --build-timeout or --timeout, user code still ends: an endless protocol must not hang
# a CI job forever.
DEFAULT_BUILD_TIMEOUT = 120.0
budget: tuple[float | None, float | None] = (DEFAULT_BUILD_TIMEOUT, None)


# In a child that runs user code (isolate.py): tells the parent a new piece of it starts, so
# each piece has the whole build limit.
on_user_code: Callable[[str], None] | None = None
# In such a child: how the watchdog's last resort tells the parent it was a limit.
on_last_resort: Callable[[str], None] | None = None


def build_limit(build_timeout: float | None, timeout: float | None) -> float:
    """Seconds for user code: --build-timeout, else --timeout, else DEFAULT_BUILD_TIMEOUT."""
    for seconds in (build_timeout, timeout):
        if seconds is not None:
            return seconds
    return DEFAULT_BUILD_TIMEOUT


@contextlib.contextmanager
def user_code(path: str, doing: str) -> Iterator[None]:
    """Run a user's code (import, build, trace) behind the walls described above."""
    if on_user_code is not None:
        on_user_code(doing)
    argv, stdout = sys.argv, sys.stdout
    sys.argv = [path]
    sys.stdout = sys.stderr
    pid = os.getpid()
    depth = sys.getrecursionlimit()
    try:
        with Watchdog(budget[0], budget[1], doing):
            yield
    except SystemExit as err:
        raise _exit_error(err, path, doing) from None
    except KeyboardInterrupt as err:
        if current is not None and current.seen:
            raise               # a real Ctrl-C / SIGTERM: the run stops
        raise _located(err, path, f"KeyboardInterrupt raised while {doing}",
                       "a protocol file must not raise KeyboardInterrupt") from None
    except (Exception, LimitReached):
        raise                   # the loader locates the user's errors; the watchdog's stop
    except BaseException as err:    # GeneratorExit, a user's BaseException subclass
        raise _located(err, path, f"{type(err).__name__} raised while {doing}: "
                       f"{safe_text(err)}", "a protocol must raise Exception subclasses "
                       "only (BaseException ends programs)") from None
    finally:
        if os.getpid() != pid:
            os._exit(0)     # a fork of the user's code never goes on with barrierproof's work
        sys.argv, sys.stdout = argv, stdout
        # A recursion limit the user's code lowered is its own, not barrierproof's.
        sys.setrecursionlimit(max(depth, sys.getrecursionlimit()))


def die_with_parent(parent: int) -> None:
    """Linux: ask the kernel for SIGKILL when the parent dies (prctl PR_SET_PDEATHSIG); a
    parent already gone before the request is caught by the parent pid check after it."""
    import ctypes
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os._exit(1)


def _forked() -> None:
    """A process the user's code forks dies with the barrierproof process it forked from."""
    parent = os.getppid()
    die_with_parent(parent)


os.register_at_fork(after_in_child=_forked)


def exit_process(code: int) -> None:
    """The console command's end: flush, then exit without waiting for threads the user's code
    started and left running (Python would join them at exit, after the report, forever)."""
    user_threads = [t for t in threading.enumerate()
                    if t is not threading.main_thread() and not t.daemon]
    if not user_threads:
        sys.exit(code)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def safe_text(err: BaseException, limit: int = 300) -> str:
    """An exception's message, even when its `__str__` raises or runs on for megabytes."""
    try:
        text = str(err)
    except BaseException:   # a user's __str__: whatever it raises, the message says so
        return f"<a {type(err).__name__} whose message cannot be shown>"
    if not isinstance(text, str):
        return f"<a {type(err).__name__}>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _exit_error(err: SystemExit, path: str, doing: str) -> ModelError:
    try:
        code = repr(err.code)
    except Exception:
        code = "..."
    return _located(err, path, f"sys.exit({code[:80]}) called while {doing}",
                    "a protocol file must not exit; guard scripts with "
                    "`if __name__ == \"__main__\":`")


def _located(err: BaseException, path: str, message: str, hint: str) -> ModelError:
    import traceback
    frames = [f for f in traceback.extract_tb(err.__traceback__)
              if os.path.abspath(f.filename) == os.path.abspath(path)]
    loc = Loc(frames[-1].filename, frames[-1].lineno or 1) if frames else Loc(path, 1)
    return ModelError(message, loc=loc, hint=hint)

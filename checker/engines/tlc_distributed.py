"""TLC's own distributed mode on this machine: one TLCServer and K TLCWorker processes.

For a model too big for one TLC process, tla2tools ships a distributed model checker: the server
(`tlc2.tool.distributed.TLCServer`) parses the spec, computes the initial states and keeps the
state queue, the fingerprint set and the trace; workers (`tlc2.tool.distributed.TLCWorker HOST`)
fetch the spec from it over Java RMI, compute successor states in blocks and check the
invariants and action properties on them. barrierproof starts the server and the workers on
localhost, each worker as its own JVM with `threads` worker threads, and reads the server's
`-tool` output like a one-process run (tlc.parse_output).

What is different from one process, and handled here:
- The server's RMI registry listens on a TCP port (TLC's default 10997): a free one is picked
  unless the user names one, and a busy port is a clear error, not a hang.
- Java RMI listens on every interface and has no authentication: anyone who reaches a port
  could list and drive the server. Every server socket is bound to one address through
  LoopbackRmi.java (127.0.0.1 unless the user names another with --bind, then with a warning).
- Workers look the server up only once it is ready (message 7000, after the initial states);
  started earlier they back off for seconds at a time, so they are started when it says so.
- The server's exit code says nothing about the verdict (0 after a violation too): the
  verdict is read from its messages.
- The server waits one report interval (a minute by default) before it looks whether the search
  is done; a one-second interval keeps small models quick.
- TLCGet/TLCSet are not supported in distributed mode, so a depth-bounded run (bounded_wrapper)
  is never distributed (tlc_search runs those in one process).
- The breadth-first order is kept per block of states, not globally: a counterexample may be
  longer than the shortest; tlc_search shortens it with one-process runs.
"""

from __future__ import annotations

import errno
import socket
import subprocess
import threading
import time
from pathlib import Path

SERVER = "tlc2.tool.distributed.TLCServer"
WORKER = "tlc2.tool.distributed.TLCWorker"
DEFAULT_PORT = 10997            # TLCServer's own default
MSG_SERVER_READY = 7000         # "TLC server at HOST is ready": workers may connect now
HOST = "127.0.0.1"
# Sets the RMI socket factory to bind `HOST` (or --bind), then runs the TLC main class.
LAUNCHER = Path(__file__).with_name("LoopbackRmi.java")
NO_AUTHENTICATION = ("TLC's distributed mode speaks Java RMI, which has no authentication: "
                     "anyone who can reach {address} can list and drive the server and workers")
WORKERLESS_GRACE = 10.0         # seconds a server may run on after its last worker exited
# TLC names each worker by its RMI port, read from JDK internals; opening them keeps it quiet.
OPENS = ("--add-opens", "java.rmi/sun.rmi.server=ALL-UNNAMED",
         "--add-opens", "java.rmi/sun.rmi.transport=ALL-UNNAMED")


def _tlc():
    from . import tlc
    return tlc


def is_loopback(address: str) -> bool:
    import ipaddress
    try:
        return ipaddress.ip_address(socket.gethostbyname(address)).is_loopback
    except (OSError, ValueError):
        return False


def port_free(port: int, address: str = HOST) -> bool:
    """Nothing listens on `port` of `address`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((address, port))
        except OSError as err:
            if err.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def free_port(address: str = HOST) -> int:
    """A TCP port no one listens on now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((address, 0))
        return sock.getsockname()[1]


def check_port(port: int | None, address: str = HOST) -> int:
    """The port to use: `port` when it is valid and free, else a free one when none was named."""
    tlc = _tlc()
    if port is None:
        return free_port(address)
    if not 1 <= port <= 65535:
        raise tlc.TlcError(f"--port {port} is not a TCP port (1-65535)")
    if not port_free(port, address):
        raise tlc.TlcError(f"port {port} is busy: another process (perhaps another TLC server) "
                           "listens on it; name a free one with --port, or leave --port out "
                           "to let barrierproof pick one")
    return port


class _Server:
    """The TLCServer process: its output collected line by line, `ready` set at message 7000."""

    def __init__(self, cmd: list[str], cwd: Path):
        self.lines: list[str] = []
        self.ready = threading.Event()
        self.proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        marker = f"@!@!@STARTMSG {MSG_SERVER_READY}:"
        for line in self.proc.stdout:
            self.lines.append(line)
            if line.startswith(marker):
                self.ready.set()
        self.ready.set()        # the server ended (perhaps before it was ready): stop waiting

    @property
    def output(self) -> str:
        return "".join(self.lines)


def _stop(proc: subprocess.Popen, grace: float = 2.0) -> None:
    """End a process this module started: terminate, then kill after `grace` seconds."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# "The behavior up to this point is": the server found a violation. TLC 2.15's server prints
# neither which rule nor a usable trace (it shows the last state as the initial one), so a
# violation is only "violation" here; tlc_search asks a one-process run for its trace and code.
MSG_BEHAVIOR = 2121


def status_from_messages(run) -> str:
    """The verdict of a TLCServer run, from its messages (its exit code is 0 either way)."""
    tlc = _tlc()
    codes = {code for code, _ in tlc._messages(run.output)}
    if codes & {tlc.MSG_DEADLOCK, tlc.MSG_INVARIANT, tlc.MSG_PROPERTY, MSG_BEHAVIOR}:
        return "violation"
    if tlc.MSG_SUCCESS in codes:
        return "ok"
    return "error"


# TLCServer's own failure when a worker registers as the last states are done (its queue is
# gone: a NullPointerException on `this.states`): a matter of timing on small models, not of
# the spec, so the run is made once more.
LATE_WORKER = 'because "this.states" is null'


def run_distributed(directory: Path, root: str, options: list[str], workers: int,
                    threads: int = 1, timeout: float | None = None,
                    java_options: tuple[str, ...] = ("-XX:+UseParallelGC",),
                    port: int | None = None, bind: str = HOST):
    """Check `root` (written into `directory` by tlc.prepare_run) with a TLCServer and
    `workers` TLCWorker processes of `threads` threads each on this machine, every RMI socket
    bound to `bind`; a TlcRun."""
    run = _run_once(directory, root, options, workers, threads, timeout, java_options, port, bind)
    if run.status == "error" and LATE_WORKER in run.output:
        run = _run_once(directory, root, options, workers, threads, timeout, java_options, port,
                        bind)
    return run


def _run_once(directory: Path, root: str, options: list[str], workers: int, threads: int,
              timeout: float | None, java_options: tuple[str, ...], port: int | None,
              bind: str):
    tlc = _tlc()
    if workers < 1 or threads < 1:
        raise tlc.TlcError(f"distributed TLC needs at least one worker process of one thread, "
                           f"not {workers} x {threads}")
    if "WithinDepth" in (directory / f"{root}.run.cfg").read_text():
        raise tlc.TlcError("a depth-bounded TLC run cannot be distributed (TLCGet is not "
                           "supported by TLCServer)")
    java, jar = tlc.java_executable(), tlc.tla2tools_jar()
    try:
        socket.getaddrinfo(bind, None)
    except (OSError, UnicodeError) as err:
        raise tlc.TlcError(f"--bind {bind}: not an address of this machine ({err})") from None
    port = check_port(port, bind)
    common = [java, *java_options, *OPENS, f"-Djava.io.tmpdir={directory / 'tmp'}",
              f"-D{SERVER}.port={port}", f"-Djava.rmi.server.hostname={bind}"]
    launch = [str(LAUNCHER), bind]
    server_cmd = [*common, f"-D{SERVER}.report=1000", "-cp", jar, *launch, SERVER, *options,
                  root]
    worker_cmd = [*common, f"-D{WORKER}.threadCount={threads}", "-cp", jar, *launch, WORKER,
                  bind]
    start = time.perf_counter()
    deadline = None if timeout is None else start + timeout
    server = _Server(server_cmd, directory)
    started: list[subprocess.Popen] = []
    logs = []
    timed_out, workers_gone = False, None
    try:
        server.ready.wait(None if deadline is None else max(0.0, deadline - time.perf_counter()))
        if server.proc.poll() is None and server.ready.is_set():
            for n in range(workers):
                log = open(directory / f"worker{n + 1}.log", "w")
                logs.append(log)
                started.append(subprocess.Popen(worker_cmd, cwd=directory, stdout=log,
                                                stderr=subprocess.STDOUT))
        # workers_gone: when the last worker exited while the server still ran
        while server.proc.poll() is None:
            if deadline is not None and time.perf_counter() >= deadline:
                timed_out = True
                break
            if started and all(p.poll() is not None for p in started):
                # workers exit when the server ends the run; a server left without any for
                # long would wait for one forever
                workers_gone = workers_gone or time.perf_counter()
                if time.perf_counter() - workers_gone > WORKERLESS_GRACE:
                    break
            time.sleep(0.1)
    finally:
        _stop(server.proc)
        for proc in started:
            _stop(proc)
        for log in logs:
            log.close()
        server.reader.join(5)
    output = server.output
    if "Port already in use" in output or "ExportException" in output:
        raise tlc.TlcError(f"TLC's server could not listen on port {port} (busy); name a free "
                           "one with --port, or leave --port out to let barrierproof pick one")
    run = tlc.parse_output(output, server.proc.returncode)
    run.status = "timeout" if timed_out else status_from_messages(run)
    run.states = []             # not a trace (see MSG_BEHAVIOR)
    if run.status == "error" and started:
        # say why: the workers' own output (a worker that could not start, a lost server)
        worker_out = "\n".join(Path(log.name).read_text()[-2000:] for log in logs)
        run.output = (output + "\n-- every TLC worker exited before the server finished --\n"
                      if workers_gone else output + "\n-- workers --\n") + worker_out
    run.seconds = time.perf_counter() - start
    run.workers = workers * threads
    return run


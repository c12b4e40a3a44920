"""Reading a trace or report file someone handed over: bounded before it is parsed.

A trace is data from elsewhere. `/dev/zero`, a fifo that never ends or a file of gigabytes
must not keep `replay` or `confirm --schedule` reading forever: only a regular file of at
most MAX_TRACE_BYTES is read.
"""

from __future__ import annotations

import os
import stat

from .model.ir import ModelError

# Far above any trace `check` writes (a million steps with barrier states is some 200 MB
# only for protocols with hundreds of barriers); small enough to read in seconds.
MAX_TRACE_BYTES = 256 * 2 ** 20


def read_bounded(path: str, limit: int = MAX_TRACE_BYTES) -> str:
    """The text of a regular file of at most `limit` bytes, else an input error."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)     # a fifo must not block the open
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ModelError(f"{path} is not a regular file", hint="give a trace file written "
                             "by `check --trace-dir DIR` or a JSON report")
        if info.st_size > limit:
            raise ModelError(f"{path} has {info.st_size:,} bytes, more than a trace may have "
                             f"({limit:,})", hint="give a trace written by `check --trace-dir`")
        data = f.read(limit + 1)
    if len(data) > limit:       # it grew while being read
        raise ModelError(f"{path} has more than {limit:,} bytes", hint="give a trace file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ModelError(f"{path} is not UTF-8 text ({err.reason} at byte {err.start})",
                         hint="give a trace written by `check --trace-dir DIR`") from None

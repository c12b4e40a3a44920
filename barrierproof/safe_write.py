"""Where reports and traces are written, and what they must never overwrite.

A report written over its own input (`check ring.py -o ring.py`), over pyproject.toml or over
the `--config` file destroys what the user meant to keep, so such an output is an input error
found before any work. Every file is written whole to a temporary name beside it, then renamed
over the target: a rename replaces a symlink that sits at the target instead of following it, so
a link planted inside `--trace-dir` cannot redirect a write elsewhere.
"""

from __future__ import annotations

import os
import secrets

from .model.ir import ModelError

PROTECTED_NAMES = ("pyproject.toml",)


def _inputs(args, config_path: str | None) -> list[tuple[str, str]]:
    """(path, what it is) of every file this command reads."""
    found = []
    for spec in list(getattr(args, "paths", None) or []) + \
            [p for p in (getattr(args, "path", None),) if p]:
        path = spec.partition("::")[0]
        found.append((path, "an input"))
    for dest, what in (("config", "the --config file"), ("trace", "the trace read"),
                       ("schedule", "the schedule read")):
        value = getattr(args, dest, None)
        if isinstance(value, str) and value:
            found.append((value, what))
    if config_path:
        found.append((config_path, "the config file read"))
    return found


def _same(a: str, b: str) -> bool:
    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
    except OSError:
        pass
    return os.path.realpath(a) == os.path.realpath(b)


def _inside(path: str, directory: str) -> bool:
    rel = os.path.relpath(os.path.realpath(path), os.path.realpath(directory))
    return not rel.startswith("..")


def refuse_overwriting_inputs(args, outputs: list[str], config_path: str | None = None) -> None:
    """`-o` (its paths: `outputs`) must not name an input, a Python file inside an input
    directory, the config file read, or any pyproject.toml."""
    if getattr(args, "command", None) == "tla":
        return
    for path in outputs:
        _refuse(path, args, config_path)


def _refuse(output: str, args, config_path: str | None) -> None:
    hint = "write the report to a new file, e.g. -o report.json"
    if os.path.basename(output) in PROTECTED_NAMES:
        raise ModelError(f"-o {output}: refusing to overwrite a project file with the report",
                         hint=hint)
    for path, what in _inputs(args, config_path):
        if os.path.isdir(path):
            if output.endswith(".py") and _inside(output, path):
                raise ModelError(f"-o {output} lies in the input directory {path} and would be "
                                 "read as a protocol file", hint=hint)
        elif _same(output, path):
            raise ModelError(f"-o {output} is {what} ({path}): refusing to overwrite it",
                             hint=hint)


def _write_at(dir_fd: int | None, directory: str, name: str, text: str) -> None:
    """Write `text` to a fresh temporary file in the directory, then rename it onto `name`."""
    temp = f".{name}.{secrets.token_hex(6)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    kwargs = {"dir_fd": dir_fd} if dir_fd is not None else {}
    where = (lambda n: n) if dir_fd is not None else (lambda n: os.path.join(directory, n))
    fd = os.open(where(temp), flags, 0o666, **kwargs)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        if dir_fd is not None:
            os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        else:
            os.replace(where(temp), where(name))
    except BaseException:
        try:
            os.unlink(where(temp), **kwargs)
        except OSError:
            pass
        raise


def _open_dir(directory: str) -> int | None:
    if os.open not in getattr(os, "supports_dir_fd", set()):
        return None
    return os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))


def write_into_dir(directory: str, name: str, text: str) -> None:
    """A file `name` (no separators) inside `directory`, created when missing; a symlink
    already at `name` is replaced, never followed."""
    if os.sep in name or name in ("", ".", ".."):
        raise ValueError(f"not a plain file name: {name!r}")
    os.makedirs(directory, exist_ok=True)
    dir_fd = _open_dir(directory)
    try:
        _write_at(dir_fd, directory, name, text)
    except OSError as err:          # named by the file asked for, not its temporary
        err.filename, err.filename2 = os.path.join(directory, name), None
        raise
    finally:
        if dir_fd is not None:
            os.close(dir_fd)


def write_output(path: str, text: str) -> None:
    """The report file of `-o PATH`, written whole or not at all; a device or a pipe the
    user named (/dev/stdout, a fifo) is written in place."""
    import stat
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return
    directory, name = os.path.split(os.path.abspath(path))
    write_into_dir(directory, name, text)

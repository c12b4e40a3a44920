"""`[tool.barrierproof]` in pyproject.toml: what `check` and `prove` do when no flag says.

```toml
[tool.barrierproof]
paths = ["kernels/", "protocols/ring.py::tma_ring"]   # relative to this pyproject.toml
params = { stages = 3, steps = 6 }     # applied to every protocol that has the parameter
select = ["BP100", "BP101"]            # or "BP100,BP101"; default: every code
ignore = ["BP190"]
exclude = ["legacy", "*_old.py"]       # files a directory walk skips (--exclude adds more)
max-states = 2_000_000
max-depth = 200
timeout = 600                          # seconds per protocol
build-timeout = 120                    # seconds for importing and building each file's code
max-memory = 8000                      # MB
reduction = true
engine = "explore"                     # check only: explore | tlc | symbolic
expect = false                         # exit 0 only if verdicts match the declared ones
cache = true
cache-dir = ".barrierproof_cache"      # relative to this file; $BARRIERPROOF_CACHE_DIR wins
```

The nearest pyproject.toml with a `[tool.barrierproof]` table is used, searching from the working
directory upwards and stopping at the repository's top (the directory holding `.git`).
`--config FILE` names one, `--no-config` ignores them all. Command-line flags override the file:
`--param` overrides one parameter at a time, `--select`/`--ignore` replace the file's lists.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from .checker.engine_registry import ENGINES
from .model.ir import Loc, ModelError
from .validate import check_codes, check_limit

SECTION = "barrierproof"
# Built-in defaults, used where neither a flag nor the file says.
DEFAULTS = {
    "max_states": 5_000_000,
    "max_depth": None,
    "timeout": None,
    "build_timeout": None,
    "max_memory": 16_000,
    "reduction": True,
    "engine": "explore",
    "expect": False,
    "cache": True,
    "format": "text",
}
# key in the file -> (argparse dest, what it must be)
KEYS = {
    "paths": ("paths", "a list of paths"),
    "params": ("param", "a table of integers"),
    "select": ("select", "a list of codes"),
    "ignore": ("ignore", "a list of codes"),
    "exclude": ("exclude", "a list of globs"),
    "max-states": ("max_states", "an integer"),
    "max-depth": ("max_depth", "an integer"),
    "timeout": ("timeout", "a number of seconds"),
    "max-memory": ("max_memory", "an integer (MB)"),
    "build-timeout": ("build_timeout", "a number of seconds"),
    "reduction": ("reduction", "true or false"),
    "engine": ("engine", f"{', '.join(list(ENGINES)[:-1])} or {list(ENGINES)[-1]}"),
    "expect": ("expect", "true or false"),
    "cache": ("cache", "true or false"),
    "cache-dir": ("cache_dir", "a path"),
}


@dataclass
class Config:
    path: str | None                   # the pyproject.toml read, if any
    values: dict[str, Any] = field(default_factory=dict)   # argparse dest -> value

    @property
    def root(self) -> str:
        """The directory that relative paths of the file are relative to."""
        return os.path.dirname(self.path) if self.path else os.getcwd()


def _load_toml(path: str) -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            raise ModelError(f"{path}: reading pyproject.toml on Python 3.10 needs tomli",
                             hint="pip install tomli, or pass --no-config") from None
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as err:
        raise ModelError(f"cannot read {path}: {err.strerror}") from None
    except tomllib.TOMLDecodeError as err:
        line = getattr(err, "lineno", None) or _toml_line(str(err), path)
        raise ModelError(f"not valid TOML: {getattr(err, 'msg', err)}", loc=Loc(path, line),
                         hint="fix the file, or pass --no-config") from None
    except UnicodeDecodeError:
        raise ModelError("not valid TOML: the file is not UTF-8", loc=Loc(path, 1),
                         hint="fix the file, or pass --no-config") from None


def _toml_line(message: str, path: str) -> int:
    """tomllib before Python 3.14 puts the line only in its message: `... (at line 3, column 5)`
    or `(at end of document)`."""
    import re
    found = re.search(r"line (\d+)", message)
    if found:
        return int(found.group(1))
    with open(path, "rb") as f:
        return max(1, f.read().count(b"\n"))


def find_config(start: str | None = None) -> str | None:
    """The nearest pyproject.toml above `start` that has a [tool.barrierproof] table."""
    directory = os.path.abspath(start or os.getcwd())
    while True:
        candidate = os.path.join(directory, "pyproject.toml")
        if os.path.isfile(candidate) and SECTION in _load_toml(candidate).get("tool", {}):
            return candidate
        parent = os.path.dirname(directory)
        if os.path.exists(os.path.join(directory, ".git")) or parent == directory:
            return None
        directory = parent


def _codes(value, path: str, key: str) -> str:
    if isinstance(value, str):
        text = value
    elif isinstance(value, list) and all(isinstance(c, str) for c in value):
        text = ",".join(value)
    else:
        raise _bad(path, key)
    check_codes(text, f"[tool.barrierproof] {key}", _loc(path, key))
    return text


def _loc(path: str, key: str | None = None) -> Loc:
    """The line of `key` in the [tool.barrierproof] table (or of the table's header): where a
    user's editor should jump, never line 0."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return Loc(path, 1)
    header = None
    for n, line in enumerate(lines, 1):
        text = line.strip()
        if text.startswith("[") and not text.startswith("[["):
            inside = text.strip("[] ").replace(" ", "")
            if header is not None and not inside.startswith(f"tool.{SECTION}"):
                break       # past the table: the key was not written in it
            if inside == f"tool.{SECTION}":
                header = n
            continue
        if header is not None and key is not None:
            name = text.partition("=")[0].strip().strip('"\'')
            if name in (key, key.replace("-", "_")):
                return Loc(path, n)
    return Loc(path, header or 1)


def _bad(path: str, key: str) -> ModelError:
    return ModelError(f"[tool.barrierproof] {key} must be {KEYS[key][1]}", loc=_loc(path, key),
                      hint=f"see `barrierproof check --help` for what {key} means")


def _relative(spec: str, root: str) -> str:
    """A path of the file, made relative to the working directory when it lies below it."""
    path, sep, name = spec.partition("::")
    full = os.path.normpath(os.path.join(root, path))
    rel = os.path.relpath(full)
    return (full if rel.startswith("..") else rel) + sep + name


def load_config(path: str) -> Config:
    """Read and check one file's [tool.barrierproof] table."""
    table = _load_toml(path).get("tool", {}).get(SECTION, {})
    if not isinstance(table, dict):
        raise ModelError("[tool.barrierproof] must be a table", loc=_loc(path))
    root = os.path.dirname(os.path.abspath(path))
    values: dict[str, Any] = {}
    for raw_key, value in table.items():
        key = raw_key.replace("_", "-")
        if key not in KEYS:
            raise ModelError(f"[tool.barrierproof] has an unknown key {raw_key!r}",
                             loc=_loc(path, raw_key), hint=f"known keys: {', '.join(KEYS)}")
        dest = KEYS[key][0]
        if key == "paths":
            if not (isinstance(value, list) and all(isinstance(p, str) for p in value)):
                raise _bad(path, key)
            value = [_relative(p, root) for p in value]
        elif key == "params":
            if not (isinstance(value, dict) and all(
                    isinstance(v, int) and not isinstance(v, bool) for v in value.values())):
                raise _bad(path, key)
            value = [f"{k}={v}" for k, v in value.items()]
        elif key in ("select", "ignore"):
            value = _codes(value, path, key)
        elif key == "exclude":
            if not (isinstance(value, list) and all(isinstance(g, str) for g in value)):
                raise _bad(path, key)
        elif key in ("max-states", "max-depth", "max-memory", "timeout", "build-timeout"):
            check_limit(dest, value, _loc(path, raw_key), f"[tool.barrierproof] {key}")
        elif key in ("reduction", "expect", "cache"):
            if not isinstance(value, bool):
                raise _bad(path, key)
        elif key == "engine":
            if not isinstance(value, str) or value not in ENGINES:
                raise _bad(path, key)
        elif key == "cache-dir":
            if not isinstance(value, str):
                raise _bad(path, key)
            value = os.path.join(root, value)
        values[dest] = value
    return Config(os.path.abspath(path), values)


def apply_config(args) -> Config:
    """Fill the flags a user did not give from the config file, then from the defaults.

    Flags the parser leaves at None are "not given". After this, `args` holds final values:
    `paths`, `param` (file's first, so a flag wins), `select`, `ignore`, the limits,
    `no_reduction`, `expect`, `no_cache`, `cache_dir`, `format`, `engine` (for `check`).
    """
    if getattr(args, "no_config", False):
        config = Config(None)
    elif getattr(args, "config", None):
        if not os.path.isfile(args.config):
            raise ModelError(f"--config {args.config}: no such file",
                             hint="name a pyproject.toml, or pass --no-config")
        config = load_config(args.config)
    else:
        found = find_config()
        config = load_config(found) if found else Config(None)
    values = config.values
    if not args.paths:
        args.paths = list(values.get("paths", []))
    given = {item.partition("=")[0].strip() for item in args.param or []}
    from_file = list(values.get("param", []))
    # Parameters of the file apply to the protocols that have them; only a flag naming a
    # parameter no protocol has is an error.
    args.config_only_params = tuple(sorted(
        {item.partition("=")[0] for item in from_file} - given))
    args.param = from_file + list(args.param or [])
    for dest in ("select", "ignore", "max_states", "max_depth", "timeout", "max_memory",
                 "build_timeout"):
        if getattr(args, dest, None) is None:
            setattr(args, dest, values.get(dest, DEFAULTS.get(dest)))
    if not args.no_reduction:
        args.no_reduction = not values.get("reduction", DEFAULTS["reduction"])
    if not args.expect:
        args.expect = values.get("expect", DEFAULTS["expect"])
    if not args.no_cache:
        args.no_cache = not values.get("cache", DEFAULTS["cache"])
    if args.cache_dir is None:
        args.cache_dir = os.environ.get("BARRIERPROOF_CACHE_DIR") or values.get("cache_dir") \
            or os.path.join(config.root, ".barrierproof_cache")
    if args.format is None:
        args.format = DEFAULTS["format"]
    if hasattr(args, "exclude"):        # the file's globs and the flags' together
        args.exclude = list(values.get("exclude", [])) + list(args.exclude or [])
    if hasattr(args, "engine") and args.engine is None:
        args.engine = values.get("engine", DEFAULTS["engine"])
    return config

"""Emitting many protocols: `barrierproof tla PATH[::NAME] -o DIR` and specs/generated/.

One module per compiled System (tla.py writes it), named after the file and the protocol, an
index README.md beside them, and copies of the library modules they EXTEND.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from ...model.ir import ModelError
from ...model.semantics import compile_systems
from .tla import (HW_LIBRARY, INIT_LIBRARY, LIBRARY, TlaModule, emit_system, library_text,
                  module_name, position_suffix)

@dataclass
class Emitted:
    """The outcome of emitting one target: its modules, or why none was written."""

    ref: str
    expect: str | None
    modules: list[TlaModule] = field(default_factory=list)
    skipped: str | None = None


def _relative(path: str, root: str | None) -> str:
    if root is None:
        return path
    try:
        rel = os.path.relpath(os.path.abspath(path), root)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _module_stem(path: str) -> str:
    """examples/pallas/ring.py -> pallas_ring: the file's path without a leading examples/,
    so files of the same name in different folders give different modules."""
    parts = list(Path(path).with_suffix("").parts)
    if os.path.isabs(path):
        parts = parts[-1:]
    if len(parts) > 1 and parts[0] == "examples":
        parts = parts[1:]
    return "_".join(parts)


def emit_targets(targets, params: Mapping[str, int] | None = None, root: str | None = None,
                 output: str = "DIR") -> list[Emitted]:
    """Modules for loader targets. A module is named FILE_PROTOCOL; a kernel with static
    findings (BP110, BP111, BP112, BP120, BP121) is skipped: its unrollable part alone would be
    a misleading spec, and no engine explores it."""
    from ...model.static_rules import static_findings
    root = os.path.abspath(root or os.getcwd())
    params = dict(params or {})
    out = []
    for target in targets:
        path = _relative(target.path, root)
        attr = target.ref.partition("::")[2]
        ref = f"{path}::{attr}" if attr else path
        item = Emitted(ref, target.expect)
        out.append(item)
        try:
            build_all = getattr(target, "build_all", None)
            kernels = build_all() if build_all is not None else [target.build()]
        except ModelError as err:
            item.skipped = f"input error: {err}"
            continue
        base = module_name(_module_stem(path) + "_" + (attr or target.name))
        reasons = []
        for n, kernel in enumerate(kernels):
            try:
                kp = {k: v for k, v in params.items() if k in kernel.params}
                findings = static_findings(kernel)
                systems = compile_systems(kernel, kp)
            except ModelError as err:
                reasons.append(f"input error: {err}")
                continue
            for system in systems:
                findings += system.findings
            blocking = sorted({f.code for f in findings if f.code != "BP190"})
            if blocking:
                reasons.append(f"{', '.join(blocking)} found statically, nothing to model-check")
                continue
            kbase = base if len(kernels) == 1 else f"{base}_k{n}"
            extra = "".join(f" --param {k}={v}" for k, v in sorted(kp.items()))
            command = f"barrierproof tla {ref}{extra} -o {output}"
            for system in systems:
                name = kbase
                if len(systems) > 1:
                    name += "_" + position_suffix(system)
                item.modules.append(emit_system(system, name, source=ref, root=root,
                                                command=command))
        if reasons:
            item.skipped = "; ".join(dict.fromkeys(reasons))
    return out


def index_text(emitted: list[Emitted]) -> str:
    """README.md of an output directory: which module states which protocol."""
    lines = ["# Generated TLA+ specs", "",
             "Written by `barrierproof tla` (checker/engines/tla.py); each module EXTENDS MBarrier.tla",
             "(a copy of specs/MBarrier.tla), or its sibling HwBarrier.tla when the kernel has named or",
             "cluster barriers or more than one block (InitBarrier.tla, which extends HwBarrier, when",
             "it initialises barriers itself), and only lists a kernel's programs and barriers.",
             "Check one with TLC (deadlock checking on; never pass `-deadlock`):", "",
             "    java -cp tla2tools.jar tlc2.TLC -workers 1 MODULE", "",
             "| module | protocol | parameters | expected verdict |",
             "| --- | --- | --- | --- |"]
    for item in emitted:
        for m in item.modules:
            params = ", ".join(f"{k}={v}" for k, v in sorted(m.system.params.items())) or "-"
            lines.append(f"| {m.name} | {item.ref} | {params} | {item.expect or '-'} |")
    skipped = [i for i in emitted if i.skipped]
    if skipped:
        lines += ["", "Not emitted:", ""]
        lines += [f"- {i.ref} ({i.expect or 'no expectation'}): {i.skipped}" for i in skipped]
    return "\n".join(lines) + "\n"


def write_emitted(emitted: list[Emitted], directory: str | os.PathLike,
                  index: bool = True) -> list[Path]:
    """Write every module, MBarrier.tla and (optionally) README.md into `directory`."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for item in emitted:
        for m in item.modules:
            written += m.write(out, library=False)
    for name in (LIBRARY, HW_LIBRARY, INIT_LIBRARY):
        (out / f"{name}.tla").write_text(library_text(name))
        written.append(out / f"{name}.tla")
    if index:
        (out / "README.md").write_text(index_text(emitted))
        written.append(out / "README.md")
    return written


def generated_specs(root: str | os.PathLike) -> dict[str, str]:
    """What specs/generated/ must hold for the repository at `root`: file name -> text.
    `barrierproof tla examples -o specs/generated` (run at the root) writes exactly this."""
    from ...loader import resolve
    root = os.path.abspath(root)
    cwd = os.getcwd()
    os.chdir(root)
    try:
        emitted = emit_targets(resolve("examples"), root=root, output="specs/generated")
    finally:
        os.chdir(cwd)
    files = {}
    for item in emitted:
        for m in item.modules:
            files[f"{m.name}.tla"] = m.tla
            files[f"{m.name}.cfg"] = m.cfg
    files[f"{LIBRARY}.tla"] = library_text()
    files[f"{HW_LIBRARY}.tla"] = library_text(HW_LIBRARY)
    files[f"{INIT_LIBRARY}.tla"] = library_text(INIT_LIBRARY)
    files["README.md"] = index_text(emitted)
    return files

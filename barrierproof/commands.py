"""The commands that draw or emit a model rather than check it: `barrierproof tla` (TLA+ specs
and their TLC configs) and `barrierproof graph` (the state graph as DOT). The engines and
reporters they call know nothing of the command line."""

from __future__ import annotations

import os
import sys

from .flags import fail, params_for, parse_params
from .isolate import resolve
from .model.ir import ModelError


def cmd_tla(args) -> int:
    """`barrierproof tla PATH[::NAME] [--param N=V] -o DIR`."""
    from .checker.engines.tla_files import emit_targets, write_emitted
    try:
        params = parse_params(args.param)
        targets = []
        for spec in args.paths:
            targets += resolve(spec)
    except ModelError as err:
        print(f"error: {err}", file=sys.stderr)
        return 3
    if not targets:
        print(f"error: no protocols found in {' '.join(args.paths)}", file=sys.stderr)
        return 3
    emitted = emit_targets(targets, params, output=args.output)
    write_emitted(emitted, args.output)
    status = 0
    for item in emitted:
        if item.skipped:
            print(f"{item.ref}: not emitted: {item.skipped}")
            if item.skipped.startswith("input error"):
                status = 3
        for m in item.modules:
            print(f"{item.ref}: wrote {os.path.join(args.output, m.name)}.tla and .cfg")
    return status


def cmd_graph(args) -> int:
    """`barrierproof graph PATH::NAME [--param ...] [-o FILE] [--max-states N]`."""
    from .checker.report.graph import TooLarge, state_graph, to_dot
    from .model.semantics import compile_systems
    targets = resolve(args.path)
    if len(targets) != 1:
        return fail(f"{args.path} names {len(targets)} protocols; graph draws one",
                    "name it: file.py::NAME")
    target = targets[0]
    kernel = target.build()
    systems = compile_systems(kernel, params_for(kernel, parse_params(args.param)))
    try:
        graph = state_graph(systems[0], args.max_states)
    except TooLarge as err:
        print(f"error: {target.ref} has {err}; a graph that size is unreadable (hint: use "
              f"smaller --param values, or raise --max-states)", file=sys.stderr)
        return 2
    text = to_dot(graph, target.name)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
        kinds = [d["kind"] for _, d in graph.nodes(data=True)]
        print(f"{target.ref}: {graph.number_of_nodes()} states, {graph.number_of_edges()} "
              f"transitions, {kinds.count('violation')} violating -> {args.output}",
              file=sys.stderr)
    else:
        sys.stdout.write(text)
    if len(systems) > 1:
        print(f"note: drew grid position {systems[0].grid_position}; the kernel has "
              f"{len(systems)} distinct cluster behaviours", file=sys.stderr)
    return 0

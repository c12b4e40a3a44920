"""TLC's states read back as model/semantics.py states, and the reverse (checker/engines/tlc.py
replays TLC's counterexamples on the interpreter through these).

The emitted module (tla.py) lays a System's flat state out as MBarrier.tla's variables (pc, phase,
pending, ...), with HwBarrier's and InitBarrier's after them when the kernel uses those; decoding
puts every field back at the position the System gives it.
"""

from __future__ import annotations

import re
from typing import Mapping

from ...model import hw_barriers as hw
from ...model.semantics import System
from .tla import HW_VARIABLES, INIT_VARIABLES, VARIABLES, uses_hw, uses_init

_TOKEN = re.compile(r"\s*(<<|>>|,|-?\d+|TRUE|FALSE|\"[^\"]*\")")


def parse_value(text: str):
    """A TLC value made of integers, booleans, strings and tuples (what MBarrier's variables
    hold).

    >>> parse_value("<<1, <<>>, <<2, -1>>>>")
    (1, (), (2, -1))
    """
    tokens = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            if text[pos:].strip():
                raise ValueError(f"cannot read TLC value at {text[pos:pos + 30]!r}")
            break
        tokens.append(m.group(1))
        pos = m.end()
    at = 0

    def value():
        nonlocal at
        tok = tokens[at]
        at += 1
        if tok == "<<":
            items = []
            if tokens[at] == ">>":
                at += 1
                return ()
            while True:
                items.append(value())
                tok = tokens[at]
                at += 1
                if tok == ">>":
                    return tuple(items)
                if tok != ",":
                    raise ValueError(f"unexpected {tok!r} in a TLC tuple")
        if tok in ("TRUE", "FALSE"):
            return tok == "TRUE"
        if tok.startswith('"'):
            return tok[1:-1]
        if tok in (">>", ","):
            raise ValueError(f"unexpected {tok!r} in a TLC value")
        return int(tok)

    try:
        result = value()
    except IndexError:
        raise ValueError(f"truncated TLC value {text!r}") from None
    if at != len(tokens):
        raise ValueError(f"trailing text after a TLC value: {text!r}")
    return result


def decode_state(system: System, variables: Mapping[str, object]) -> tuple:
    """A TLC state (variable name -> parsed value) as semantics.py's flat state tuple."""
    names = VARIABLES + (HW_VARIABLES if uses_hw(system) else ()) + \
        (INIT_VARIABLES if uses_init(system) else ())
    missing = [v for v in names if v not in variables]
    if missing:
        raise ValueError(f"TLC state lacks {', '.join(missing)}")
    state: list = list(variables["pc"])
    for i in range(len(system.instances)):
        state += [variables["phase"][i], variables["pending"][i], variables["tx"][i],
                  variables["expected"][i]]
    state += list(variables["seen"])
    state += list(variables["inflight"])
    state += [tuple(q) for q in variables["queue"]]
    if uses_hw(system):
        for h in range(len(system.hw_instances)):
            state += [variables[v][h] for v in HW_VARIABLES[:4]]
        state += list(variables["hwseen"])
    if uses_init(system):
        state += [sum(bit << k for k, bit in enumerate(bits)) for bits in variables["initvis"]]
        state += list(variables["initrel"]) + list(variables["initrelc"])
    if len(state) != system.width:
        raise ValueError(f"TLC state has {len(state)} fields, the System {system.width}")
    return tuple(state)


def encode_state(system: System, state: tuple) -> dict[str, tuple]:
    """semantics.py's flat state as MBarrier's variables (the inverse of `decode_state`)."""
    A, n = system.n_agents, len(system.instances)
    bars = [system.barrier(state, i) for i in range(n)]
    return {
        "pc": tuple(state[:A]),
        "phase": tuple(b[0] for b in bars),
        "pending": tuple(b[1] for b in bars),
        "tx": tuple(b[2] for b in bars),
        "expected": tuple(b[3] for b in bars),
        "seen": tuple(state[A + 4 * n:system.slot_base]),
        "inflight": tuple(state[system.slot_base:system.queue_base]),
        "queue": tuple(tuple(q) for q in state[system.queue_base:system.queue_end]),
        **(_encode_hw(system, state) if uses_hw(system) else {}),
        **(_encode_init(system, state) if uses_init(system) else {}),
    }


def _encode_hw(system: System, state: tuple) -> dict[str, tuple]:
    fields = [hw.fields(system, state, h) for h in range(len(system.hw_instances))]
    base = system.hw_base + hw.HW_FIELDS * len(system.hw_instances)
    end = min(system.init_pos.values()) if uses_init(system) else system.width
    return {**{v: tuple(f[k] for f in fields) for k, v in enumerate(HW_VARIABLES[:4])},
            "hwseen": tuple(state[base:end])}


def _encode_init(system: System, state: tuple) -> dict[str, tuple]:
    bits = system.n_agents + 2
    return {"initvis": tuple(tuple((state[system.init_pos[i]] >> k) & 1 for k in range(bits))
                             for i in system.init_insts),
            "initrel": tuple(state[p] for p in sorted(system.init_rel_pos.values())),
            "initrelc": tuple(state[p] for p in sorted(system.init_relc_pos.values()))}

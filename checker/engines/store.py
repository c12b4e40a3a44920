"""The explorer's visited set: which states were seen, and the breadth-first tree to rebuild a
path, in one of three stores.

- `tuple`: the states themselves (the reference store; fastest, largest).
- `exact`: each state packed into bytes, every field in the fewest bytes its static range allows
  (program counters by program length, tx-counts by the mbarrier's tx range). Exact.
- `fingerprint`: a 64-bit fingerprint of the packed state (keyed SipHash of the bytes, Python's
  `hash`). Two distinct states with the same fingerprint would make the search skip one: as TLC
  does, the store reports the probability of such a collision, `distinct * (generated -
  distinct) / 2**64`, the chance that a new state was taken for a seen one.

States are stored level by level: level d holds the key of every state first reached at depth d
that is expanded, and the index of its predecessor in level d - 1. A counterexample's path is the
chain of keys; the explorer replays it forward, matching each successor's key.
"""

from __future__ import annotations

import ast
import struct
from array import array

from ...model.ir import MAX_ARRIVALS, MAX_TX
from ...model.semantics import BARRIER_FIELDS, EXPECTED, PENDING, PHASE, TX, System

STORES = ("tuple", "exact", "fingerprint")


def _code(low: int, high: int) -> str:
    for code, bits in (("b", 8), ("h", 16), ("i", 32)):
        if -(1 << (bits - 1)) <= low and high < (1 << (bits - 1)):
            return code
    return "q"


class Packer:
    """Flat state tuple -> bytes. Fields whose value leaves its static range (only possible in a
    state that breaks a rule the user ignores) fall back to a generic encoding, kept apart by
    the first byte."""

    def __init__(self, system: System):
        total = sum(system.lengths) + len(system.slots) + 1   # bounds completions and in-flight
        codes = []
        for a in range(system.n_agents):
            codes.append(_code(0, system.lengths[a]))
        for _ in system.instances:
            fields = [""] * BARRIER_FIELDS
            fields[PHASE] = _code(0, total)
            fields[PENDING] = _code(-MAX_ARRIVALS, MAX_ARRIVALS)
            fields[TX] = _code(-MAX_TX, MAX_TX)
            fields[EXPECTED] = _code(-MAX_ARRIVALS, MAX_ARRIVALS)
            codes += fields
        codes += [_code(-1, total)] * len(system.seen_pos)
        codes += [_code(0, total)] * len(system.slots)
        # hardware barrier fields after the queues: small counts and phases
        codes += ["i"] * (system.width - system.queue_end)
        self.fixed = system.queue_base
        self.queue_end = system.queue_end
        self.queues = system.queue_end - system.queue_base
        layout = struct.Struct("<B" + "".join(codes))
        self._pack = layout.pack
        self._unpack = layout.unpack_from
        self._head = layout.size
        self._small_sets = len(system.arrival_sets) < 256

    def pack(self, state: tuple) -> bytes:
        fixed = self.fixed
        try:
            head = self._pack(0, *state[:fixed], *state[self.queue_end:])
        except struct.error:
            return b"\x01" + repr(state).encode()
        if not self.queues:
            return head
        if self._small_sets:
            # one byte per queued arrival set, 0xff ends a queue
            tail = b"".join(bytes(q) + b"\xff" for q in state[fixed:self.queue_end])
        else:
            tail = b"".join(array("i", q).tobytes() + b"\xff\xff\xff\xff"
                            for q in state[fixed:self.queue_end])
        return head + tail

    def unpack(self, packed: bytes) -> tuple:
        """The state `pack` packed."""
        if packed[0] == 1:
            return ast.literal_eval(packed[1:].decode())
        values = self._unpack(packed)[1:]
        head, hw_fields = values[:self.fixed], values[self.fixed:]
        if not self.queues:
            return head + hw_fields
        tail = packed[self._head:]
        if self._small_sets:
            queues = tuple(tuple(q) for q in tail.split(b"\xff")[:-1])
        else:
            ints = array("i")
            ints.frombytes(tail)
            queues, current = [], []
            for v in ints:
                if v == -1:
                    queues.append(tuple(current))
                    current = []
                else:
                    current.append(v)
            queues = tuple(queues)
        return head + queues + hw_fields


class StateStore:
    """Seen keys plus, per breadth-first level, the keys and predecessor indices of the states
    that are expanded."""

    def __init__(self, system: System, mode: str = "tuple"):
        if mode not in STORES:
            raise ValueError(f"unknown state store {mode!r}; choose one of {', '.join(STORES)}")
        self.mode = mode
        # The frontier is kept as `packed` states and read back with `unpack` (identity for
        # the tuple store): a breadth-first level can hold a large part of the space.
        if mode == "tuple":
            self.key = self.pack = self.unpack = lambda s: s
        else:
            packer = Packer(system)
            self.pack, self.unpack = packer.pack, packer.unpack
            self.key = self.pack if mode == "exact" else (lambda s: hash(packer.pack(s)))
        self.seen: set = set()
        self.levels: list[tuple[list | array, array]] = []
        self.new_level()

    def new_level(self) -> None:
        keys = array("q") if self.mode == "fingerprint" else []
        self.levels.append((keys, array("I")))

    def __len__(self) -> int:
        return len(self.seen)

    def path(self, depth: int, index: int) -> list:
        """The keys of the states from level 1 up to entry `index` of level `depth`."""
        keys = []
        while depth > 0:
            level_keys, parents = self.levels[depth]
            keys.append(level_keys[index])
            index = parents[index]
            depth -= 1
        keys.reverse()
        return keys

    def collision_probability(self, generated: int) -> float | None:
        """TLC's estimate for a fingerprint store: distinct * (generated - distinct) / 2**64."""
        if self.mode != "fingerprint":
            return None
        distinct = len(self.seen)
        return distinct * max(generated - distinct, 0) / 2.0 ** 64

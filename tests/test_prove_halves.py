"""A ping-pong attention's barriers in halves (partition.py `role_components`): one class per
half of the query tile before the class of all of them, the Q ring whole at one slot."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("triton")

from barrierproof.checker.symbolic import prove as P  # noqa: E402
from barrierproof.loader import resolve  # noqa: E402

from conftest import EXAMPLES  # noqa: E402

ATTENTION = os.path.join(EXAMPLES, "gluon", "attention_forward.py")
HALF = ["s_ready", "s_free", "p_ready", "alpha_ready", "alpha_free", "o_ready", "o_fixed",
        "epi_ready", "epi_done"]


class _Seen(Exception):
    pass


def _first_partition(monkeypatch, name: str) -> dict[str, list[str]]:
    """The classes (name -> allocations) of the first partition `prove` builds for `name`."""
    seen = {}
    build = P._partition

    def first(*args, **kw):
        frag = build(*args, **kw)
        if frag is not None:
            seen.update({c.name: sorted(a.name for a in c.allocs) for c in frag.classes})
            raise _Seen
        return frag

    monkeypatch.setattr(P, "_partition", first)
    (target,) = resolve(f"{ATTENTION}::{name}")
    with pytest.raises(_Seen):
        P.prove_kernel(target.build())
    return seen


def test_the_attention_is_proved_half_by_half_first(monkeypatch):
    """The MMA and correction partitions serve both halves, each softmax partition one: the
    hand-off pairs joined by the roles that use them, fewest first, are the two halves' nine
    barriers (joined by the roles serving both, they would be one class of eighteen); the Q
    ring, taken once per tile at numbered slots, is one ring of `ready` and `empty`. The K/V
    ring of 3, two positions per block, is strip-mined to whole laps first (stride_split.py,
    a case per N_CTX // 128 modulo 3): its slots are numbers, each slot's `ready` and `empty`
    split into barriers of their own (partition.py `split_constant_arrays(looped=True)`) and
    a class that no role joins to a half."""
    classes = _first_partition(monkeypatch, "attention")
    concrete = sorted(v for k, v in classes.items() if k.startswith("barriers"))
    assert concrete == sorted([sorted(HALF), sorted(n + "2" for n in HALF)]
                              + [[f"empty2[{j}]", f"ready2[{j}]"] for j in range(3)])
    assert classes["ring of 2"] == ["empty", "ready"]

"""Conservation features for the candidate equalities (invariants.py `guess`): arrivals a
barrier absorbed against arrivals its roles made, as products the linear templates lack.

A barrier that completed `ph` phases of `exp` arrivals and waits for `pend` more has absorbed
`exp * ph + exp - pend` arrivals; a counter role of `size` threads whose slowest thread is at lap
`k` of a loop has made `size * k` arrivals per use of the loop plus what the threads ahead of it
(the n[L] at offsets) made. The equality "absorbed == made by every arriving role, in every
block" is linear in the features `exp * ph` and `size * k` (the products are of a constant of
the run and a counter) and in the n[L]; without them it is a sum of products no linear
equality over the plain variables states (a cluster barrier counted by the consumers of both
blocks). Candidates only: Houdini keeps what Z3 proves inductive."""

from __future__ import annotations

from typing import Callable, Sequence

import z3


def count_products(encoder, variables: Sequence, names: Sequence[str], varying: Sequence[int],
                   size_of: Callable) -> list[tuple]:
    """(term, name, column index pair or size function) for each `exp * ph` of a barrier
    instance and each `size * k` of a counter role's loop, over the varying variables; only
    where the count or the size varies with the parameters (else the product is linear in the
    counter and adds nothing to the linear templates)."""
    index = {name: i for i, name in enumerate(names)}
    moving = set(varying)
    out = []
    for inst in encoder.system.instances:
        ph, exp = index.get(f"ph[{inst.name}]"), index.get(f"exp[{inst.name}]")
        if ph in moving and exp in moving:     # a count fixed for the run: exp*ph is linear
            out.append((variables[exp] * variables[ph], f"exp*ph[{inst.name}]", ("vars", exp, ph)))
    for code in encoder.layout.codes:
        if code.role.single:
            continue
        size = size_of(code.role.name)
        if size is None or z3.is_int_value(z3.simplify(size[0])):
            continue        # a role of fixed size: size*k is linear in k
        for j in code.loop_segments:
            k = index[f"k[{code.role.name},{j}]"]
            if k in moving:
                out.append((size[0] * variables[k], f"size*k[{code.role.name},{j}]",
                            ("size", size[1], k)))
    return out


def column(states, how) -> "object":
    """The feature's value in every state (rows of `states`, a numpy array)."""
    import numpy as np
    kind, a, b = how
    if kind == "vars":
        return states[:, a] * states[:, b]
    return np.fromiter((a(row)[0] for row in states.tolist()), dtype=np.int64,
                       count=len(states)) * states[:, b]


"""A proxy fence (Pallas's `commit_smem`, Gluon's `fence_async_shared`) before an async-proxy
read of what threads stored (model/proxy_fence.py): a read the stores may reach with no fence
between is BP190 at the read, on every path the control flow allows (branches joined, a loop's
stores reaching its next iteration, Gluon's partitions side by side)."""

from barrierproof.model import primitives as K
from barrierproof.model.ir import Const, Loc, Loop, MemAlloc, MemRef, Op, Var, When, iter_ops
from barrierproof.model.proxy_fence import check_commits, commit_marker

OUT = MemRef(MemAlloc("out", "smem"))
TILE = MemRef(MemAlloc("acc", "tmem"))


def _at(line):
    return Loc("kernel.py", line)


def store(line=1, ref=OUT):
    return Op(K.WRITE, None, writes=(ref,), loc=_at(line))


def tma_store(line=3, ref=OUT):
    return Op(K.COPY_SMEM_TO_GMEM, None, reads=(ref,), loc=_at(line))


def _flagged(body) -> list[int]:
    out = check_commits(body)
    assert not [op for op in iter_ops(out) if op.name == "commit_smem"]   # markers removed
    return [op.loc.line for op in iter_ops(out) if op.kind == K.UNMODELED]


def test_a_commit_between_the_stores_and_the_tma_store_is_enough():
    assert _flagged((store(), commit_marker(_at(2)), tma_store())) == []


def test_a_tma_store_of_uncommitted_stores_is_flagged_with_the_store_line():
    out = check_commits((store(7), tma_store(9)))
    (op,) = [op for op in iter_ops(out) if op.kind == K.UNMODELED]
    assert op.loc.line == 9 and "line 7" in op.name and "commit_smem" in op.name


def test_a_commit_on_one_branch_only_does_not_cover_the_other():
    branch = When(Var("wg") == Const(0), (commit_marker(_at(2)),), ())
    assert _flagged((store(), branch, tma_store())) == [3]
    both = When(Var("wg") == Const(0), (commit_marker(_at(2)),), (commit_marker(_at(2)),))
    assert _flagged((store(), both, tma_store())) == []


def test_stores_at_the_end_of_an_iteration_reach_the_next_iterations_tma_store():
    body = (tma_store(3), store(4))
    assert _flagged((Loop("i", Const(3), body),)) == [3]
    fenced = (tma_store(3), store(4), commit_marker(_at(5)))
    assert _flagged((Loop("i", Const(3), fenced),)) == []


def test_only_shared_memory_stores_and_async_readers_count():
    assert _flagged((store(ref=TILE), tma_store(ref=TILE))) == []
    read = Op(K.READ, None, reads=(OUT,), loc=_at(3))          # a thread's own load: no proxy
    assert _flagged((store(), read)) == []
    mma = Op(K.WGMMA, None, reads=(OUT,), loc=_at(3))
    assert _flagged((store(), mma)) == [3]


def test_a_loop_or_branch_of_commits_only_leaves_nothing_behind():
    """As before commits were read: the translator emits no loop or branch without ops."""
    only = (Loop("i", Const(2), (commit_marker(_at(2)),)),
            When(Var("wg") == Const(0), (commit_marker(_at(2)),), ()))
    assert check_commits(only) == ()
    (kept,) = check_commits((When(Var("wg") == Const(0), (commit_marker(_at(2)),),
                                  (store(),)),))
    assert isinstance(kept, When) and kept.orelse == ()
    assert [op.kind for op in kept.then] == [K.WRITE]        # the other side, under `not cond`


def _partition(k, *stmts):
    return When(Var("partition") == Const(k), tuple(stmts), ())


def _flagged_concurrent(body) -> list[int]:
    out = check_commits(body, "fence_async_shared()", concurrent=True)
    return [op.loc.line for op in iter_ops(out) if op.kind == K.UNMODELED]


def test_partitions_see_each_others_unfenced_stores_whatever_their_order():
    """Gluon's partitions run side by side: the MMA partition written first in the program
    reads what a later partition stored; without that partition's fence it is flagged."""
    mma = Op(K.TCGEN05_MMA, None, reads=(OUT,), loc=_at(3))
    assert _flagged_concurrent((_partition(0, mma), _partition(1, store(7)))) == [3]
    fenced = _partition(1, store(7), commit_marker(_at(8)))
    assert _flagged_concurrent((_partition(0, mma), fenced)) == []
    # the sequential reading (Pallas's) takes the program order at its word
    assert _flagged((_partition(0, mma), _partition(1, store(7)))) == []


def test_the_message_names_the_languages_fence():
    out = check_commits((store(7), tma_store(9)), "fence_async_shared()")
    (op,) = [op for op in iter_ops(out) if op.kind == K.UNMODELED]
    assert "fence_async_shared()" in op.name and "commit_smem" not in op.name

"""A self-waited copy retired by its own loop's counted wait of a symbolic count
(checker/symbolic/periodic_retire.py): store rings that keep `stages - 1` TMA stores in flight
are proved race-free for every stage and step count; every variant, proved or not, is checked
against the explorer on a grid (a proof never where the explorer finds a violation), with the
explorer's searches inside `prove` switched off so that the verdict is the proof's own."""

import pytest

from barrierproof.checker.check import check_kernel
from prove_files import build, prove, source_file

# (wait before the write or after the store, the count kept in flight, the final wait,
#  the least stage count assumed) -> whether the prover must prove it
VARIANTS = {
    "before_stages_minus_1": ("before", "stages - 1", 0, 1, True),
    "after_stages_minus_1": ("after", "stages - 1", 0, 1, True),
    "before_stages_minus_2": ("before", "stages - 2", 0, 2, True),
    "before_stages": ("before", "stages", 0, 1, False),
    "after_stages": ("after", "stages", 0, 1, False),
    "final_wait_keeps_one": ("before", "stages - 1", 1, 1, False),
    "count_may_be_negative": ("before", "stages - 2", 0, 1, False),
}

SOURCE = "from barrierproof import protocol\n" + "".join(f'''

@protocol(symbolic=("stages", "steps"))
def {name}(k, stages=2, steps=3):
    k.threads(1, name="wg")
    k.assume(stages >= {least}, steps >= 0)
    out = k.SMEM(slots=stages)
    with k.loop(steps) as i:
        {"k.wait_smem_to_gmem(" + count + ")" if where == "before" else "pass"}
        k.write(out.at[i % stages])
        k.copy_smem_to_gmem(out.at[i % stages])
        {"k.wait_smem_to_gmem(" + count + ")" if where == "after" else "pass"}
    k.wait_smem_to_gmem({final})
''' for name, (where, count, final, least, _) in VARIANTS.items())

source = source_file(SOURCE, "store_rings.py")


def _explorer_clean(kernel, least) -> bool:
    return all(check_kernel(kernel, {"stages": s, "steps": n}).verdict == "verified"
               for s in range(least, 5) for n in range(7))


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_a_store_ring_is_proved_only_where_the_explorer_agrees(source, capsys, monkeypatch,
                                                               name):
    from barrierproof.checker.symbolic import engine
    monkeypatch.setattr(engine, "smallest_violation", lambda *a, **kw: (None, "skipped"))
    monkeypatch.setattr(engine, "explorer_net", lambda *a, **kw: (None, "skipped"))
    *_, least, expected = VARIANTS[name]
    code, report = prove(capsys, f"{source}::{name}", "--timeout", "60")
    assert (report["verdict"] == "proved") == expected, report
    if expected:
        assert _explorer_clean(build(source, name), least)
    else:
        assert report["verdict"] == "unknown", report
        if name != "count_may_be_negative":
            assert not _explorer_clean(build(source, name), least)

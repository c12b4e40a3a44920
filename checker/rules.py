"""The rule registry: every diagnostic code, its help line, what it is about and which engine
decides it.

An engine *decides* a rule when a verdict of `verified` / `proved` from it means that rule holds
in every reachable state of the model it was given. A rule is *in play* for a kernel when the
kernel contains the operations the rule is about (a named-barrier rule needs a named barrier).
An engine may only claim `verified` / `proved` when it decides every rule in play that the user
did not ignore; otherwise its verdict is `unknown`, naming the rules it left open (fail closed:
a rule missing from an engine's set is undecided by it).

>>> from barrierproof.model.samples import handoff
>>> sorted(undecided(handoff.build(), "symbolic"))
[]
>>> sorted(RULES["BP146"].decided_by)
['explore', 'tlc']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ..model import kinds, primitives as K
from ..model.init_visibility import INIT_KINDS
from ..model.ir import Kernel, has_memory_effects
from ..model.violations import CODES

ENGINES = ("explore", "tlc", "symbolic", "reference")

# What a rule is about: the kernel features that make it triggerable (None: every kernel).
NAMED, CLUSTER_BARRIER, PEER, INIT, MEMORY = ("named barriers", "the cluster barrier",
                                              "operations on a peer block's shared memory",
                                              "explicitly initialised barriers",
                                              "memory effects")
BARE_PARITY = "parity waits without a stated phase"
# The registry's classes that put the hardware barriers' rules in play: a named barrier is
# named by its id, the cluster barrier synchronizes the whole cluster.
NAMED_KINDS = kinds.kinds_where(lambda p: "bar_id" in p.needs)
CLUSTER_KINDS = kinds.kinds_where(lambda p: p.cluster_wide)

_ALL = frozenset(ENGINES)
_NOT_REFERENCE = frozenset({"explore", "tlc", "symbolic"})


@dataclass(frozen=True)
class Rule:
    code: str
    help: str
    decided_by: frozenset[str]
    about: str | None = None        # the feature that puts it in play; None: always in play
    # (feature, engines): with that feature in the kernel only those engines decide the rule
    narrowed: tuple[tuple[str, frozenset[str]], ...] = ()

    def decided(self, engine: str, present: frozenset[str]) -> bool:
        return engine in self.decided_by and all(
            engine in engines for feature, engines in self.narrowed if feature in present)

    @property
    def name(self) -> str:
        return CODES[self.code]


def _rule(code, help, decided_by=_ALL, about=None, narrowed=()) -> Rule:
    return Rule(code, help, frozenset(decided_by), about,
                tuple((f, frozenset(e)) for f, e in narrowed))


RULES: dict[str, Rule] = {r.code: r for r in (
    _rule("BP100", "every wait needs its arrivals: check num_arrivals against the arriving "
          "threads, copies and commits, and that all roles run the same number of iterations"),
    # A bare parity wait returning after different completions on two schedules (model/
    # parity.py) is a property of pairs of behaviours: TLC checks one behaviour at a time. The
    # prover holds bare parity waits to a stricter rule (each returns after the completion
    # that follows the one its thread last observed, with the parity it names); a thread's
    # waits on a barrier then return after completions fixed by induction over its program,
    # the same on every schedule, so a proof decides the behavioural rule too.
    _rule("BP101", "a barrier_wait thread must observe every completion: wait in every "
          "iteration, or make the arriving side wait for the consumer (an `empty` barrier); a "
          "parity wait must return for the same phase on every schedule: toggle the bit per "
          "lap, keep the producer within one lap of every waiter (an `empty` barrier), and let "
          "waiters that skip phases take turns (an order barrier)",
          narrowed=[(BARE_PARITY, {"explore", "symbolic", "reference"})]),
    _rule("BP102", "a thread must start waiting on a barrier before it completes twice: wait "
          "from the first iteration, or give the late thread its own barrier"),
    _rule("BP103", "wait on the last completions before the kernel ends (drain the pipeline)"),
    _rule("BP104", "every phase that receives arrivals must complete: match the arrivals to "
          "num_arrivals"),
    _rule("BP105", "wait for every TMA copy, TMA store, WGMMA and tcgen05 op before the kernel ends"),
    _rule("BP110", "declare the barrier with orders_tensor_core=True"),
    _rule("BP111", "TMA and tcgen05 arrivals need a plain plgpu.Barrier"),
    _rule("BP112", "wait on your own block's barrier instance"),
    _rule("BP120", "keep barrier indices within num_barriers and index array barriers"),
    _rule("BP121", "keep arrival counts and tx-counts within the mbarrier's range; more arrivals "
          "than the count while a phase is still open usually means a producer re-arms a slot "
          "(arrive/expect_tx) before waiting for its consumer to release it: add the missing "
          "wait on the slot's `empty` barrier"),
    _rule("BP130", "expect_tx must equal the bytes that land on the barrier"),
    _rule("BP140", "give a named barrier a thread count of whole warps (a multiple of 32) no "
          "larger than the block", _NOT_REFERENCE, NAMED),
    _rule("BP141", "every blocking participant of an aligned bar.sync phase must run the same "
          "instruction with its whole warp: sync after the branches rejoin, or use the "
          "unaligned barrier.sync (aligned=False)", _NOT_REFERENCE, NAMED),
    _rule("BP142", "use one thread count for every arrival on a named barrier id, equal to the "
          "threads that arrive in each phase", _NOT_REFERENCE, NAMED),
    _rule("BP143", "named barrier ids run from 0 to 15: reuse an id whose earlier phases are "
          "done", _NOT_REFERENCE, NAMED),
    _rule("BP144", "a thread that arrives on a named barrier must not exit while its phase "
          "waits: arrive in every iteration on every path, or sync (arrive_and_wait) where the "
          "thread must not run ahead", _NOT_REFERENCE, NAMED),
    # The explorer checks the order at compile time and TLC on the same compiled programs; the
    # prover decides it only where every arrive is directly followed by its wait
    # (checker/symbolic/cluster_sync.py), never by default.
    _rule("BP145", "each thread alternates cluster_arrive and cluster_wait, starting with the "
          "arrive", {"explore", "tlc"}, CLUSTER_BARRIER),
    # The prover decides it through a lemma on the exit rules where it applies
    # (checker/symbolic/lifetimes.py), never by default.
    _rule("BP146", "keep every block alive while a peer may reach into its shared memory: end "
          "the kernel with cluster_arrive + cluster_wait in every thread",
          {"explore", "tlc"}, PEER),
    _rule("BP147", "initialise explicit-init barriers in one thread, then fence_mbarrier_init() "
          "and a sync every user passes (syncthreads() in a block, cluster_arrive + "
          "cluster_wait across blocks) before another thread, block, copy or commit uses them",
          _NOT_REFERENCE, INIT),
    _rule("BP190", "the verdict cannot be verified while it is ignored; --ignore BP190 accepts "
          "the risk"),
    # TLC's specs state them as pairs of holders whose accesses conflict (model/race_pairs.py,
    # MBarrier.tla's Racing); the reference states them (model/reference/memory.py) except
    # regions indexed by the lane, which `uncovered` names.
    _rule("BP200", "order the two accesses: wait on the barrier the writer's completion arrives "
          "on before reading, and release a slot (arrive on its `empty` barrier, or "
          "tcgen05_commit_arrive after an MMA) only after its last use",
          _ALL, MEMORY),
    _rule("BP201", "order the tensor-memory accesses: wait on the MMA's barrier before reading "
          "the accumulator, double-buffer it, and wait for tcgen05.st before arriving",
          _ALL, MEMORY),
)}

HELP = {code: rule.help for code, rule in RULES.items()}

# Where the documentation site is published (mkdocs.yml's site_url): docs/rules/CODE.md is the
# page of each code, which SARIF's helpUri and the text report's help line point at.
DOCS_URL = "https://barrierproof.readthedocs.io/en/latest/"


def docs_url(code: str) -> str | None:
    """The page of a diagnostic code, None for what has no page (an input error without code).

    >>> docs_url("BP100")
    'https://barrierproof.readthedocs.io/en/latest/rules/BP100/'
    """
    return f"{DOCS_URL}rules/{code}/" if code in RULES else None


def help_line(code: str, help: str) -> str:
    """A finding's help line with its docs page, as the text reports print it."""
    url = docs_url(code)
    return f"{help} (docs: {url})" if url else help

missing = set(CODES) ^ set(RULES)
if missing:     # a code without a row, or a row without a code: refuse to run at all
    raise ImportError(f"the rule registry and model/violations.py CODES disagree on "
                      f"{', '.join(sorted(missing))}")


def features(kernel: Kernel) -> frozenset[str]:
    """The features of `kernel` that put rules in play, read off its operations: conservative
    (a feature present in any operation counts, whatever the parameters)."""
    found = set()
    for op in kernel.ops():
        if op.kind in NAMED_KINDS:
            found.add(NAMED)
        elif op.kind in CLUSTER_KINDS:
            found.add(CLUSTER_BARRIER)
        elif op.kind in INIT_KINDS:
            found.add(INIT)
        ref = op.barrier
        if op.kind == K.WAIT_PARITY and op.phase is None:
            found.add(BARE_PARITY)
        if ref is not None:
            if ref.block is not None or ref.alloc.cluster or op.collective_axes \
                    or op.kind == K.ASYNC_STORE_SMEM:
                found.add(PEER)
            if ref.alloc.explicit_init:
                found.add(INIT)
    if has_memory_effects(kernel):
        found.add(MEMORY)
    return frozenset(found)


def in_play(kernel: Kernel) -> frozenset[str]:
    """The codes `kernel` can trigger."""
    present = features(kernel)
    return frozenset(code for code, rule in RULES.items()
                     if rule.about is None or rule.about in present)


def undecided(kernel: Kernel, engine: str, ignored: Iterable[str] = (),
              also_decided: Iterable[str] = ()) -> frozenset[str]:
    """Codes in play for `kernel`, not ignored, that `engine` does not decide (`also_decided`:
    codes the engine decided for this kernel by an argument of its own, e.g. a lemma)."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}")
    present = features(kernel)
    return frozenset(code for code in in_play(kernel)
                     if not RULES[code].decided(engine, present)
                     and code not in set(ignored) and code not in set(also_decided))


def describe(codes: Iterable[str], engine: str) -> str:
    """`BP146 (peer-exited)` style list for a verdict's reason."""
    def about(rule: Rule) -> str:
        narrowed = [f for f, engines in rule.narrowed if engine not in engines]
        return ", ".join(narrowed) or rule.about or "every kernel"
    return ", ".join(f"{c} ({CODES[c]}: {about(RULES[c])})" for c in sorted(codes))


def coverage_table() -> list[tuple[str, str, dict[str, bool]]]:
    """(code, name, {engine: decides}) for every rule, for the docs and the README."""
    return [(code, rule.name, {e: e in rule.decided_by for e in ENGINES})
            for code, rule in sorted(RULES.items())]


def coverage_markdown() -> str:
    """The table of docs/diagnostics.md "Which engine decides each rule" (tests compare)."""
    def cell(rule: Rule, engine: str) -> str:
        if engine not in rule.decided_by:
            return "no"
        left = [feature for feature, engines in rule.narrowed if engine not in engines]
        return f"yes, but not with {', '.join(left)}" if left else "yes"
    lines = ["| code | name | " + " | ".join(ENGINES) + " |",
             "| --- | --- | " + " | ".join("---" for _ in ENGINES) + " |"]
    lines += [f"| {code} | {rule.name} | " + " | ".join(cell(rule, e) for e in ENGINES) + " |"
              for code, rule in sorted(RULES.items())]
    return "\n".join(lines) + "\n"


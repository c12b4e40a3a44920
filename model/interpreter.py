"""The concrete interpreter: run a System under a schedule, step by step, on the semantics.

Every counterexample an engine reports is replayed here before it is printed: the schedule must be
enabled at every step, and the run must end in the violation the engine claimed.

>>> from barrierproof.model.samples import handoff
>>> from barrierproof.model.semantics import System
>>> run = replay(System(handoff.build()), [0, 1])
>>> run.outcome, [s.text for s in run.trace().steps]
('terminated', ['barrier_arrive(bar)', 'barrier_wait(bar)'])
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field
from typing import Sequence

from .parity import aliasing
from .semantics import System
from .violations import Violation, primary


class ReplayError(Exception):
    """A schedule that the semantics does not allow: an engine produced a wrong trace."""


@dataclass
class Step:
    index: int
    action: int
    agent: str
    agent_kind: str          # thread, warp, tma, async, tcgen05
    text: str
    location: str | None
    completions: list[str] = field(default_factory=list)
    # barriers whose state this step changed: name -> phase/pending/expected/tx
    barriers: dict[str, dict] = field(default_factory=dict)


@dataclass
class Trace:
    """A schedule with what it did; serializes to JSON for `barrierproof replay`."""

    protocol: str
    source: str | None               # "path::name" to rebuild the model, when known
    params: dict[str, int]
    grid_position: dict[str, int]
    agents: list[str]
    actions: list[int]
    steps: list[Step]
    outcome: str                     # terminated, violation, deadlock, running
    violation: dict | None = None    # code, name, message, details
    final_barriers: dict[str, dict] = field(default_factory=dict)
    initial_barriers: dict[str, dict] = field(default_factory=dict)
    # Parity aliasing (model/parity.py) takes two schedules: the other one, as a trace of its own
    witness: dict | None = None

    def to_json(self) -> dict:
        return asdict(self)

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2)

    @classmethod
    def from_json(cls, data: dict) -> "Trace":
        steps = [Step(**s) for s in data.get("steps", [])]
        fields = {k: data[k] for k in ("protocol", "source", "params", "grid_position", "agents",
                                       "actions", "outcome")}
        witness = data.get("witness")
        if witness is not None and not (
                isinstance(witness, dict) and isinstance(witness.get("actions"), list)
                and all(type(a) is int for a in witness["actions"])):
            raise TypeError("its witness must be an object whose actions are a list of integers")
        return cls(steps=steps, violation=data.get("violation"),
                   final_barriers=data.get("final_barriers", {}),
                   initial_barriers=data.get("initial_barriers", {}),
                   witness=data.get("witness"), **fields)

    @property
    def witness_actions(self) -> list[int] | None:
        return None if self.witness is None else list(self.witness["actions"])


@dataclass
class Run:
    system: System
    states: list[tuple]
    actions: list[int]
    events: list[list[tuple[int, int]]]
    outcome: str
    violation: Violation | None
    witness: "Run | None" = None       # parity aliasing: the run of the other schedule

    @property
    def final(self) -> tuple:
        return self.states[-1]

    def trace(self, source: str | None = None) -> Trace:
        sys_ = self.system
        steps = []
        for i, action in enumerate(self.actions):
            before, after = self.states[i], self.states[i + 1]
            agent, kind = sys_.action_name(action)
            text, loc = sys_.action_text(before, action)
            changed = {}
            for inst, instance in enumerate(sys_.instances):
                if sys_.barrier(before, inst) != sys_.barrier(after, inst):
                    changed[instance.name] = barrier_view(sys_, after, inst)
            # an event names an mbarrier instance by index, a hardware barrier by name
            completions = [f"{inst if isinstance(inst, str) else sys_.instances[inst].name} "
                           f"completes phase {n}" for inst, n in self.events[i]]
            steps.append(Step(i + 1, action, agent, kind, text, str(loc) if loc else None,
                              completions, changed))
        violation = None
        if self.violation is not None:
            v = self.violation
            violation = {"code": v.code, "name": v.name, "message": v.message,
                         "details": list(v.details),
                         "related": [{"location": str(loc), "message": text}
                                     for text, loc in v.related],
                         "location": str(sys_.location(v))}
        final = {inst.name: barrier_view(sys_, self.final, i)
                 for i, inst in enumerate(sys_.instances)}
        initial = {inst.name: barrier_view(sys_, self.states[0], i)
                   for i, inst in enumerate(sys_.instances)}
        witness = self.witness.trace(source).to_json() if self.witness is not None else None
        return Trace(sys_.kernel.name, source, dict(sys_.params), dict(sys_.grid_position),
                     [a.name for a in sys_.agents], list(self.actions), steps, self.outcome,
                     violation, final, initial, witness)


def barrier_view(system: System, state: tuple, inst: int) -> dict:
    phase, pending, tx, expected = system.barrier(state, inst)
    view = {"phase": phase, "arrived": expected - pending, "expected": expected, "tx": tx}
    in_flight = system.in_flight(state, inst)
    if in_flight:
        view["in_flight"] = in_flight
    return view


def _settle(system: System, state: tuple, violation: Violation | None,
            ignore: frozenset[str] = frozenset(), tolerated=None) -> tuple[str, Violation | None]:
    """Classify where a run stands after its last step; `ignore`d codes do not count, and a
    run whose every broken rule is `tolerated` (a suppressed finding) ends "suppressed"."""
    def shown(v: Violation) -> bool:
        return tolerated is None or not tolerated(v)
    if violation is not None and violation.code not in ignore:
        return ("violation", violation) if shown(violation) else ("suppressed", None)
    found = [v for v in system.state_violations(state) if v.code not in ignore]
    if found:
        left = [v for v in found if shown(v)]
        return ("violation", primary(left)) if left else ("suppressed", None)
    if system.is_done(state):
        return "terminated", None
    if not any(system.enabled(state, a) for a in range(system.n_actions)):
        stuck = system.deadlock(state)
        return "deadlock", None if stuck.code in ignore else stuck
    return "running", None


def replay(system: System, actions: Sequence[int], ignore: frozenset[str] = frozenset(),
           witness: Sequence[int] | None = None, tolerated=None) -> Run:
    """Execute `actions` in order; each must be enabled. A run that broke a rule (other than the
    `ignore`d ones, which an engine was told to pass over) must end there; at its end a
    `tolerated` violation (a suppressed finding, model/violations.py) is not the one it shows,
    and mid-run it is a broken rule like any other (a search does not go past it). With a `witness`
    schedule the claim is parity aliasing (model/parity.py): both runs end with one agent's
    step off the same bare parity wait, after different completions."""
    if witness is not None:
        run, other = replay(system, actions, ignore), replay(system, witness, ignore)
        violation = aliasing(system, run.states, other.states)
        if violation is None:
            raise ReplayError("the two schedules do not end with one bare parity wait "
                              "returning after two different completions")
        if tolerated is not None and tolerated(violation):
            raise ReplayError("the two schedules show a parity aliasing that is suppressed")
        steps = [" ".join(system.action_text(st, a)[0].split()) for st, a in
                 zip(other.states, other.actions)]
        names = [system.action_name(a)[0] for a in other.actions]
        violation.details.append("the other schedule: " + "; ".join(
            f"{n}: {t}" for n, t in zip(names, steps)))
        run.outcome, run.violation, run.witness = "violation", violation, other
        return run
    state = system.initial_state()
    states, events, done = [state], [], []
    violation = None
    for i, action in enumerate(actions):
        if not 0 <= action < system.n_actions or not system.enabled(state, action):
            name = system.action_name(action)[0] if 0 <= action < system.n_actions else action
            raise ReplayError(f"step {i + 1}: {name} cannot move in this state")
        if (violation is not None and violation.code not in ignore) or any(
                v.code not in ignore for v in system.state_violations(state)):
            raise ReplayError(f"step {i + 1}: the run already broke a rule")
        step_events: list = []
        state, violation = system.step(state, action, step_events)
        states.append(state)
        events.append(step_events)
        done.append(action)
    outcome, violation = _settle(system, state, violation, ignore, tolerated)
    return Run(system, states, done, events, outcome, violation)


def random_run(system: System, seed: int = 0, max_steps: int = 100_000) -> Run:
    """One random schedule, until the kernel ends, deadlocks or breaks a rule."""
    rng = random.Random(seed)
    state = system.initial_state()
    states, actions, events = [state], [], []
    violation = None
    for _ in range(max_steps):
        if system.state_violations(state):
            break
        enabled = [a for a in range(system.n_actions) if system.enabled(state, a)]
        if not enabled:
            break
        action = rng.choice(enabled)
        step_events: list = []
        state, violation = system.step(state, action, step_events)
        states.append(state)
        actions.append(action)
        events.append(step_events)
        if violation is not None:
            break
    outcome, violation = _settle(system, state, violation)
    return Run(system, states, actions, events, outcome, violation)

"""mbarrier init visibility for barriers declared explicit_init (PTX mbarrier.init,
fence.mbarrier_init, fence.proxy.async, and the barrier phases that publish an init)."""

from __future__ import annotations

from ..ir import ModelError
from .machine import Action, Finding, Machine, Thread


def single_inits(threads: dict[str, Thread]) -> None:
    """Each instance is initialised at most once: a second mbarrier.init needs an
    mbarrier.inval first, which these rules do not state (an input the reference refuses)."""
    seen: dict[str, Action] = {}
    for thread in threads.values():
        for action in thread.actions:
            if action.kind == "mbarrier_init":
                bar = action.targets[0]
                if bar in seen:
                    raise ModelError(f"{bar} is initialised more than once", loc=action.loc)
                seen[bar] = action


class RulesInits:
    """Who sees which init, and BP147 (a mixin of Rules)."""

    def publish(self, m: Machine, agent: str, key, phase: int, release: bool) -> None:
        """An arrival on a hardware barrier phase publishes the inits the thread sees (a relaxed
        cluster arrive: only those it released with fence.mbarrier_init) to the threads that
        wait for that phase."""
        if not self.explicit:
            return
        mine = m.sees.get(agent, frozenset()) if release else m.released.get(agent, frozenset())
        if mine:
            m.published[(key, phase)] = m.published.get((key, phase), frozenset()) | mine

    def acquire(self, m: Machine, agent: str, key, phase: int) -> None:
        got = m.published.get((key, phase))
        if got:
            m.sees[agent] = m.sees.get(agent, frozenset()) | got

    def init_effect(self, m: Machine, agent: str, action: Action) -> None:
        mine = m.sees.get(agent, frozenset())
        if action.kind == "mbarrier_init":
            bar = action.targets[0]
            b = m.barriers[bar]
            b.phase, b.pending, b.tx = 0, b.expected, 0
            m.sees[agent] = mine | {bar}
        elif action.kind == "fence_mbarrier_init":
            m.released[agent] = m.released.get(agent, frozenset()) | mine
            m.async_sees = m.async_sees | mine
        else:                                   # fence.proxy.async: to the async proxy only
            m.async_sees = m.async_sees | mine

    def init_not_visible(self, m: Machine) -> list[Finding]:
        """BP147: a thread at an operation on an explicit_init barrier whose init it does not
        see, or whose asynchronous arrival (a copy's landing, a tcgen05 commit) would reach a
        barrier the async proxy does not see initialised."""
        if not self.explicit:
            return []
        out = []
        for name, thread in m.threads.items():
            action = thread.next()
            if action is None or action.kind in ("mbarrier_init", "hw_arrive", "hw_wait") or \
                    action.kind.startswith("sem_"):
                continue
            by_proxy = [bar for _, bar, _ in action.landings] + \
                list(action.tcgen05_targets or ())
            used = list(action.targets) + [action.wait_on] + by_proxy
            hidden = [b for b in used if b in self.explicit
                      and b not in m.sees.get(name, frozenset())]
            if hidden:
                out.append(Finding("BP147", f"{name} is at {action.text}, which uses "
                                   f"{hidden[0]} before its init is visible to it", action.loc))
                continue
            hidden = [b for b in by_proxy if b in self.explicit and b not in m.async_sees]
            if hidden:
                out.append(Finding("BP147", f"{name} is at {action.text}: its asynchronous "
                                   f"arrival reaches {hidden[0]}, whose init the async proxy "
                                   "does not see", action.loc))
        return out

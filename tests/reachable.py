"""Every reachable state of a System, past violations too (so every holder of live accesses
gets to be live): the race tests compare rules state by state on it."""


def reachable(system, limit=200_000):
    start = system.initial_state()
    seen, todo = {start}, [start]
    while todo:
        state = todo.pop()
        yield state
        for action in range(system.n_actions):
            if system.enabled(state, action):
                nxt = system.step(state, action)[0]
                if nxt not in seen and len(seen) < limit:
                    seen.add(nxt)
                    todo.append(nxt)

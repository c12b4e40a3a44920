"""Generated malformed protocols and inputs against the gate: no traceback, no hang past the
limit, and never exit 0 on a protocol that is refuted.

Every generated protocol lets thread 1 wait on a barrier no one arrives at, behind a tangle of
names (axes, loops, parameters spelled alike), conditions (symbolic or Python values), hostile
exceptions, sizes and names. Whatever the tangle, the verdict is a deadlock (exit 1), an input
error (3) or a limit (2): exit 0 would be a false pass. Runs in-process, a few dozen cases per
test (well under a minute); BARRIERPROOF_FUZZ_EXAMPLES=N draws N per test. One more test writes
the distinct protocols among 3,000 of the same grammar (a seeded walk: about 1,500) into one
directory and checks it with one `barrierproof check DIR`, as a user would: no traceback, every
file accounted for, none verified (about 45 s; BARRIERPROOF_FUZZ_BATCH=N sets the walk's length).
"""

import contextlib
import io
import itertools
import json
import os
import random
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from barrierproof.cli import main

EXAMPLES = int(os.environ.get("BARRIERPROOF_FUZZ_EXAMPLES", "0")) or None
FUZZ = settings(max_examples=EXAMPLES or 30, deadline=None, derandomize=EXAMPLES is None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
                database=None)
# Seconds a case may take: the limits given to it plus the watchdog's grace and start-up.
LIMIT = 5
SLACK = 20
_files = itertools.count()

NAMES = ["thread", "wg", "warp", "lane", "i", "x", "y", "rounds", "n"]
CONDITIONS = ["k.thread == 1", "k.thread == 1", "k.thread >= 1", "k.thread is one", "True",
              "one == 1", "1", "k.thread == one"]
HOSTILE = [
    "",
    "raise Hostile()",
    "raise Mine('mine')",
    "raise GeneratorExit()",
    "raise RecursionError()",
    "raise MemoryError()",
    "deep = k.thread\n    for _ in range(4000):\n        deep = deep + 1",
    "k.Barrier(num_arrivals=1, num_barriers=2**40)",
    "k.Barrier(num_arrivals=0)",
    "k.Barrier(num_arrivals=2**70)",
    "k.warps(0)",
    "k.assume(True)",
    "import sys\n    sys.exit(3)",
]
PROTOCOL_NAMES = [None, "42", "''", "'a\\ud800b'", "'x\\ufffey'", "'../../up'", "'[bold]'"]


class Choices:
    """The generator's choices, made by hypothesis (`draw`) or by a seeded random walk."""

    def __init__(self, draw=None, rng: random.Random | None = None):
        self.draw, self.rng = draw, rng

    def one(self, options):
        return self.draw(st.sampled_from(options)) if self.draw else self.rng.choice(options)

    def flag(self) -> bool:
        return self.draw(st.booleans()) if self.draw else self.rng.random() < 0.5

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi)) if self.draw else self.rng.randint(lo, hi)

    def some(self, options, lo: int, hi: int, unique: bool) -> list:
        if self.draw:
            return self.draw(st.lists(st.sampled_from(options), min_size=lo, max_size=hi,
                                      unique=unique))
        n = self.rng.randint(lo, hi)
        return self.rng.sample(options, n) if unique else \
            [self.rng.choice(options) for _ in range(n)]


def protocol_text(pick: "Choices") -> str:
    """A protocol file whose thread 1 waits forever, under generated names and extras."""
    spelled = pick.one(["as", "name="])
    # Half the cases plain (a deadlock to find), half with hostile twists.
    plain = pick.flag()
    if plain:
        axis = pick.one(["thread", "wg"])
        loop = pick.one(["i", None])
        params = pick.one([[], ["rounds"]])
    else:
        axis, loop, *params = pick.some(NAMES, 2, 4, unique=pick.flag())
        loop = None if loop == "n" else loop
    grid = None if plain else pick.one([None, *NAMES])
    cluster = None if plain else pick.one([None, *NAMES])
    cond = "k.thread == 1" if plain else pick.one(CONDITIONS)
    extra = "" if plain else pick.one(HOSTILE)
    name = None if plain else pick.one(PROTOCOL_NAMES)
    threads = pick.integer(2, 3)
    trip = pick.integer(1, 3)
    signature = "".join(f", {p}=1" for p in params)
    decorator = "@protocol" if name is None else f"@protocol(name={name})"
    lines = [f"{decorator}", f"def p(k{signature}):", f"    k.threads({threads}, name={axis!r})"]
    if grid:
        lines.append(f"    k.grid({grid}=1)")
    if cluster and cluster != grid:
        lines.append(f"    k.cluster({cluster}=1)")
    if extra:
        lines.append(f"    {extra}")
    lines.append("    b = k.Barrier(num_arrivals=1)")
    indent = "    "
    if loop is not None:
        head = f"with k.loop({trip}) as {loop}:" if spelled == "as" else \
            f"with k.loop({trip}, name={loop!r}):"
        lines.append(f"    {head}")
        indent += "    "
    lines.append(f"{indent}with k.when({cond}):")
    lines.append(f"{indent}    k.barrier_wait(b)")
    return "\n".join([
        "from barrierproof import protocol",
        "one = 1",
        "class Hostile(Exception):",
        "    def __str__(self):",
        "        raise ValueError('no message')",
        "class Mine(BaseException):",
        "    pass",
        "",
        *lines, ""])


@st.composite
def protocols(draw) -> str:
    return protocol_text(Choices(draw=draw))


def batch(n: int, seed: int) -> list[str]:
    """The distinct protocols among `n` of the same grammar from a seeded random walk: thousands
    of cases at the cost of one command, not one hypothesis example each (the walk repeats the
    plain cases often; a repeat would check the same text again)."""
    rng = random.Random(seed)
    return list(dict.fromkeys(protocol_text(Choices(rng=rng)) for _ in range(n)))


def call(argv) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    start = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exit_:        # argparse's usage errors
            code = exit_.code
    assert time.monotonic() - start < LIMIT + SLACK, argv
    text = out.getvalue() + err.getvalue()
    assert "Traceback" not in text, text
    assert code in (0, 1, 2, 3), (code, text)
    return code, text


@FUZZ
@given(protocols(), st.sampled_from(["check", "prove"]))
def test_a_refuted_protocol_never_passes(tmp_path_factory, text, command):
    root = tmp_path_factory.getbasetemp()
    path = root / f"fuzz_{next(_files)}.py"       # a new file each time: imports are cached
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    code, out = call([command, str(path), "--no-cache", "--no-config", "--jobs", "1",
                      "--timeout", str(LIMIT), "--build-timeout", str(LIMIT),
                      "--format", "json"])
    event(f"exit {code}")
    assert code != 0, (text, out)


NUMBERS = st.one_of(st.integers(-5, 3), st.sampled_from(["nan", "inf", "-inf", "1e400", "0x10",
                                                         "", "1.5", "abc", "99999999999999"]))


@FUZZ
@given(st.sampled_from(["--jobs", "--build-timeout", "--timeout", "--max-states",
                        "--max-depth", "--max-memory"]), NUMBERS)
def test_numeric_flags_are_errors_or_limits(tmp_path_factory, flag, value):
    root = tmp_path_factory.getbasetemp()
    path = root / f"fuzz_{next(_files)}.py"
    path.write_text("from barrierproof import protocol\n@protocol\ndef p(k):\n"
                    "    k.threads(2)\n    b = k.Barrier(num_arrivals=1)\n"
                    "    with k.when(k.thread == 1):\n        k.barrier_wait(b)\n")
    code, out = call(["check", str(path), "--no-cache", "--no-config", "--jobs", "1",
                      flag, str(value)])
    assert code != 0, out          # the protocol deadlocks: only a limit or an error otherwise


EXPECTS = st.recursive(
    st.one_of(st.none(), st.integers(), st.text(max_size=8), st.booleans()),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.one_of(st.text(max_size=6), st.integers()),
                                            inner, max_size=3)),
    max_leaves=6)


@FUZZ
@given(EXPECTS)
def test_any_expect_table_is_read_or_refused(tmp_path_factory, expect):
    root = tmp_path_factory.getbasetemp()
    path = root / f"fuzz_{next(_files)}.py"
    path.write_text(f"EXPECT = {expect!r}\n", encoding="utf-8", errors="surrogatepass")
    call(["check", str(path), "--no-cache", "--no-config", "--jobs", "1"])


# The batch: the distinct ones of BATCH generated protocols in one directory, checked by one
# `barrierproof check DIR` as a user runs it (every file imported and built in a child of its
# own). None may pass.
BATCH = int(os.environ.get("BARRIERPROOF_FUZZ_BATCH", "3000"))


@pytest.mark.slow
def test_thousands_of_refuted_protocols_in_one_run_never_pass(tmp_path):
    texts = batch(BATCH, seed=2026)
    for n, text in enumerate(texts):
        (tmp_path / f"fuzz_{n}.py").write_text(text, encoding="utf-8", errors="surrogatepass")
    run = subprocess.run([sys.executable, "-m", "barrierproof", "check", str(tmp_path),
                          "--no-cache", "--no-config", "--jobs", "2", "--timeout", str(LIMIT),
                          "--build-timeout", str(LIMIT), "--format", "json"],
                         capture_output=True, text=True, timeout=1800, cwd=tmp_path)
    assert "Traceback" not in run.stdout + run.stderr, run.stderr[-3000:]
    assert run.returncode in (1, 2, 3), (run.returncode, run.stderr[-3000:])
    verdicts = json.loads(run.stdout)
    passed = [v for v in verdicts if v["verdict"] in ("verified", "proved")]
    assert not passed, passed[:3]
    # every file is accounted for: a verdict of its own, or its import error
    seen = {os.path.basename(str(v.get("source") or v.get("name") or "")).partition("::")[0]
            for v in verdicts}
    missing = [f"fuzz_{n}.py" for n in range(len(texts)) if f"fuzz_{n}.py" not in seen]
    assert not missing, (missing[:5], verdicts[:2])

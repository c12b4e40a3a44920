"""Generated malformed protocols and inputs against the gate: no traceback, no hang past the
limit, and never exit 0 on a protocol that is refuted.

Every generated protocol lets thread 1 wait on a barrier no one arrives at, behind a tangle of
names (axes, loops, parameters spelled alike), conditions (symbolic or Python values), hostile
exceptions, sizes and names. Whatever the tangle, the verdict is a deadlock (exit 1), an input
error (3) or a limit (2): exit 0 would be a false pass. Runs in-process, a few dozen cases per
test (well under a minute); BARRIERPROOF_FUZZ_EXAMPLES=N draws N per test.
"""

import contextlib
import io
import itertools
import os
import time

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


@st.composite
def protocols(draw) -> str:
    """A protocol file whose thread 1 waits forever, under generated names and extras."""
    spelled = draw(st.sampled_from(["as", "name="]))
    # Half the cases plain (a deadlock to find), half with hostile twists.
    plain = draw(st.booleans())
    if plain:
        axis = draw(st.sampled_from(["thread", "wg"]))
        loop = draw(st.sampled_from(["i", None]))
        params = draw(st.sampled_from([[], ["rounds"]]))
    else:
        axis, loop, *params = draw(st.lists(st.sampled_from(NAMES), min_size=2, max_size=4,
                                            unique=draw(st.booleans())))
        loop = None if loop == "n" else loop
    grid = None if plain else draw(st.sampled_from([None, *NAMES]))
    cluster = None if plain else draw(st.sampled_from([None, *NAMES]))
    cond = "k.thread == 1" if plain else draw(st.sampled_from(CONDITIONS))
    extra = "" if plain else draw(st.sampled_from(HOSTILE))
    name = None if plain else draw(st.sampled_from(PROTOCOL_NAMES))
    threads = draw(st.integers(2, 3))
    trip = draw(st.integers(1, 3))
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

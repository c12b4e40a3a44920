"""The CI gate: [tool.barrierproof] configuration under the flags, the proof cache (never stale),
the pytest helper, progress and Ctrl-C, and the adoption files (pre-commit hook, GitHub Actions
workflow) exercised the way a user's repository would use them."""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from barrierproof.cache import Cache, cache_key, canonical, verdict_from_json
from barrierproof.checker.check import Options, check_kernel
from barrierproof.cli import main
from barrierproof.loader import resolve
from barrierproof.testing import assert_deadlock_free, assert_violation, check

from conftest import EXAMPLES, ROOT
from test_reports import IN_CI, need, run_on_a_terminal

GOOD = '''
from barrierproof import protocol

@protocol
def handoff(k, rounds=1):
    k.threads(2, name="wg")
    ready = k.Barrier(num_arrivals=1)
    done = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        with k.loop(rounds):
            k.barrier_arrive(ready)
            k.barrier_wait(done)
    with k.otherwise():
        with k.loop(rounds):
            k.barrier_wait(ready)
            k.barrier_arrive(done)
'''
BAD = GOOD.replace("ready = k.Barrier(num_arrivals=1)", "ready = k.Barrier(num_arrivals=2)")


def project(tmp_path, config: str = "", files=None):
    """A user's repository: pyproject.toml with [tool.barrierproof], protocols/ of DSL files."""
    (tmp_path / "protocols").mkdir(parents=True, exist_ok=True)
    for name, text in (files or {"ring.py": GOOD}).items():
        (tmp_path / "protocols" / name).write_text(text)
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "kernels"\nversion = "0"\n\n[tool.barrierproof]\n'
        + textwrap.dedent(config))
    (tmp_path / ".git").mkdir(exist_ok=True)      # the search for a config stops here
    return tmp_path


def cli(*args, cwd, env=None, timeout=300):
    proc = subprocess.run([sys.executable, "-m", "barrierproof", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=timeout, env=env)
    return proc.returncode, proc.stdout, proc.stderr


# -- configuration -----------------------------------------------------------------------------

def test_config_supplies_paths_params_and_limits(tmp_path):
    root = project(tmp_path, 'paths = ["protocols"]\nparams = { rounds = 3 }\n'
                             'max-states = 1000\n')
    code, out, err = cli("check", "--format", "json", cwd=root)
    assert code == 0, err
    [v] = json.loads(out)
    assert v["verdict"] == "verified" and v["params"] == {"rounds": 3}
    assert v["source"] == "protocols/ring.py::handoff"
    # run from a subdirectory: the same file, paths relative to it
    code, out, err = cli("check", "--format", "json", cwd=root / "protocols")
    assert code == 0, err
    assert json.loads(out)[0]["source"] == "ring.py::handoff"


def test_flags_override_the_config(tmp_path):
    root = project(tmp_path, 'paths = ["protocols"]\nparams = { rounds = 3 }\n'
                             'max-states = 2\n', {"ring.py": GOOD})
    code, out, _ = cli("check", "--format", "json", "--no-cache", cwd=root)
    assert code == 2 and "state limit 2" in json.loads(out)[0]["coverage"]
    code, out, _ = cli("check", "--format", "json", "--max-states", "1000",
                       "--param", "rounds=2", cwd=root)
    assert code == 0 and json.loads(out)[0]["params"] == {"rounds": 2}
    code, _, _ = cli("check", "--no-config", cwd=root)        # no paths without the file
    assert code == 3


def test_select_and_ignore_from_the_config(tmp_path):
    files = {"ring.py": BAD}
    root = project(tmp_path, 'paths = ["protocols"]\nignore = ["BP100"]\n', files)
    code, out, _ = cli("check", "--format", "json", cwd=root)
    assert code == 0 and json.loads(out)[0]["verdict"] == "verified"
    code, out, _ = cli("check", "--format", "json", "--ignore", "BP104", cwd=root)
    assert code == 1 and json.loads(out)[0]["diagnostics"][0]["code"] == "BP100"
    root2 = project(tmp_path / "b", 'paths = ["protocols"]\nselect = "BP101,BP102"\n', files)
    code, out, _ = cli("check", "--format", "json", cwd=root2)
    assert code == 0


def test_config_params_apply_only_where_they_exist(tmp_path):
    plain = GOOD.replace("def handoff(k, rounds=1):", "def plain(k):").replace("rounds", "1")
    root = project(tmp_path, 'paths = ["protocols"]\nparams = { rounds = 2 }\n',
                   {"ring.py": GOOD, "plain.py": plain})
    code, out, err = cli("check", "--format", "json", cwd=root)
    assert code == 0, err
    assert [v["params"] for v in json.loads(out)] == [{}, {"rounds": 2}]
    code, out, err = cli("check", "protocols/plain.py", cwd=root)   # a subset: still fine
    assert code == 0, err
    code, out, err = cli("check", "protocols/plain.py", "--param", "rounds=2", cwd=root)
    assert code == 3 and "no protocol has parameter(s) rounds" in err


@pytest.mark.parametrize("config, needle", [
    ('pahts = ["x"]\n', "unknown key 'pahts'"),
    ('params = { rounds = "3" }\n', "params must be a table of integers"),
    ('max-states = -1\n', "max-states must be an integer >= 1"),
    ('timeout = nan\n', "timeout must be a positive number of seconds, not nan"),
    ('engine = "nope"\n', "engine must be explore, tlc or symbolic"),
    ('select = ["BP100", "BP10O"]\n', "unknown diagnostic code 'BP10O' (hint: did you mean"),
    ('ignore = "BP999"\n', "unknown diagnostic code 'BP999'"),
    ('paths = [\n', "not valid TOML"),
])
def test_a_bad_config_is_an_input_error(tmp_path, config, needle):
    root = project(tmp_path, config)
    code, out, err = cli("check", "protocols", cwd=root)
    assert code == 3 and needle in err and "pyproject.toml" in err, err
    assert "Traceback" not in err and err.count("\n") == 1, err
    # the line the user must edit: the key's own line (6), never line 0
    assert "pyproject.toml:6: " in err, err


def test_explicit_config_file(tmp_path):
    root = project(tmp_path, 'paths = ["protocols"]\n')
    other = tmp_path / "ci.toml"
    other.write_text('[tool.barrierproof]\nparams = { rounds = 4 }\npaths = ["protocols"]\n')
    code, out, _ = cli("check", "--config", str(other), "--format", "json", cwd=root)
    assert code == 0 and json.loads(out)[0]["params"] == {"rounds": 4}


# -- the proof cache ---------------------------------------------------------------------------

def test_cache_hits_when_nothing_changed_and_misses_on_any_change(tmp_path):
    root = project(tmp_path, 'paths = ["protocols"]\n')
    cache_dir = root / ".barrierproof_cache"
    code, out1, err = cli("check", "--format", "json", cwd=root)
    assert code == 0 and "from the cache" not in err
    assert (cache_dir / ".gitignore").exists()            # never committed by accident
    code, out2, err = cli("check", "--format", "json", cwd=root)
    assert code == 0 and "1 of 1 verdicts from the cache" in err
    assert json.loads(out1) == json.loads(out2)           # the very same verdict
    # A changed model is checked again, and the new verdict is the right one.
    (root / "protocols" / "ring.py").write_text(BAD)
    code, out3, err = cli("check", "--format", "json", cwd=root)
    assert code == 1 and "from the cache" not in err
    assert json.loads(out3)[0]["diagnostics"][0]["code"] == "BP100"
    # Other parameters, other options: other questions.
    code, _, err = cli("check", "--param", "rounds=2", cwd=root)
    assert "from the cache" not in err
    code, _, err = cli("check", "--no-reduction", cwd=root)
    assert "from the cache" not in err
    # --no-cache neither reads nor writes.
    shutil.rmtree(cache_dir)
    code, _, err = cli("check", "--no-cache", cwd=root)
    assert code == 1 and not cache_dir.exists()


def test_cache_key_covers_lines_params_options_and_engine():
    target = resolve(os.path.join(EXAMPLES, "hopper_ring.py") + "::tma_ring")[0]
    kernel = target.build()
    base = cache_key(kernel, {"steps": 4}, Options(), "explore", target.ref)
    assert base == cache_key(target.build(), {"steps": 4}, Options(), "explore", target.ref)
    moved = kernel.replace(loc=kernel.loc.__class__(kernel.loc.file, kernel.loc.line + 1))
    assert cache_key(moved, {"steps": 4}, Options(), "explore", target.ref) != base
    fewer = kernel.replace(body=kernel.body[:-1])
    assert cache_key(fewer, {"steps": 4}, Options(), "explore", target.ref) != base
    assert cache_key(kernel, {"steps": 5}, Options(), "explore", target.ref) != base
    assert cache_key(kernel, {"steps": 4}, Options(ignore=frozenset({"BP101"})), "explore",
                     target.ref) != base
    assert cache_key(kernel, {"steps": 4}, Options(), "symbolic", target.ref) != base
    assert cache_key(kernel, {"steps": 4}, Options(), "explore", "elsewhere.py::x") != base


def test_cache_key_covers_the_tool_itself(tmp_path, monkeypatch):
    """A changed checker never serves a verdict of the old one."""
    import barrierproof.cache as cache_mod
    (tmp_path / "semantics.py").write_text("RULE = 1\n")
    before = cache_mod.sources_fingerprint([str(tmp_path)])
    (tmp_path / "semantics.py").write_text("RULE = 2\n")
    assert cache_mod.sources_fingerprint([str(tmp_path)]) != before
    # and the key follows the tool's fingerprint
    target = resolve(os.path.join(EXAMPLES, "handoff.py") + "::single_handoff")[0]
    kernel = target.build()
    key = cache_key(kernel, {}, Options(), "explore", target.ref)
    monkeypatch.setattr(cache_mod, "tool_fingerprint", lambda: "a different checker")
    assert cache_key(kernel, {}, Options(), "explore", target.ref) != key


def test_cache_round_trips_every_verdict_kind(tmp_path):
    cache = Cache(str(tmp_path / "c"))
    for target in resolve(EXAMPLES):
        if target.kind != "dsl":
            continue
        kernel = target.build()
        verdict = check_kernel(kernel, None, Options(), target.ref)
        assert verdict_from_json(verdict.to_json()).to_json() == verdict.to_json()
        calls = []
        first = cache.check(kernel, {}, Options(), "explore", target.ref, None,
                            lambda: calls.append(1) or verdict)
        again = cache.check(kernel, {}, Options(), "explore", target.ref, None,
                            lambda: calls.append(1) or verdict)
        stored = verdict.verdict in ("verified", "violation", "unknown")
        assert len(calls) == (1 if stored else 2), (target.ref, verdict.verdict)
        assert again.to_json() == first.to_json()


def test_bounded_and_corrupt_entries_are_never_served(tmp_path):
    from barrierproof.checker.engines.explore import Limits
    target = resolve(os.path.join(EXAMPLES, "hopper_ring.py") + "::tma_ring")[0]
    kernel = target.build()
    cache = Cache(str(tmp_path / "c"))
    options = Options(Limits(max_states=10))
    calls = []

    def compute():
        calls.append(1)
        return check_kernel(kernel, {}, options, target.ref)
    assert cache.check(kernel, {}, options, "explore", target.ref, None, compute).verdict == \
        "bounded"
    cache.check(kernel, {}, options, "explore", target.ref, None, compute)
    assert len(calls) == 2
    # corrupt a stored entry: it is a miss, not a crash
    key = cache_key(kernel, {}, Options(), "explore", target.ref)
    cache.check(kernel, {}, Options(), "explore", target.ref, None,
                lambda: check_kernel(kernel, {}, Options(), target.ref))
    path = os.path.join(cache.directory, key[:2], key + ".json")
    with open(path, "w") as f:
        f.write("{not json")
    assert cache.get(key) is None


def test_canonical_refuses_what_it_cannot_fingerprint():
    with pytest.raises(TypeError):
        canonical(object())


# -- the pytest helper -------------------------------------------------------------------------

def test_assert_deadlock_free_passes_and_fails_with_the_timeline(tmp_path):
    from barrierproof.loader import import_file
    module = import_file(os.path.join(EXAMPLES, "hopper_ring.py"))
    verdicts = assert_deadlock_free(module.tma_ring, stages=3, steps=5)
    assert verdicts[0].verdict == "verified" and verdicts[0].params["stages"] == 3
    with pytest.raises(AssertionError) as info:
        assert_deadlock_free(module.empty_count_too_large)
    message = str(info.value)
    assert message.startswith("empty_count_too_large is not deadlock-free: violation:BP100")
    assert "step | wg0" in message and "stuck: wg2 blocked at barrier_wait(empty[0])" in message
    assert "hopper_ring.py:" in message
    v = assert_violation(module.ring_without_drain, "BP103")
    assert v.trace is not None
    with pytest.raises(AssertionError, match="expected violation:BP100, got verified"):
        assert_violation(module.tma_ring, "BP100")
    with pytest.raises(TypeError, match="has no parameter"):
        assert_deadlock_free(module.tma_ring, stagez=3)


def test_assert_deadlock_free_refuses_bounded_and_unknown():
    from barrierproof.loader import import_file
    ring = import_file(os.path.join(EXAMPLES, "hopper_ring.py")).tma_ring
    with pytest.raises(AssertionError, match="stopped at a limit"):
        assert_deadlock_free(ring, steps=30, max_states=20)
    handoff = import_file(os.path.join(EXAMPLES, "handoff.py"))
    with pytest.raises(AssertionError, match="does not cover"):
        assert_deadlock_free(handoff.semaphore_handoff)
    assert_deadlock_free(handoff.semaphore_handoff, ignore=("BP190",))


PALLAS_KERNEL = '''
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu


def handoff(arrivals):
    def kernel_fn():
        @plgpu.kernel(out_type=jax.ShapeDtypeStruct((128,), jnp.float32), num_threads=2,
                      thread_name="wg", scratch_types=[plgpu.Barrier(num_arrivals=arrivals)])
        def k(o_ref, bar):
            wg = jax.lax.axis_index("wg")

            @pl.when(wg == 0)
            def _():
                plgpu.barrier_arrive(bar)

            @pl.when(wg == 1)
            def _():
                plgpu.barrier_wait(bar)
        return k()
    return kernel_fn


good = handoff(1)
lost_arrival = handoff(2)
'''


def test_assert_deadlock_free_on_a_pallas_kernel_function(tmp_path):
    need("jax")
    from barrierproof.loader import import_file
    path = tmp_path / "pallas_handoff.py"
    path.write_text(PALLAS_KERNEL)
    module = import_file(str(path))
    assert assert_deadlock_free(module.good)[0].verdict == "verified"
    with pytest.raises(AssertionError) as info:
        assert_deadlock_free(module.lost_arrival)
    message = str(info.value)
    assert "violation:BP100" in message and "pallas_handoff.py:" in message
    assert "blocked at barrier_wait(bar)" in message


def test_check_reports_input_errors_as_verdicts(tmp_path):
    from barrierproof import protocol

    @protocol
    def broken(k, steps):
        k.threads(2)
        bar = k.Barrier()
        with k.loop(steps):
            k.barrier_arrive(bar)
    [v] = check(broken)
    assert v.verdict == "error" and "has no value" in v.diagnostics[0].message


# -- progress and Ctrl-C -----------------------------------------------------------------------

LONG = ["examples/hopper_ring.py::tma_ring", "--param", "steps=400", "--param", "stages=4",
        "--param", "consumers=4", "--no-reduction", "--no-cache", "--timeout", "120"]


def test_quiet_in_ci_logs_unless_asked(tmp_path):
    args = ["check", *LONG[:-2], "--timeout", "1.5"]
    code, out, err = cli(*args, cwd=ROOT)
    assert code == 2 and "states/s" not in err
    code, out, err = cli(*args, "--progress", cwd=ROOT)
    assert code == 2 and "tma_ring:" in err and "states/s" in err
    assert len(err.strip().splitlines()) <= 3          # a line every 10 s, not a flood


def test_progress_on_a_terminal():
    code, out = run_on_a_terminal("check", *LONG[:-2], "--timeout", "2")
    assert code == 2
    assert "states/s" in out and "depth" in out


# A search that takes minutes, then one that takes a moment.
BIG_THEN_SMALL = textwrap.dedent('''
    import sys
    sys.path.insert(0, %r)
    from hopper_ring import ring
    from barrierproof import protocol

    @protocol
    def big(k, steps=400, stages=4, consumers=4):
        ring(k, stages, consumers, steps)

    @protocol
    def small(k, steps=2, stages=2, consumers=1):
        ring(k, stages, consumers, steps)
    ''' % EXAMPLES)


def test_ctrl_c_ends_with_a_bounded_verdict(tmp_path):
    # The Python explorer's interrupt (the compiled core reaches the state limit of `big` in
    # seconds, before any signal; its interrupt path is the same KeyboardInterrupt, raised in C)
    (tmp_path / "two.py").write_text(BIG_THEN_SMALL)
    # importing and building take longer on a loaded machine: interrupted before the search of
    # `big` began, it covered nothing; then wait longer, until it is well into the search
    for delay in (4, 10, 25):
        proc = subprocess.Popen([sys.executable, "-m", "barrierproof", "check", str(tmp_path),
                                 "--no-reduction", "--core", "python", "--no-cache",
                                 "--format", "json", "--timeout", "120", "--jobs", "1"], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 2, err
        assert "Traceback" not in err
        big, small = json.loads(out)
        assert big["verdict"] == "bounded" and "interrupted" in big["coverage"]
        assert small["verdict"] == "bounded" and small["coverage"] == \
            "not checked: interrupted (Ctrl-C)"
        if big["states"] > 0:                             # what was covered
            break
    assert big["states"] > 0, big["coverage"]


def test_ctrl_c_keeps_what_parallel_workers_covered(tmp_path):
    """With --jobs 2 the signal reaches the main process only (as from `kill`): it is passed to
    the workers, which report their searches as `bounded`; a protocol done before is kept."""
    (tmp_path / "two.py").write_text(BIG_THEN_SMALL)
    proc = subprocess.Popen([sys.executable, "-m", "barrierproof", "check", str(tmp_path),
                             "--no-reduction", "--core", "python", "--no-cache",
                             "--format", "json", "--timeout", "120", "--jobs", "2"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(12)    # two workers spawned; `small` done, `big` well into its search
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert "Traceback" not in err
    big, small = json.loads(out)
    assert big["verdict"] == "bounded" and "interrupted" in big["coverage"], big["coverage"]
    assert small["verdict"] == "verified"


def _children(pid: int) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/status") as f:
                if f"PPid:\t{pid}\n" in f.read():
                    found.add(int(entry))
        except (OSError, ValueError):
            pass
    return found


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return "State:\tZ" not in f.read()
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_workers_die_with_a_killed_run(tmp_path):
    """SIGKILL cannot be caught, so nothing is reported; but no worker may go on searching
    with nobody to report to (a CI runner's last resort, or the OOM killer)."""
    (tmp_path / "two.py").write_text(BIG_THEN_SMALL.replace("def small(k, steps=2",
                                                            "def small(k, steps=400"))
    proc = subprocess.Popen([sys.executable, "-m", "barrierproof", "check", str(tmp_path),
                             "--no-reduction", "--no-cache", "--timeout", "300", "--jobs", "2"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while len(_children(proc.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        workers = _children(proc.pid)
        assert len(workers) >= 2
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(_running(w) for w in workers):
        time.sleep(0.2)
    alive = [w for w in workers if _running(w)]
    for w in alive:
        os.kill(w, signal.SIGKILL)
    assert alive == []


def test_parallel_workers_are_joined_before_the_verdicts_are_printed(tmp_path, monkeypatch,
                                                                    capsys):
    """The worker pool is shut down and joined before `check` returns: a pool left to Python's
    exit hook races its manager thread for the wake-up pipe on 3.11 and prints a traceback after
    the verdicts (seen once in CI, on a gate run)."""
    import threading
    root = project(tmp_path, 'paths = ["protocols"]\n', {"good.py": GOOD, "bad.py": BAD})
    monkeypatch.chdir(root)
    assert main(["check", "--jobs", "2", "--no-cache", "--format", "json"]) == 1
    assert [v["verdict"] for v in json.loads(capsys.readouterr().out)] == ["violation",
                                                                          "verified"]
    managers = [t for t in threading.enumerate() if "Manager" in type(t).__name__]
    assert not managers, managers


# -- adoption: pre-commit and GitHub Actions ---------------------------------------------------

def tool(name: str) -> str:
    found = shutil.which(name)
    if not found:
        if IN_CI:
            pytest.fail(f"{name} is not installed; .ci/run installs it")
        pytest.skip(f"{name} is not installed")
    return found


def git(*args, cwd):
    subprocess.run(["git", "-c", "user.email=ci@example.com", "-c", "user.name=ci", *args],
                   cwd=cwd, check=True, capture_output=True)


def test_the_hook_manifest_and_example_config_are_valid():
    pre_commit = tool("pre-commit")
    subprocess.run([pre_commit, "validate-manifest", os.path.join(ROOT, ".pre-commit-hooks.yaml")],
                   check=True, capture_output=True)
    subprocess.run([pre_commit, "validate-config",
                    os.path.join(ROOT, "docs", "ci", "pre-commit-config.yaml")],
                   check=True, capture_output=True)


@pytest.mark.slow
def test_pre_commit_try_repo(tmp_path):
    """The hook as a user gets it: pre-commit installs barrierproof from this repository into
    its own environment and runs it on a repository with a [tool.barrierproof] table."""
    pre_commit = tool("pre-commit")
    # This working tree as a repository of its own (committed or not).
    hooks = tmp_path / "barrierproof"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", ".barrierproof_cache")
    for part in ("barrierproof", "model", "checker", "specs"):
        shutil.copytree(os.path.join(ROOT, part), hooks / part, ignore=ignore)
    for name in ("pyproject.toml", "setup.py", "LICENSE", ".pre-commit-hooks.yaml", "README.md"):
        shutil.copy(os.path.join(ROOT, name), hooks / name)
    git("init", "-q", cwd=hooks)
    git("add", "-A", cwd=hooks)
    git("commit", "-qm", "hooks", cwd=hooks)

    user = tmp_path / "user"
    user.mkdir()
    project(user, 'paths = ["protocols"]\n', {"ring.py": GOOD})
    shutil.rmtree(user / ".git")
    git("init", "-q", cwd=user)
    git("add", "-A", cwd=user)
    git("commit", "-qm", "kernels", cwd=user)
    env = dict(os.environ, PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"))

    def run():
        return subprocess.run([pre_commit, "try-repo", str(hooks), "barrierproof", "--all-files"],
                              cwd=user, capture_output=True, text=True, env=env, timeout=900)
    proc = run()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "barrierproof (barrier protocols cannot deadlock)" in proc.stdout
    assert "Passed" in proc.stdout

    (user / "protocols" / "ring.py").write_text(BAD)
    git("commit", "-qam", "a lost arrival", cwd=user)
    proc = run()
    assert proc.returncode == 1
    assert "Failed" in proc.stdout and "violation:BP100" in proc.stdout
    assert "stuck: wg1 blocked at barrier_wait(ready)" in proc.stdout


WORKFLOW = os.path.join(ROOT, "docs", "ci", "barrierproof.yml")


def test_workflow_is_a_valid_github_actions_workflow():
    check_jsonschema = tool("check-jsonschema")
    proc = subprocess.run([check_jsonschema, "--builtin-schema", "vendor.github-workflows",
                           WORKFLOW], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def workflow_commands() -> list[str]:
    yaml = need("yaml")
    with open(WORKFLOW) as f:
        flow = yaml.safe_load(f)
    steps = flow["jobs"]["barrier-proofs"]["steps"]
    return [line.strip() for s in steps if "run" in s for line in s["run"].splitlines()
            if line.strip().startswith("barrierproof ")]


def test_workflow_commands_run_in_a_user_repository(tmp_path):
    """Each `barrierproof ...` line of the workflow, run as the workflow runs it: the gate fails
    on a deadlock, the reports are written, and the later runs come from the cache."""
    commands = workflow_commands()
    assert commands[0].startswith("barrierproof check")
    root = project(tmp_path, 'paths = ["protocols"]\n', {"good.py": GOOD, "bad.py": BAD})
    codes, errs = [], []
    for command in commands:
        argv = command.split("||")[0].split()[1:]
        code, out, err = cli(*argv, cwd=root)
        codes.append(code)
        errs.append(err)
        assert "Traceback" not in err
    assert codes == [1]         # one run: the console and every report from it
    assert (root / "barrierproof-annotations.txt").read_text().startswith("::error file=")
    assert json.loads((root / "barrierproof.sarif").read_text())["version"] == "2.1.0"
    assert (root / "barrierproof-junit.xml").read_text().startswith("<?xml")
    assert "<table class=\"timeline\"" in (root / "barrierproof.html").read_text()


def test_the_readme_ci_snippets_are_what_the_tool_accepts(tmp_path):
    """The TOML and YAML a new user copies from the README work as written."""
    import re
    from barrierproof.config import load_config
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    blocks = re.findall(r"```(\w+)\n(.*?)```", text, re.S)
    tomls = [textwrap.dedent(b) for lang, b in blocks if lang == "toml"]
    assert tomls
    for n, toml in enumerate(tomls):
        path = tmp_path / f"pyproject{n}.toml"
        path.write_text(toml)
        config = load_config(str(path))
        assert config.values["paths"]
    yamls = [textwrap.dedent(b) for lang, b in blocks if lang == "yaml"]
    assert yamls
    pre_commit = tool("pre-commit")
    for n, yaml_text in enumerate(yamls):
        path = tmp_path / f"pre-commit-{n}.yaml"
        path.write_text(yaml_text)
        subprocess.run([pre_commit, "validate-config", str(path)], check=True,
                       capture_output=True)
    python = [textwrap.dedent(b) for lang, b in blocks if lang == "python"]
    assert any("from barrierproof.testing import assert_deadlock_free" in p for p in python)
    # every command line of the Commands block parses
    from barrierproof.cli import build_parser
    parser = build_parser()
    parser.parse_args(["check", "--format", "sarif", "-o", "x.sarif", "--no-cache",
                       "--config", "pyproject.toml", "--progress", "--cache-dir", "d"])
    parser.parse_args(["graph", "x.py::p", "-o", "x.dot", "--max-states", "10"])


# -- user code that tries to outlive or block the run ------------------------------------------

SIGNAL_TAKEN = '''
import signal
from barrierproof import protocol

@protocol
def spins(k):
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)     # the watchdog's signal, taken away
    while True:
        pass
'''

THREAD_LEFT = '''
import threading, time
from barrierproof import protocol

threading.Thread(target=time.sleep, args=(3600,)).start()   # not a daemon: Python would join it

@protocol(expect="verified")
def handoff(k):
    k.threads(2)
    bar = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        k.barrier_arrive(bar)
    with k.otherwise():
        k.barrier_wait(bar)
'''

FORKS = '''
import os, time
from barrierproof import protocol

@protocol(expect="verified")
def forks(k):
    if os.fork() == 0:
        time.sleep(3600)            # the fork would hold the output pipe open for an hour
    k.threads(1)

@protocol(expect="violation:BP100")
def starved(k):
    k.threads(1)
    k.barrier_wait(k.Barrier(num_arrivals=1))
'''


def test_user_code_that_takes_the_watchdogs_signal_is_stopped_at_its_timeout(tmp_path):
    (tmp_path / "spin.py").write_text(SIGNAL_TAKEN)
    start = time.monotonic()
    code, out, err = cli("check", "spin.py", "--timeout", "2", "--no-cache", cwd=tmp_path,
                         timeout=60)
    assert code == 2 and "bounded" in out and "time limit 2s" in out, (code, out, err)
    assert time.monotonic() - start < 30


def test_a_thread_left_running_by_user_code_does_not_hold_the_run(tmp_path):
    (tmp_path / "thread.py").write_text(THREAD_LEFT)
    code, out, err = cli("check", "thread.py", "--no-cache", cwd=tmp_path, timeout=60)
    assert code == 0 and "verified" in out, (code, out, err)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_fork_in_user_code_neither_holds_the_pipe_nor_goes_on_checking(tmp_path, jobs):
    """The run's stdout is a pipe (as in CI): it must reach end-of-file when barrierproof ends,
    though the user's fork sleeps on; the fork never prints a second report."""
    (tmp_path / "forks.py").write_text(FORKS)
    code, out, err = cli("check", "forks.py", "--no-cache", "--jobs", jobs, cwd=tmp_path,
                         timeout=60)
    assert code == 1, (code, out, err)
    assert out.count("2 checked") == 1 and "forks: verified" in out, out
    assert "starved: violation:BP100" in out, out

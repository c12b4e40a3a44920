"""Verified fix suggestions: every suggestion is checked, exact edits are real patches, and the
reports carry them in every format."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.repair import suggest_fixes
from barrierproof.checker.repair.ir_edit import canonical
from barrierproof.fixcmd import rebuild_with
from barrierproof.loader import resolve

from conftest import ROOT

DATA = os.path.join(ROOT, "tests", "data")


def build(spec):
    return resolve(os.path.join(ROOT, spec))[0].build()


def cli(*args, cwd=None):
    proc = subprocess.run([sys.executable, "-m", "barrierproof", *args], capture_output=True,
                          text=True, cwd=cwd or ROOT, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


def jsonschema():
    return pytest.importorskip("jsonschema")


@pytest.mark.parametrize("buggy, intended", [
    ("examples/handoff.py::wrong_arrival_count", "examples/handoff.py::single_handoff"),
    ("examples/hopper_ring.py::ring_without_drain", "examples/hopper_ring.py::tma_ring"),
    ("examples/hopper_ring.py::empty_count_too_small", "examples/hopper_ring.py::tma_ring"),
    ("examples/hopper_ring.py::roles_disagree_on_trip_count", "examples/hopper_ring.py::tma_ring"),
    ("examples/attention.py::pingpong_missing_final_wait", "examples/attention.py::pingpong_schedule"),
    ("examples/cutlass.py::parity_not_toggled", "examples/cutlass.py::pipeline_tma_async"),
])
def test_the_first_suggestion_is_the_intended_fix(buggy, intended):
    repair = suggest_fixes(build(buggy), prove=False)
    assert repair.fixes, repair.reason
    assert canonical(repair.chosen[0].kernel) == canonical(build(intended))


def test_a_missing_wait_and_a_missing_drain_are_repaired_together():
    repair = suggest_fixes(build("examples/hopper_ring.py::consumer_lapped_by_producer"),
                           prove=False)
    assert repair.fixes and "; and " in repair.fixes[0].description
    assert canonical(repair.chosen[0].kernel) == canonical(
        build("examples/hopper_ring.py::tma_ring"))


def test_every_suggestion_was_verified():
    # (handoff.py::pending_arrivals_at_exit has none: lowering the count makes `done` complete
    # a phase nobody waits for, which Pallas's rule 2 forbids as well, BP103)
    for spec in ("examples/hopper_ring.py::empty_count_too_large",
                 "examples/cutlass.py::expect_tx_larger_than_copy",
                 "examples/hopper_ring.py::empty_count_too_small"):
        kernel = build(spec)
        repair = suggest_fixes(kernel, prove=False)
        assert repair.fixes
        for fix, cand in zip(repair.fixes, repair.chosen):
            assert fix.verdict == "verified"
            assert check_kernel(cand.kernel).verdict == "verified", fix.description
        # Not a suggestion without a check: the original still violates.
        assert check_kernel(kernel).verdict == "violation"


def test_a_fix_that_only_holds_at_the_defaults_is_not_suggested_for_a_symbolic_protocol():
    # num_arrivals=1 works at consumers=1 (the default) but not at consumers=2.
    repair = suggest_fixes(build("examples/symbolic_bugs.py::empty_counts_two_consumers"),
                           prove_timeout=600.0)    # a loaded machine must not make it flaky
    assert [f.description for f in repair.fixes] == ["`empty`: num_arrivals=consumers (was 2)"]
    assert repair.fixes[0].verdict == "proved"


def test_no_suggestion_when_no_candidate_verifies():
    repair = suggest_fixes(build("examples/handoff.py::arrivals_without_waiter"), prove=False)
    assert repair.fixes == [] and repair.tried > 0
    assert "no verified repair" in repair.reason


def test_nothing_to_repair_in_a_correct_protocol():
    repair = suggest_fixes(build("examples/handoff.py::single_handoff"))
    assert repair.fixes == [] and repair.tried == 0


def test_exact_edits_are_source_patches_and_helpers_are_described_in_words():
    kernel = build("examples/cluster.py::cluster_barrier_skipped_by_a_block")
    exact = suggest_fixes(kernel, prove=False, rebuild=rebuild_with(kernel)).fixes[0]
    assert exact.edit["kind"] == "source" and exact.patch.startswith("--- a/")
    assert '-    with k.when(k.block("x") == 0):\n-        k.barrier_arrive(exchanged)\n' \
           '+    k.barrier_arrive(exchanged)\n' in exact.patch
    words = suggest_fixes(build("examples/hopper_ring.py::ring_without_drain"),
                          prove=False).fixes[0]
    # ring() is shared by the correct siblings: editing it would change them too.
    assert words.edit["kind"] == "words" and words.patch is None
    with open(os.path.join(ROOT, words.edit["file"])) as f:
        at = f.read().splitlines()[words.edit["line"] - 1]
    assert at.strip() == "with k.loop(steps) as i:"      # the producer loop to drain after
    assert "k.loop(minimum(steps, stages)) as j" in words.edit["text"]


def test_a_patch_is_offered_only_if_it_rebuilds_the_verified_repair():
    kernel = build("examples/handoff.py::wrong_arrival_count")
    patched = suggest_fixes(kernel, rebuild=rebuild_with(kernel)).fixes[0]
    assert patched.edit["kind"] == "source" and patched.patch
    # A rebuild that yields another protocol (here: the unrepaired one) withdraws the patch;
    # so does having no way to rebuild at all.
    wrong = suggest_fixes(kernel, rebuild=lambda edits: kernel).fixes[0]
    bare = suggest_fixes(kernel).fixes[0]
    for fix in (wrong, bare):
        assert fix.edit["kind"] == "words" and fix.patch is None
        assert fix.description == patched.description and fix.verdict == "verified"


def test_fix_command_prints_a_diff_and_apply_repairs_the_file(tmp_path):
    shutil.copy(os.path.join(ROOT, "examples", "handoff.py"), tmp_path / "handoff.py")
    code, out, err = cli("fix", "handoff.py::wrong_arrival_count", cwd=tmp_path)
    assert code == 0, err
    assert out.startswith("--- a/handoff.py\n+++ b/handoff.py\n")
    assert "-    ready = k.Barrier(num_arrivals=2)\n+    ready = k.Barrier(num_arrivals=1)" in out
    assert (tmp_path / "handoff.py").read_text() == open(
        os.path.join(ROOT, "examples", "handoff.py")).read()          # no --apply: untouched
    code, out, err = cli("fix", "handoff.py::wrong_arrival_count", "--apply", cwd=tmp_path)
    assert code == 0, err
    assert "checked again: verified" in err
    assert "ready = k.Barrier(num_arrivals=1)" in (tmp_path / "handoff.py").read_text()
    code, _, _ = cli("check", "handoff.py::wrong_arrival_count", "--no-cache", cwd=tmp_path)
    assert code == 0


def test_fix_command_inserts_lines_that_git_apply_accepts(tmp_path):
    shutil.copy(os.path.join(ROOT, "examples", "attention.py"), tmp_path / "attention.py")
    code, out, err = cli("fix", "attention.py::pingpong_missing_final_wait", cwd=tmp_path)
    assert code == 0, err
    (tmp_path / "fix.diff").write_text(out)
    git = shutil.which("git")
    if git:
        proc = subprocess.run([git, "apply", "--unsafe-paths", "fix.diff"], cwd=tmp_path,
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        code, _, _ = cli("check", "attention.py::pingpong_missing_final_wait", "--no-cache",
                         cwd=tmp_path)
        assert code == 0


def test_fix_command_explains_what_it_cannot_do():
    code, out, err = cli("fix", "examples/handoff.py::single_handoff")
    assert code == 0 and "nothing to fix" in err and out == ""
    code, out, err = cli("fix", "examples/handoff.py::arrivals_without_waiter")
    assert code == 1 and "no fix suggested" in err and "Traceback" not in err
    code, out, err = cli("fix", "examples/hopper_ring.py::ring_without_drain", "--apply")
    assert code == 3 and "no exact source form" in err and out == ""


def test_check_runs_repair_only_when_asked():
    code, out, _ = cli("check", "examples/handoff.py::wrong_arrival_count", "--format", "json",
                       "--no-cache")
    assert code == 1 and "fixes" not in json.loads(out)[0]


def test_json_fixes_match_the_schema():
    js = jsonschema()
    from barrierproof.resources import report_schema
    schema = report_schema()
    code, out, err = cli("check", "examples/handoff.py::wrong_arrival_count",
                         "examples/hopper_ring.py::ring_without_drain",
                         "examples/handoff.py::arrivals_without_waiter", "--fix",
                         "--format", "json", "--no-cache")
    data = json.loads(out)
    js.Draft202012Validator(schema).validate(data)
    exact, words, none = (d["fixes"] for d in data)
    assert exact[0]["edit"]["kind"] == "source" and exact[0]["verdict"] == "verified"
    assert exact[0]["edit"]["changes"][0]["text"] == "    ready = k.Barrier(num_arrivals=1)\n"
    assert words[0]["edit"]["kind"] == "words"
    assert none == [] and any("no verified repair" in n for n in data[2]["notes"])


def test_sarif_fixes_are_valid_and_replace_the_line():
    js = jsonschema()
    with open(os.path.join(DATA, "sarif-schema-2.1.0.json")) as f:
        validator = js.Draft4Validator(json.load(f))
    code, out, err = cli("check", "examples/handoff.py::wrong_arrival_count",
                         "examples/attention.py::pingpong_missing_final_wait",
                         "examples/hopper_ring.py::ring_without_drain", "--fix",
                         "--format", "sarif", "--no-cache")
    log = json.loads(out)
    validator.validate(log)
    results = log["runs"][0]["results"]
    first = next(r for r in results if "wrong_arrival_count" in r["properties"]["protocol"])
    rep = first["fixes"][0]["artifactChanges"][0]["replacements"][0]
    assert rep["deletedRegion"] == {"startLine": 21, "startColumn": 1, "endLine": 22,
                                    "endColumn": 1}
    assert rep["insertedContent"]["text"] == "    ready = k.Barrier(num_arrivals=1)\n"
    inserted = next(r for r in results if "pingpong" in r["properties"]["protocol"])
    region = inserted["fixes"][0]["artifactChanges"][0]["replacements"][0]["deletedRegion"]
    assert region["startLine"] == region["endLine"] and region["startColumn"] == 1 == \
        region["endColumn"]                                    # an insertion
    described = next(r for r in results if "ring_without_drain" in r["properties"]["protocol"])
    assert "fixes" not in described and described["properties"]["fixes"][0]["edit"]["kind"] \
        == "words"


def test_text_and_html_reports_show_the_fix():
    code, out, _ = cli("check", "examples/handoff.py::wrong_arrival_count", "--fix", "--no-cache")
    assert "fix 1 (verified after the edit): `ready`: num_arrivals=1 (was 2)" in out
    assert "+    ready = k.Barrier(num_arrivals=1)" in out
    code, out, _ = cli("check", "examples/handoff.py::wrong_arrival_count", "--fix",
                       "--format", "html", "--no-cache")
    assert 'class="fix"' in out and "num_arrivals=1 (was 2)" in out


def test_the_pytest_helper_message_shows_the_verified_fix():
    from barrierproof.testing import assert_deadlock_free
    proto = resolve(os.path.join(ROOT, "examples/handoff.py::wrong_arrival_count"))[0]
    from barrierproof.loader import import_file
    module = import_file(os.path.join(ROOT, "examples", "handoff.py"))
    with pytest.raises(AssertionError) as err:
        assert_deadlock_free(module.wrong_arrival_count)
    assert "fix 1 (verified after the edit): `ready`: num_arrivals=1 (was 2)" in str(err.value)
    assert proto.name == "wrong_arrival_count"


def test_a_pallas_kernel_gets_its_fix_in_words_at_the_kernel_source():
    pytest.importorskip("jax")
    code, out, err = cli("check", "examples/pallas/handoff.py::missing_arrival", "--fix",
                         "--format", "json", "--no-cache")
    fixes = json.loads(out)[0]["fixes"]
    assert fixes[0]["description"] == "`ready`: num_arrivals=1 (was 2)"
    assert fixes[0]["edit"]["kind"] == "words"
    assert fixes[0]["location"].startswith("examples/pallas/handoff.py:")
    code, out, err = cli("fix", "examples/pallas/handoff.py::missing_arrival")
    assert code == 3 and "edits DSL protocols only" in err and "Traceback" not in err


MOVED = """from barrierproof import protocol


@protocol(expect="violation:BP130")
def expect_tx_outside_the_copy_branch(k):
    k.threads(2, name="wg")
    full = k.Barrier(num_arrivals=1)
    k.expect_tx(full, 4096)
    with k.when(k.thread == 0):
        k.tma_load(full, 4096)
        k.arrive(full)
    k.barrier_wait(full)
"""


def test_expect_tx_moves_into_the_branch_that_issues_the_copy(tmp_path):
    (tmp_path / "moved.py").write_text(MOVED)
    code, out, err = cli("fix", "moved.py::expect_tx_outside_the_copy_branch", "--apply",
                         cwd=tmp_path)
    assert code == 0, err
    assert "-    k.expect_tx(full, 4096)\n     with k.when(k.thread == 0):\n" \
           "+        k.expect_tx(full, 4096)\n" in out
    assert "checked again: verified" in err


PROLOGUE = """from barrierproof import protocol


@protocol(expect="violation:BP105")
def prologue_fills_every_slot(k, steps=1):
    k.threads(2, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=2)
    with k.when(k.thread == 0):
        k.copy_gmem_to_smem(full.at[0], bytes=512)
        k.copy_gmem_to_smem(full.at[1], bytes=512)
    with k.otherwise():
        with k.loop(steps) as i:
            k.barrier_wait(full.at[i % 2])
"""


def test_a_prologue_copy_gets_the_trip_count_guard_it_misses(tmp_path):
    (tmp_path / "prologue.py").write_text(PROLOGUE)
    code, out, err = cli("fix", "prologue.py::prologue_fills_every_slot", "--apply",
                         cwd=tmp_path)
    assert code == 0, err
    assert "-        k.copy_gmem_to_smem(full.at[1], bytes=512)\n" \
           "+        with k.when(steps > 1):\n" \
           "+            k.copy_gmem_to_smem(full.at[1], bytes=512)\n" in out
    # Removing the copy also verifies at steps=1 but breaks at steps=2, while the guard holds
    # there too: the removal is not shown at all.
    assert "fix 1 (verified after the edit): run `k.copy_gmem_to_smem(full.at[1]" in err
    assert "fix 2" not in err and "remove `" not in err
    code, _, _ = cli("check", "prologue.py::prologue_fills_every_slot", "--param", "steps=2",
                     "--no-cache", cwd=tmp_path)
    assert code == 0


def test_text_report_prints_a_fix_diff_one_row_per_line():
    """The escaping of names (safe.py) runs on each row of the diff, not on the whole diff."""
    code, out, _ = cli("check", "examples/handoff.py::wrong_arrival_count", "--fix", "--no-cache")
    assert code == 1
    rows = [r.strip() for r in out.splitlines()]
    assert "+    ready = k.Barrier(num_arrivals=1)" in rows, out
    assert "\\n" not in out

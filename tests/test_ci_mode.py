"""With CI set, a test that skips (a missing Java, Chromium or JAX) fails the run."""

import os
import subprocess
import sys
import textwrap

TESTS = os.path.dirname(os.path.abspath(__file__))


def _run(tmp_path, ci, module_skip=False):
    (tmp_path / "conftest.py").write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {TESTS!r})
        from ci_mode import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401
    """))
    if module_skip:
        (tmp_path / "test_needs_jax.py").write_text(textwrap.dedent("""
            import pytest

            pytest.importorskip("a_module_that_is_not_installed")

            def test_interpreter():
                pass
        """))
        (tmp_path / "test_needs_gpu.py").write_text(textwrap.dedent("""
            import pytest

            pytest.skip("no GPU here", allow_module_level=True)

            def test_on_gpu():
                pass
        """))
    (tmp_path / "test_tool.py").write_text(textwrap.dedent("""
        import pytest

        @pytest.mark.skipif(True, reason="java is not installed")
        def test_needs_java():
            pass

        def test_needs_chromium():
            pytest.skip("chromium is not installed")

        def test_plain():
            pass
    """))
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci:
        env["CI"] = "true"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p",
                           "no:cacheprovider", "--rootdir", str(tmp_path), "-c", os.devnull,
                           str(tmp_path)], capture_output=True, text=True, env=env,
                          cwd=tmp_path)


def test_skips_fail_in_ci(tmp_path):
    run = _run(tmp_path, ci=True)
    assert run.returncode == 1, run.stdout
    # a skip in the test body fails it; a skipif at setup makes it an error: both fail the run
    assert "1 failed, 1 passed, 1 error" in run.stdout, run.stdout
    assert "java is not installed" in run.stdout and "counts as a failure" in run.stdout


def test_skips_are_skips_outside_ci(tmp_path):
    run = _run(tmp_path, ci=False)
    assert run.returncode == 0, run.stdout
    assert "1 passed, 2 skipped" in run.stdout, run.stdout


def test_module_level_skips_fail_in_ci(tmp_path):
    run = _run(tmp_path, ci=True, module_skip=True)
    assert run.returncode != 0, run.stdout
    assert "2 errors" in run.stdout, run.stdout
    assert "a_module_that_is_not_installed" in run.stdout and "no GPU here" in run.stdout
    assert "module skipped in CI" in run.stdout


def test_module_level_skips_are_skips_outside_ci(tmp_path):
    run = _run(tmp_path, ci=False, module_skip=True)
    assert run.returncode == 0, run.stdout
    assert "1 passed, 4 skipped" in run.stdout, run.stdout

"""The memory budget of test processes (tests/memory_guard.py), checked on pytest runs of their own."""

import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TESTS = textwrap.dedent("""
    import subprocess
    import sys

    HELD = []

    def test_small():
      assert sum(range(10)) == 45

    def test_holds_memory():
      HELD.append(bytearray(400_000_000))   # touched: resident

    def test_peaks_then_frees():
      block = bytearray(300_000_000)
      del block

    def test_starts_a_process_smaller_than_this_one():   # 0.5 GB, held a second: read while it runs
      subprocess.run([sys.executable, "-c", "import time; block = bytearray(500_000_000); time.sleep(1)"],
                     check=True)

    def test_starts_a_tiny_process():   # its `ru_maxrss` starts at this process's 0.75 GB
      subprocess.run([sys.executable, "-c", "pass"], check=True)
    """)


def _run(tmp_path, limit_gb, *options):
  (tmp_path / "test_growth.py").write_text(TESTS)
  env = dict(os.environ, ZOO_TEST_MEMORY_LIMIT_GB=str(limit_gb), PYTHONPATH=ROOT)
  env.pop("PYTEST_XDIST_WORKER", None)
  return subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.memory_guard", "--noconftest", "-q",
                         "-o", "addopts=", "-p", "no:cacheprovider", *options, "test_growth.py"],
                        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("options", [("-p", "no:xdist"), pytest.param(("-n", "1"), marks=pytest.mark.slow)],
                         ids=["one process", "xdist worker"])
def test_a_process_over_the_budget_fails_the_run_naming_the_tests_that_grew_it(tmp_path, options):
  over = _run(tmp_path, 0.3, *options)
  assert over.returncode == 1, over.stdout + over.stderr
  assert "5 passed" in over.stdout
  [line] = [line for line in over.stdout.splitlines() if line.startswith("FAILED memory budget")]
  assert ("gw0" if "-n" in options else "pytest") + " reached" in line and "above 0.30 GB" in line
  grew = next(line for line in over.stdout.splitlines() if "peak grew most" in line)
  kept = next(line for line in over.stdout.splitlines() if "left the most memory behind" in line)
  assert grew.index("test_holds_memory") < grew.index("test_peaks_then_frees")   # +0.40 GB, then +0.30 GB
  assert "test_holds_memory (+0.4" in kept
  assert "test_peaks_then_frees" not in kept and "test_small" not in kept
  # The largest process a test started: its own peak (not the test process's, which every child's
  # `ru_maxrss` starts from), and the test named.
  [started] = [line for line in over.stdout.splitlines() if "the processes it started" in line]
  assert "(started by test_growth.py::test_starts_a_process_smaller_than_this_one)" in started, started
  process, own = (float(started.split(marker)[1].split(" GB")[0]) for marker in ("at most: ", ": "))
  assert 0.5 <= process < 0.6 and own >= 0.7, started

  within = _run(tmp_path, 4, *options)
  assert within.returncode == 0, within.stdout + within.stderr
  assert "peak resident memory per test process" in within.stdout
  assert "FAILED memory budget" not in within.stdout

"""benchmarks.shard_writer: the process tree it samples, and a tiny run of both engines with its table."""

import os
import sys

import pytest

from benchmarks import shard_writer


def test_a_process_tree_is_sampled_with_its_children():
  child = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', "
           "'x = bytearray(300 * 2**20); import time; end = time.process_time() + 0.8\\n"
           "while time.process_time() < end: pass\\ntime.sleep(0.5)']); p.wait()")
  wall, cpu, peaks, root, cpus = shard_writer.run_measured([sys.executable, "-c", child], dict(os.environ))
  assert root in peaks and len(peaks) >= 2 and wall > 1.2 and cpu >= 0.8
  assert max(peak for pid, peak in peaks.items() if pid != root) > 300 * 2**20   # the grandchild's buffer
  # Each process's CPU, sampled: the grandchild's busy loop is its own, not the launcher's.
  assert max(seconds for pid, seconds in cpus.items() if pid != root) >= 0.7 and cpus[root] < 0.5
  with pytest.raises(RuntimeError, match="failed"):
    shard_writer.run_measured([sys.executable, "-c", "import sys; sys.exit(3)"], dict(os.environ))


@pytest.mark.slow
def test_the_corpus_has_the_size_asked_for_in_its_files(tmp_path):
  pattern = shard_writer.write_corpus(str(tmp_path / "corpus"), 0.4, files=4)
  sizes = [os.path.getsize(tmp_path / "corpus" / name) for name in sorted(os.listdir(tmp_path / "corpus"))]
  assert pattern.endswith("*.txt") and len(sizes) == 4 and sizes == [100000] * 4
  assert b"\n\n" in (tmp_path / "corpus" / "part-000.txt").read_bytes()


def test_throughput_once_started_is_the_slope_between_two_sizes():
  def row(megabytes, single, beam, launcher):
    return dict(megabytes=megabytes, chunk_mb=16.0, single=dict(cpu=single),
                beam=dict(cpu=beam, launcher_cpu=launcher))
  # One process: 200 MB more for 20 CPU-s more (10 MB/CPU-s); Beam: 200 MB for 22 CPU-s (9.09).
  (line,) = shard_writer.marginal_lines([row(300, 30.0, 40.0, 8.0), row(100, 10.0, 18.0, 7.0)])
  assert "100 → 300 MB: one process 10.00 MB per added CPU-s, Beam 9.09 (**0.91×**)" in line
  assert "launcher 7.0 → 8.0 CPU-s, its workers 11.0 → 32.0" in line
  assert shard_writer.marginal_lines([row(100, 10.0, 18.0, 7.0)]) == []   # one size: no slope
  # A repeated grid: a slope per run, named.
  again = [dict(r, repeat=1) for r in (row(300, 33.0, 40.0, 8.0), row(100, 11.0, 18.0, 7.0))]
  lines = shard_writer.marginal_lines([row(300, 30.0, 40.0, 8.0), row(100, 10.0, 18.0, 7.0), *again])
  assert [line.split(":")[0] for line in lines] == ["- run 1", "- run 2"]
  assert "one process 9.09 MB per added CPU-s, Beam 9.09 (**1.00×**)" in lines[1]

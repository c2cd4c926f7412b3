"""benchmarks.shard_writer: the process tree it samples, and a tiny run of both engines with its table."""

import os
import subprocess
import sys

import pytest

from benchmarks import shard_writer


def test_a_process_tree_is_sampled_with_its_children():
  child = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', "
           "'x = bytearray(300 * 2**20); import time; time.sleep(1.5)']); p.wait()")
  wall, cpu, peaks, root = shard_writer.run_measured([sys.executable, "-c", child], dict(os.environ))
  assert root in peaks and len(peaks) >= 2 and wall > 1.4 and cpu >= 0
  assert max(peak for pid, peak in peaks.items() if pid != root) > 300 * 2**20   # the grandchild's buffer
  with pytest.raises(RuntimeError, match="failed"):
    shard_writer.run_measured([sys.executable, "-c", "import sys; sys.exit(3)"], dict(os.environ))


@pytest.mark.slow
def test_the_corpus_has_the_size_asked_for_in_its_files(tmp_path):
  pattern = shard_writer.write_corpus(str(tmp_path / "corpus"), 0.4, files=4)
  sizes = [os.path.getsize(tmp_path / "corpus" / name) for name in sorted(os.listdir(tmp_path / "corpus"))]
  assert pattern.endswith("*.txt") and len(sizes) == 4 and sizes == [100000] * 4
  assert b"\n\n" in (tmp_path / "corpus" / "part-000.txt").read_bytes()


@pytest.mark.slow
def test_a_tiny_grid_runs_both_engines_to_the_same_bytes(tmp_path, monkeypatch):
  monkeypatch.setattr(shard_writer, "BEAM_WORKERS", 1)   # one worker process shows the sampling of workers
  rows = shard_writer.run([(0.3, 0.1, 3)], str(tmp_path), progress=lambda message: None)
  (row,) = rows
  assert row["same_bytes"] and row["chunks"] == 3 and row["examples"] >= 3
  for engine in ("single", "beam"):
    assert row[engine]["cpu"] > 0 and row[engine]["largest_bytes"] > 100e6
  assert row["beam"]["worker_bytes"] > 0   # Beam's worker processes were seen
  section = shard_writer.report(rows)
  assert section.startswith(shard_writer.SECTION_TITLE)
  assert "| 0.3 | 3 | 3 |" in section and "| yes |" in section and "XLA_FLAGS" in section
  assert all(len(row[engine]["load"]) == 2 for engine in ("single", "beam"))
  help_text = subprocess.run([sys.executable, "-m", "benchmarks.shard_writer", "--help"], capture_output=True,
                             text=True, check=True, cwd=shard_writer.ROOT).stdout
  assert "--grid" in help_text and "--out" in help_text

"""zoo.model_dir: atomic writes, export versions and their atomic publication, history and source files."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from zoo.atomic_files import atomic_file
from zoo.atomic_files import atomic_path
from zoo.atomic_files import is_temporary
from zoo.atomic_files import write_atomically
from zoo.model_dir import SAVED_MODEL_FILE
from zoo.model_dir import ModelDir
from zoo.model_dir import export_versions
from zoo.model_dir import latest_export
from zoo.model_dir import next_export_version
from zoo.model_dir import write_version_atomically


def saved_model(folder):
  os.makedirs(folder, exist_ok=True)
  with open(os.path.join(folder, SAVED_MODEL_FILE), "wb") as file:
    file.write(b"graph")


def test_export_versions_are_the_numeric_names(tmp_path):
  run = ModelDir(str(tmp_path / "run"))
  assert run.export_versions() == [] and run.next_export_version() == 1 and run.latest_export() is None
  for version in (2, 10):
    saved_model(run.export_version_dir(version))
  os.makedirs(run.export_version_dir(11))   # a version without a SavedModel: skipped for serving
  os.makedirs(os.path.join(run.export_dir, ".tmp-12-4242"))   # an export being written
  (tmp_path / "run" / "export" / "notes").write_text("")
  assert run.export_version_dir(10) == os.path.join(run.path, "export", "10")
  assert run.export_versions() == export_versions(run.export_dir) == [2, 10, 11]
  assert run.next_export_version() == next_export_version(run.export_dir) == 12
  assert run.latest_export() == latest_export(run.export_dir) == run.export_version_dir(10)


def test_a_version_is_published_by_a_rename(tmp_path):
  base = str(tmp_path / "serving")
  seen = []

  def write(folder):
    seen.append(os.path.basename(folder))
    saved_model(folder)

  assert write_version_atomically(base, write) == os.path.join(base, "1")
  assert write_version_atomically(base, write) == os.path.join(base, "2")
  assert seen == [f".tmp-1-{os.getpid()}", f".tmp-2-{os.getpid()}"]
  assert sorted(os.listdir(base)) == ["1", "2"]


def test_a_version_taken_meanwhile_moves_to_the_next_number(tmp_path):
  base = str(tmp_path / "serving")

  def write_while_another_export_takes_1(folder):
    saved_model(folder)
    saved_model(os.path.join(base, "1"))

  assert write_version_atomically(base, write_while_another_export_takes_1) == os.path.join(base, "2")
  assert sorted(os.listdir(base)) == ["1", "2"]


def test_a_failed_write_leaves_nothing(tmp_path):
  base = str(tmp_path / "serving")

  def write_partly_then_fail(folder):
    saved_model(folder)
    raise OSError("disk full")

  with pytest.raises(OSError, match="disk full"):
    write_version_atomically(base, write_partly_then_fail)
  assert os.listdir(base) == []


def test_history_and_source(tmp_path):
  run = ModelDir(str(tmp_path / "run"))
  run.makedirs()
  run.append_history({"step": 1, "loss": 2.0})
  with open(run.history_path, "a") as file:
    file.write('{"step": 2, "lo')   # a write cut short by a kill
  assert run.read_history() == [{"step": 1, "loss": 2.0}]
  run.write_source({"format": "hf-bert", "path": "/src"})
  assert run.read_source() == {"format": "hf-bert", "path": "/src"}
  assert run.source_path == os.path.join(run.path, "source.json")


def test_history_truncated_to_the_resumed_step_keeps_earlier_records_and_drops_a_cut_line(tmp_path):
  run = ModelDir(str(tmp_path))
  for step in (1, 2, 3, 4):
    run.append_history({"step": step, "loss": 1.0 / step})
  run.append_history({"step": 2, "eval": {"accuracy": 0.5}})
  with open(run.history_path, "a") as file:
    file.write('{"step": 5, "lo')   # a write cut short by kill -9
  assert run.truncate_history(2) == 2
  assert run.read_history() == [{"step": 1, "loss": 1.0}, {"step": 2, "loss": 0.5},
                                {"step": 2, "eval": {"accuracy": 0.5}}]
  run.append_history({"step": 3, "loss": 0.25})   # the resumed run's next line is whole
  assert [record["step"] for record in run.read_history()] == [1, 2, 2, 3]


def test_a_streamed_file_appears_whole_when_its_block_ends(tmp_path):
  path = tmp_path / "new" / "lines.txt"   # the folder is made
  with atomic_file(str(path)) as file:
    file.write("one\n")
    assert not path.exists()   # nothing at the target while the block runs
    [temporary] = os.listdir(path.parent)
    assert is_temporary(temporary) and temporary.startswith(".lines.txt.")
    file.write("two\n")
  assert path.read_text() == "one\ntwo\n" and os.listdir(path.parent) == ["lines.txt"]
  write_atomically(str(path), b"\x00\xff")   # bytes, replacing the file
  assert path.read_bytes() == b"\x00\xff"


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
  path = tmp_path / "metadata.json"
  path.write_text("old")
  with pytest.raises(OSError, match="disk full"):
    with atomic_file(str(path)) as file:
      file.write("half of the new")
      raise OSError("disk full")
  with pytest.raises(KeyboardInterrupt):
    with atomic_path(str(path)) as temporary:
      with open(temporary, "w") as file:
        file.write("new")
      raise KeyboardInterrupt
  assert path.read_text() == "old" and os.listdir(tmp_path) == ["metadata.json"]
  with pytest.raises(ValueError, match="'w' or 'wb'"):
    with atomic_file(str(path), "a"):
      pass


def test_a_killed_writer_leaves_the_old_file_and_a_temporary_marked_as_such(tmp_path):
  path = tmp_path / "shard-00000"
  path.write_bytes(b"old records")
  script = textwrap.dedent(f"""
      import os, signal, sys
      from zoo.atomic_files import atomic_file
      with atomic_file({str(path)!r}, "wb") as file:
        file.write(b"new" * 100000)
        file.flush()
        print("written", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
      """)
  process = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
  assert process.returncode == -signal.SIGKILL and "written" in process.stdout, process.stderr
  assert path.read_bytes() == b"old records"
  leftovers = [name for name in os.listdir(tmp_path) if name != "shard-00000"]
  assert len(leftovers) == 1 and is_temporary(leftovers[0])
  assert not is_temporary("shard-00000") and not is_temporary(".tmp")

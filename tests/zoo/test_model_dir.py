"""zoo.model_dir: export versions and their atomic publication, history and source files."""

import os

import pytest

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

"""Fingerprints of input files (`tpu.data.fingerprints`) and the files each data spec reads
(`tpu.data.input_files`), which a resumed training run compares."""

import hashlib
import json
import os
import re

import pytest

from tpu import data
from tpu.data import fingerprints


def test_a_file_is_the_same_by_its_bytes_where_hashed_else_by_its_time(tmp_path, monkeypatch):
  path = tmp_path / "a.txt"
  path.write_bytes(b"the film was good\n")
  first = fingerprints.of_file(str(path))
  assert first == dict(path=str(path), size=18, modified=os.stat(path).st_mtime_ns,
                       sha256=hashlib.sha256(b"the film was good\n").hexdigest())
  os.utime(path, ns=(1, 1))   # touched, or copied anew: the same bytes
  assert fingerprints.of_file(str(path))["modified"] == 1
  assert fingerprints.changes([first], [fingerprints.of_file(str(path))]) == ""
  path.write_bytes(b"the book was good\n")   # the same size, other bytes
  assert fingerprints.changes([first], fingerprints.of_files([str(path)])) == (
      f"1 file(s) changed: {path} (the same size, other contents)")
  path.write_bytes(b"the film was good!\n")
  assert fingerprints.changes([first], [fingerprints.of_file(str(path))]) == (
      f"1 file(s) changed: {path} (18 bytes then, 19 now)")

  monkeypatch.setattr(fingerprints, "HASH_TOTAL_BYTES", 30)   # the first file fits, the second not
  other = tmp_path / "b.txt"
  other.write_bytes(b"the book was bad\n")
  both = fingerprints.of_files([str(path), str(other)])
  assert [item["sha256"] is not None for item in both] == [True, False]
  monkeypatch.setattr(fingerprints, "HASH_BYTES", 4)   # too large to hash: the time tells
  big = fingerprints.of_file(str(path))
  assert big["sha256"] is None
  os.utime(path, ns=(2, 2))
  assert fingerprints.changes([big], [fingerprints.of_file(str(path))]) == (
      f"1 file(s) changed: {path} (the same size, modified since)")


def test_a_file_gone_since_it_was_listed_is_named(tmp_path):
  """A training file removed after its data was listed, or a symbolic link to nothing, is one `DataError`
  naming it (the training job prints it as one line), never a traceback."""
  (tmp_path / "a.txt").write_bytes(b"the film\n")
  (tmp_path / "b.txt").symlink_to(tmp_path / "nowhere.txt")
  with pytest.raises(data.DataError, match="^" + re.escape(f"{tmp_path}/b.txt: a symbolic link to "
                                                           f"{tmp_path}/nowhere.txt, which does not exist")):
    fingerprints.of_files([str(tmp_path / "a.txt"), str(tmp_path / "b.txt")])
  gone = f"{tmp_path}/c.txt: no such file (removed since it was listed)"
  with pytest.raises(data.DataError, match="^" + re.escape(gone)):
    fingerprints.of_file(str(tmp_path / "c.txt"))


def test_each_file_spec_resolves_to_the_files_it_reads(tmp_path):
  for name in ("b.txt", "a.txt", "a.tsv"):
    (tmp_path / name).write_text("text\tlabel\nthe film\t1\n", encoding="utf-8")
  assert data.input_files(f"text:{tmp_path}/*.txt") == [f"{tmp_path}/a.txt", f"{tmp_path}/b.txt"]
  assert data.input_files(f"tsv:{tmp_path}/a.tsv") == [f"{tmp_path}/a.tsv"]
  shards = tmp_path / "shards"
  shards.mkdir()
  for name in ("pretrain-00000-of-00002.tfrecord", "pretrain-00001-of-00002.tfrecord"):
    (shards / name).write_bytes(b"")
  (shards / "metadata.json").write_text(json.dumps({}), encoding="utf-8")
  assert data.input_files(f"tfrecord:{shards}/*.tfrecord") == [
      f"{shards}/pretrain-00000-of-00002.tfrecord", f"{shards}/pretrain-00001-of-00002.tfrecord",
      f"{shards}/metadata.json"]
  assert data.input_files("demo") is None   # generated: no files of the user's

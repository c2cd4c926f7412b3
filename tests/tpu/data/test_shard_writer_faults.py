"""The shard writer's faults: other settings and changed corpora refused, fixes kept, storage errors
retried, corpus errors named, Beam's refusals and resumes, and kill -9 at a random moment."""

import json
import os
import pathlib
import random
import re
import signal
import subprocess
import sys
import time

import pytest
import tensorflow as tf

from tests.tpu.data.shard_writer_corpus import T
from tests.tpu.data.shard_writer_corpus import contents as _contents
from tests.tpu.data.shard_writer_corpus import make_corpus
from tests.tpu.data.shard_writer_corpus import write_shards as _write
from tpu import pretraining_data
from tpu.data import beam_writer
from tpu.data import chunk_plan
from tpu.data import records
from tpu.data import shard_writer
from tpu.data.records import CorpusError
from tpu.data.records import StorageUnavailable
from tpu.data.records import shard_name

ROOT = str(pathlib.Path(__file__).resolve().parents[3])


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  """Real prose in several files, with hostile ones among them."""
  return make_corpus(tmp_path_factory.mktemp("corpus"))


def test_output_of_other_settings_is_refused_and_overwrite_replaces_it(corpus, tmp_path):
  vocab = str(corpus / "wordpiece.vocab")
  first = _write(corpus, tmp_path / "out")
  other_vocab = tmp_path / "other.vocab"
  other_vocab.write_text(pathlib.Path(vocab).read_text() + "zzzextra\n")
  cases = [(dict(shards=4), r"--shards: 3 there, 4 here"),
           (dict(lower_case=False), r"--lower-case: true there, false here"),
           (dict(compress=True), r"--compress: false there, true here"),
           (dict(chunk_mb=1.0), r"--chunk-mb \(bytes\): 16000000 there, 1000000 here"),
           (dict(documents="line"), r"--documents: \"blank-line\" there, \"line\" here")]
  for changes, message in cases:
    with pytest.raises(CorpusError, match=f"made with other settings \\({message}\\): use --overwrite"):
      _write(corpus, tmp_path / "out", **changes)
  with pytest.raises(CorpusError, match=r"--seq-length: 64 there, 32 here"):
    shard_writer.write_pretraining_data([str(corpus / "*.txt")], vocab, 32, str(tmp_path / "out"), 3,
                                        progress=False)
  with pytest.raises(CorpusError, match=r"the vocabulary's SHA-256 \(--vocab\): \"\w+\" there"):
    shard_writer.write_pretraining_data([str(corpus / "*.txt")], str(other_vocab), T, str(tmp_path / "out"),
                                        3, progress=False)
  # An interrupted run's plan is checked too, with the corpus files' sizes.
  chunk_plan.plan_run([str(corpus / "a.txt")], vocab, T, str(tmp_path / "cut"), 2)
  with pytest.raises(CorpusError, match=r"an interrupted run with other settings.*--shards: 2 there, 5 here"):
    chunk_plan.plan_run([str(corpus / "a.txt")], vocab, T, str(tmp_path / "cut"), 5)
  (tmp_path / "cut" / "pretrain-00000-of-00009.tfrecord").write_bytes(b"")
  with pytest.raises(CorpusError, match=r"shards of another --shards or --compress \(pretrain-0+-of-00009"):
    chunk_plan.plan_run([str(corpus / "a.txt")], vocab, T, str(tmp_path / "cut"), 2)

  replaced = _write(corpus, tmp_path / "out", shards=2, overwrite=True)
  assert len(replaced["shards"]) == 2 and replaced["tokens"] == first["tokens"]
  assert sorted(os.listdir(tmp_path / "out")) == ["metadata.json", shard_name(0, 2, False),
                                                  shard_name(1, 2, False), "vocab.txt"]


def test_a_changed_corpus_is_neither_resumed_nor_complete_already(corpus, tmp_path, capsys):
  """Each corpus file's size and modification time are recorded (plan.json, metadata.json): an
  in-place edit that keeps a file's size, an added or a removed file is refused naming it for a
  finished run (an interrupted one keeps what did not change); --overwrite redoes the work."""
  vocab = str(corpus / "wordpiece.vocab")
  folder = tmp_path / "corpus"
  folder.mkdir()
  for name in ("a.txt", "d.txt"):
    (folder / name).write_bytes((corpus / name).read_bytes())
  inputs = [str(folder / "*.txt")]

  def edit_in_place(path):   # the same size, a later modification time
    data = bytearray(path.read_bytes())
    data[10:11] = b"X" if data[10:11] != b"X" else b"Y"
    modified = path.stat().st_mtime_ns
    path.write_bytes(bytes(data))
    os.utime(path, ns=(modified + 10**9, modified + 10**9))

  # An interrupted run (its plan written, nothing packed), then a.txt edited in place: the rerun names the
  # change and goes on with the new files (what it keeps of packed chunks: the test after this one).
  chunk_plan.plan_run(inputs, vocab, T, str(tmp_path / "cut"), 2)
  edit_in_place(folder / "a.txt")
  capsys.readouterr()
  plan, _ = chunk_plan.plan_run(inputs, vocab, T, str(tmp_path / "cut"), 2)
  assert re.search(r"the corpus changed since the interrupted run in \S+ \(1 file\(s\) changed: \S+/a.txt "
                   r"\(the same size, modified since .*\): keeping 0 of 0 packed chunks",
                   capsys.readouterr().err)
  recorded = json.loads((tmp_path / "cut" / chunk_plan.WORK_FOLDER / chunk_plan.PLAN_FILE).read_text())
  assert recorded["files"] == plan.files

  # A finished run records its files; a file added, removed or changed since is named, never
  # "complete already".
  metadata = shard_writer.write_pretraining_data(inputs, vocab, T, str(tmp_path / "out"), 2, progress=False)
  assert [[os.path.basename(path), size] for path, size, _ in metadata["files"]] == [
      ["a.txt", (folder / "a.txt").stat().st_size], ["d.txt", (folder / "d.txt").stat().st_size]]
  capsys.readouterr()
  assert shard_writer.write_pretraining_data(inputs, vocab, T, str(tmp_path / "out"), 2,
                                             progress=False) == metadata
  assert "complete already" in capsys.readouterr().err
  (folder / "e.txt").write_text("A new document.\n")
  with pytest.raises(CorpusError, match=r"a corpus that has changed since \(1 file\(s\) added: \S+/e.txt\)"):
    shard_writer.write_pretraining_data(inputs, vocab, T, str(tmp_path / "out"), 2, progress=False)
  (folder / "e.txt").unlink()
  (folder / "d.txt").rename(tmp_path / "d.txt")
  with pytest.raises(CorpusError, match=r"\(1 file\(s\) removed: \S+/d.txt\): use --overwrite"):
    shard_writer.write_pretraining_data(inputs, vocab, T, str(tmp_path / "out"), 2, progress=False)
  (tmp_path / "d.txt").rename(folder / "d.txt")
  edit_in_place(folder / "d.txt")
  with pytest.raises(CorpusError, match=r"1 file\(s\) changed: \S+/d.txt \(the same size"):
    shard_writer.write_pretraining_data(inputs, vocab, T, str(tmp_path / "out"), 2, progress=False)
  redone = shard_writer.write_pretraining_data(inputs, vocab, T, str(tmp_path / "out"), 2, progress=False,
                                               overwrite=True)
  assert redone["files"] != metadata["files"] and "complete already" not in capsys.readouterr().err

  # Output of a writer that recorded no files cannot be compared: refused, not taken as complete.
  path = tmp_path / "out" / "metadata.json"
  recorded = json.loads(path.read_text())
  del recorded["files"]
  path.write_text(json.dumps(recorded))
  with pytest.raises(CorpusError, match=r"metadata.json records no corpus files .*: use --overwrite"):
    shard_writer.write_pretraining_data(inputs, vocab, T, str(tmp_path / "out"), 2, progress=False)


@pytest.mark.parametrize("fix", [b"e", b"\xc3\xa9 and more words"])
def test_fixing_a_bad_line_keeps_the_chunks_whose_bytes_did_not_change(corpus, tmp_path, capsys, fix):
  """A byte that is not UTF-8 in a late chunk stops the run; once it is fixed (in place, or with text of
  another length), the rerun keeps the packed chunks whose bytes (up to 2 S + 1 past their end: the
  rule's look-ahead) are the same, says so, repacks the rest, discards shards of the old corpus, and
  writes what a fresh run on the fixed corpus writes."""
  vocab = str(corpus / "wordpiece.vocab")
  folder = tmp_path / "corpus"
  folder.mkdir()
  data = (corpus / "a.txt").read_bytes() + b"\n" + (corpus / "d.txt").read_bytes()
  chunk_bytes = 20000
  bad = data.index(b" ", int(len(data) * 0.85))
  (folder / "text.txt").write_bytes(data[:bad] + b"\xff" + data[bad + 1:])

  def run(out):
    return shard_writer.write_pretraining_data([str(folder / "text.txt")], vocab, T, str(out), 2,
                                               chunk_mb=chunk_bytes / 1e6, progress=False)
  with pytest.raises(CorpusError, match=r"text.txt:\d+: not UTF-8"):
    run(tmp_path / "out")
  packed = bad // chunk_bytes
  leftover = tmp_path / "out" / shard_name(0, 2, False)
  leftover.write_bytes(b"a shard of an interrupted run")
  modified = (folder / "text.txt").stat().st_mtime_ns
  (folder / "text.txt").write_bytes(data[:bad] + fix + data[bad + 1:])
  os.utime(folder / "text.txt", ns=(modified + 10**9, modified + 10**9))   # an edit takes longer than a run
  capsys.readouterr()
  fixed = run(tmp_path / "out")
  kept = sum((index + 1) * chunk_bytes + 2 * chunk_bytes + 1 <= bad for index in range(packed))
  assert kept >= 4
  assert re.search(rf"changed: \S+text.txt .*: keeping {kept} of {packed} packed chunks whose bytes did not "
                   rf"change; repacking {fixed['chunks'] - kept} of {fixed['chunks']} chunks and discarding "
                   r"1 shards", capsys.readouterr().err)
  assert run(tmp_path / "fresh") == fixed
  assert _contents(tmp_path / "out") == _contents(tmp_path / "fresh")


class _FlakyStorage:
  """`tf.io.gfile.GFile` whose opens of the corpus files (those whose path holds `match`) fail with
  `UnavailableError` (as gs:// does now and then) `failures` times in all, then read as usual; retries wait
  0.01 s, then 0.02 s, ..."""

  def __init__(self, monkeypatch, failures, match=".txt"):
    self.failures, self.opened = failures, 0
    real = tf.io.gfile.GFile

    def flaky(path, mode="r"):
      if str(path).endswith(".txt") and match in str(path) and "r" in mode:
        self.opened += 1
        if self.failures:
          self.failures -= 1
          raise tf.errors.UnavailableError(None, None, f"{path}: connection reset by peer")
      return real(path, mode)
    monkeypatch.setattr(tf.io.gfile, "GFile", flaky)
    monkeypatch.setattr(records, "FIRST_WAIT_SECONDS", 0.01)


@pytest.mark.slow
def test_transient_read_errors_are_retried_and_exhausted_retries_keep_the_work(corpus, tmp_path, capsys,
                                                                               monkeypatch):
  inputs = ["a.txt", "d.txt"]
  reference = _write(corpus, tmp_path / "reference", inputs=inputs, chunk_mb=0.02)
  capsys.readouterr()
  storage = _FlakyStorage(monkeypatch, failures=3)
  assert _write(corpus, tmp_path / "flaky", inputs=inputs, chunk_mb=0.02) == reference
  assert _contents(tmp_path / "flaky") == _contents(tmp_path / "reference")
  stderr = capsys.readouterr().err
  assert stderr.count("UnavailableError") == 3 and "retrying in 0.01 s (attempt 2, for up to 300 s)" in stderr
  assert "retrying in 0.02 s (attempt 3, for up to 300 s)" in stderr

  # Storage that stays down past the retries' time (0.05 s here): the run stops, keeping what it packed.
  storage.failures, storage.opened = 0, 0
  real_pack = shard_writer.pack_chunk

  def pack_then_storage_goes_down(plan, index, bar=None):
    if index == 2:
      storage.failures = 10**6
    return real_pack(plan, index, bar)
  monkeypatch.setattr(shard_writer, "pack_chunk", pack_then_storage_goes_down)
  with pytest.raises(StorageUnavailable, match=r"packing chunk 2 \(a.txt\[40000:60000\]\): "
                                               r"UnavailableError.*still failing after \d+ attempts over 0 s;"
                                               r" --retry-seconds 0.05\).*the work done so far is kept"):
    _write(corpus, tmp_path / "down", inputs=inputs, chunk_mb=0.02, retry_seconds=0.05)
  work = tmp_path / "down" / chunk_plan.WORK_FOLDER
  assert sorted(name for name in os.listdir(work) if name.endswith(".json") and name.startswith("chunk")) == [
      "chunk-00000.json", "chunk-00001.json"]
  storage.failures = 0   # storage is back
  monkeypatch.setattr(shard_writer, "pack_chunk", real_pack)
  capsys.readouterr()
  assert _write(corpus, tmp_path / "down", inputs=inputs, chunk_mb=0.02) == reference
  assert "keeping 2 of" in capsys.readouterr().err
  assert _contents(tmp_path / "down") == _contents(tmp_path / "reference")


def test_beam_steps_retry_storage_errors_and_a_lasting_outage_ends_in_one_message(corpus, tmp_path, capsys,
                                                                                  monkeypatch):
  """On Beam (DirectRunner in this process), a worker's read that fails twice is retried by the step
  itself, to the single process's bytes; storage that stays down for one file ends the run with one
  StorageUnavailable naming it, the chunks of the other file kept, and a rerun finishes the same bytes."""
  inputs = ["a.txt", "d.txt"]
  reference = _write(corpus, tmp_path / "reference", inputs=inputs, chunk_mb=0.05)

  def beam(out, **kwargs):
    return beam_writer.write_with_beam([str(corpus / name) for name in inputs],
                                       str(corpus / "wordpiece.vocab"), T, str(out), 3, chunk_mb=0.05,
                                       runner="DirectRunner", **kwargs)
  storage = _FlakyStorage(monkeypatch, failures=2, match="d.txt")
  capsys.readouterr()
  assert beam(tmp_path / "flaky") == reference
  assert _contents(tmp_path / "flaky") == _contents(tmp_path / "reference")
  assert capsys.readouterr().err.count("d.txt: connection reset by peer; retrying in") == 2

  storage.failures = 10**6
  capsys.readouterr()
  code = pretraining_data.main(["--input", *(str(corpus / name) for name in inputs), "--vocab",
                                str(corpus / "wordpiece.vocab"), "--seq-length", str(T), "--out",
                                str(tmp_path / "down"), "--shards", "3", "--chunk-mb", "0.05",
                                "--retry-seconds", "0.05", "--runner", "DirectRunner"])
  stderr = capsys.readouterr().err
  errors = [line for line in stderr.splitlines() if line.startswith("tpu.pretraining_data: error:")]
  assert code == 1 and len(errors) == 1 and "Traceback" not in stderr, stderr
  assert re.match(r"tpu.pretraining_data: error: packing chunk \d+ \([ad].txt\[\d+:\d+\]"
                  r"( \+ 1 more file\(s\))?\): UnavailableError: \S+/d.txt: connection reset.*the work done "
                  r"so far is kept", errors[0]), errors[0]
  work = tmp_path / "down" / chunk_plan.WORK_FOLDER
  kept = sorted(name for name in os.listdir(work) if name.startswith("chunk") and name.endswith(".json"))
  size_a = (corpus / "a.txt").stat().st_size
  assert kept == [f"chunk-{index:05d}.json" for index in range(size_a // 50000)], "a.txt's chunks are kept"
  assert not [name for name in os.listdir(work) if name.endswith(".error")]
  assert not [name for name in os.listdir(tmp_path / "down") if name.startswith("pretrain")]
  storage.failures = 0
  capsys.readouterr()
  assert beam(tmp_path / "down") == reference
  assert f"keeping {len(kept)} of" in capsys.readouterr().err
  assert _contents(tmp_path / "down") == _contents(tmp_path / "reference")


def test_a_corpus_error_names_file_and_line_and_keeps_the_chunks_before_it(corpus, tmp_path, capsys):
  folder = tmp_path / "corpus"
  folder.mkdir()
  (folder / "a.txt").write_bytes((corpus / "a.txt").read_bytes())
  (folder / "z_bad.txt").write_bytes(b"fine line\n\nsecond document\nbroken \xff\xfe here\n")
  vocab = str(corpus / "wordpiece.vocab")

  def run():
    return shard_writer.write_pretraining_data([str(folder / "*.txt")], vocab, T, str(tmp_path / "out"), 2,
                                               chunk_mb=0.02, progress=False)
  with pytest.raises(CorpusError, match=r"z_bad.txt:4: not UTF-8 .*\(\d+ chunk\(s\) packed before it "
                                        r"are kept") as first:
    run()
  kept = int(re.search(r"\((\d+) chunk", str(first.value)).group(1))
  assert kept >= 2
  work = tmp_path / "out" / chunk_plan.WORK_FOLDER
  indexes = [name for name in os.listdir(work) if name.startswith("chunk") and name.endswith(".json")]
  assert len(indexes) == kept
  capsys.readouterr()
  with pytest.raises(CorpusError, match=r"z_bad.txt:4: not UTF-8"):
    run()   # the rerun keeps them and meets the same line
  assert f"keeping {kept} of" in capsys.readouterr().err


def test_a_dangling_link_or_a_file_removed_once_listed_is_named_in_one_line(corpus, tmp_path, capsys,
                                                                            monkeypatch):
  """A corpus file that is a symbolic link to nothing is named, with its target, by one line on stderr and
  status 2 (the single process and Beam alike: before any pipeline runs); a file removed after the corpus
  was listed is named when its chunk is read, the chunks before it kept."""
  folder = tmp_path / "corpus"
  folder.mkdir()
  (folder / "a.txt").write_bytes((corpus / "a.txt").read_bytes())
  (folder / "b.txt").symlink_to(tmp_path / "nowhere.txt")
  vocab = str(corpus / "wordpiece.vocab")
  args = ["--input", str(folder / "*.txt"), "--vocab", vocab, "--seq-length", str(T), "--out",
          str(tmp_path / "out"), "--chunk-mb", "0.02", "--no-progress"]
  for runner in ([], ["--runner", "DirectRunner"]):
    capsys.readouterr()
    assert pretraining_data.main(args + runner) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"tpu.pretraining_data: error: {folder}/b.txt: cannot be read: a symbolic link to "
        f"{tmp_path}/nowhere.txt, which does not exist"]

  (folder / "b.txt").unlink()
  (folder / "z.txt").write_bytes((corpus / "d.txt").read_bytes())
  real = shard_writer.report_kept

  def listed_then_removed(plan):
    (folder / "z.txt").unlink()
    return real(plan)
  monkeypatch.setattr(shard_writer, "report_kept", listed_then_removed)
  capsys.readouterr()
  assert pretraining_data.main(args) == 2
  errors = capsys.readouterr().err.splitlines()
  assert len(errors) == 1 and re.fullmatch(
      rf"tpu.pretraining_data: error: {re.escape(str(folder))}/z.txt: cannot be read: no such file \(removed "
      r"since it was listed\) \([1-9]\d* chunk\(s\) packed before it are kept in .*", errors[0]), errors
  # On Beam, the worker's step leaves that message for the launcher, which raises it as the one error.
  (folder / "z.txt").write_bytes((corpus / "d.txt").read_bytes())
  plan, _ = chunk_plan.plan_run([str(folder / "*.txt")], vocab, T, str(tmp_path / "beam"), 2, chunk_mb=0.02)
  (folder / "z.txt").unlink()
  index = next(index for index, pieces in enumerate(plan.chunks) if pieces[-1][0].endswith("z.txt"))
  assert beam_writer._pack(index, plan) is None
  with pytest.raises(CorpusError, match=rf"^{re.escape(str(folder))}/z.txt: cannot be read: no such file "
                                        r"\(removed since it was listed\) \(0 of \d+ chunks packed are kept"):
    beam_writer.raise_failures(plan)


def test_a_retry_line_names_the_chunk_and_the_failing_file_not_every_piece(corpus, tmp_path, capsys,
                                                                            monkeypatch):
  """A chunk of many small files: a retry of its packing names the chunk by its index and first piece and
  the file that failed, in a short line, never every piece of the chunk."""
  monkeypatch.chdir(tmp_path)   # the corpus as `corpus/part-*.txt`: paths of a usual length
  folder = tmp_path / "corpus"
  folder.mkdir()
  text = (corpus / "a.txt").read_text(encoding="utf-8")
  for index in range(40):
    (folder / f"part-{index:03d}.txt").write_text(text[index * 300:(index + 1) * 300], encoding="utf-8")
  _FlakyStorage(monkeypatch, failures=1, match="part-017")
  shard_writer.write_pretraining_data(["corpus/*.txt"], str(corpus / "wordpiece.vocab"), T, "out", 1,
                                      progress=False)
  retries = [line for line in capsys.readouterr().err.splitlines() if "retrying in" in line]
  assert len(retries) == 1 and len(retries[0]) < 200, retries
  assert retries[0].startswith("tpu.pretraining_data: packing chunk 0 (part-000.txt[0:300] + 39 more "
                               "file(s)): UnavailableError: corpus/part-017.txt: connection reset by peer; "
                               "retrying in")
  assert "part-001" not in retries[0]


def test_beam_options_need_a_runner(capsys):
  with pytest.raises(SystemExit):
    pretraining_data.main(["--input", "x", "--vocab", "v", "--seq-length", "8", "--out", "o",
                           "--direct_num_workers", "2"])
  assert "Beam pipeline options need --runner" in capsys.readouterr().err


@pytest.mark.slow
def test_beam_refuses_and_resumes_as_one_process_does(corpus, tmp_path):
  """On Beam (DirectRunner in this process): a corpus of fewer examples than shards writes nothing; a
  corpus error names the file and line and keeps the chunks the workers packed; a shard lost from a
  finished output is written again, alone, to the same bytes."""
  vocab = str(corpus / "wordpiece.vocab")

  def beam(inputs, out, shards, **kwargs):
    return beam_writer.write_with_beam(inputs, vocab, T, str(out), shards, runner="DirectRunner", **kwargs)
  (tmp_path / "tiny.txt").write_text("One short sentence.\n\nAnd another one.\n")
  with pytest.raises(CorpusError, match=r"the corpus makes 1 example of 64 ids, fewer than the 8 shards"):
    beam([str(tmp_path / "tiny.txt")], tmp_path / "tiny", 8)
  assert os.listdir(tmp_path / "tiny") == []

  folder = tmp_path / "corpus"
  folder.mkdir()
  (folder / "a.txt").write_bytes((corpus / "a.txt").read_bytes())
  (folder / "z_bad.txt").write_bytes(b"fine line\n\nsecond document\nbroken \xff\xfe here\n")
  with pytest.raises(CorpusError, match=r"z_bad.txt:4: not UTF-8.*\(\d+ of \d+ chunks packed are kept in"):
    beam([str(folder / "*.txt")], tmp_path / "bad", 2, chunk_mb=0.02)
  work = tmp_path / "bad" / chunk_plan.WORK_FOLDER
  assert len([name for name in os.listdir(work) if name.startswith("chunk") and name.endswith(".json")]) >= 2

  single = _write(corpus, tmp_path / "single", inputs=["a.txt", "d.txt"], chunk_mb=0.02)
  beam([str(corpus / "a.txt"), str(corpus / "d.txt")], tmp_path / "beam", 3, chunk_mb=0.02)
  assert _contents(tmp_path / "beam") == _contents(tmp_path / "single") and single["chunks"] >= 4
  lost = tmp_path / "beam" / shard_name(1, 3, False)
  lost.unlink()
  beam([str(corpus / "a.txt"), str(corpus / "d.txt")], tmp_path / "beam", 3, chunk_mb=0.02)
  assert _contents(tmp_path / "beam") == _contents(tmp_path / "single")


@pytest.mark.slow
def test_one_process_and_beam_on_two_workers_write_the_same_bytes(corpus, tmp_path):
  inputs = ["a.txt", "b_empty.txt", "c_hostile.txt", "e_long.txt"]
  single = _write(corpus, tmp_path / "single", inputs=inputs, compress=True, chunk_mb=0.02)
  beam_writer.write_with_beam([str(corpus / name) for name in inputs], str(corpus / "wordpiece.vocab"), T,
                              str(tmp_path / "beam"), 3, compress=True, chunk_mb=0.02, runner="DirectRunner",
                              pipeline_args=["--direct_num_workers=2",
                                             "--direct_running_mode=multi_processing"])
  assert single["chunks"] >= 5
  assert _contents(tmp_path / "beam") == _contents(tmp_path / "single")


@pytest.mark.slow
def test_a_run_killed_at_a_random_moment_resumes_to_the_same_bytes(corpus, tmp_path, capsys):
  inputs = ["a.txt", "c_hostile.txt", "d.txt"]
  reference = _write(corpus, tmp_path / "reference", inputs=inputs, chunk_mb=0.012)
  out = tmp_path / "killed"
  command = [sys.executable, "-m", "tpu.pretraining_data", "--input", *(str(corpus / n) for n in inputs),
             "--vocab", str(corpus / "wordpiece.vocab"), "--seq-length", str(T), "--out", str(out),
             "--shards", "3", "--chunk-mb", "0.012", "--no-progress"]
  process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env=dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3"))
  deadline = time.monotonic() + 120
  work = out / chunk_plan.WORK_FOLDER
  while not (work.exists() and any(name.endswith(".json") and name.startswith("chunk")
                                   for name in os.listdir(work))):
    assert process.poll() is None and time.monotonic() < deadline, "the run ended before packing a chunk"
    time.sleep(0.02)
  delay = random.uniform(0, 2.5)
  time.sleep(delay)
  process.send_signal(signal.SIGKILL)
  process.wait()
  capsys.readouterr()
  again = _write(corpus, out, inputs=inputs, chunk_mb=0.012)
  stderr = capsys.readouterr().err
  if process.returncode == -signal.SIGKILL and not (out / "metadata.json").exists():
    assert re.search(r"keeping [1-9]\d* of \d+ packed chunks", stderr), (delay, stderr)
  assert again == reference
  assert _contents(out) == _contents(tmp_path / "reference"), f"killed after {delay:.2f} s"

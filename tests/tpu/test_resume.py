"""Resuming with changed settings: the saved input position's stream is compared with the run's (a
finished run's rerun too), differences are refused by name (or continued with --reset-input),
config.json is written only by a run that trains, and leftovers of interrupted saves are removed.
(Exact resume after kills: tests/tpu/test_train.py and test_multi_worker.py.)"""

import json
import logging
import os
import re
import subprocess
import sys

import pytest

from tests.tpu.tasks.losses import TINY_FUNNEL
from tests.tpu.tasks.losses import tiny_config
from tpu import train
from tpu.checkpointing import InputStreamChanged
from tpu.checkpointing import Resume
from tpu.checkpointing import check_finished_input
from tpu.checkpointing import input_stream
from tpu.checkpointing import resume_input
from tpu.checkpointing import stream_path
from tpu.config import TrainConfig
from tpu.prepare import Prepared
from tpu.strategy import Worker
from zoo.atomic_files import temporary_path
from zoo.model_dir import ModelDir

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "film"]


def _position(run, worker, workers, step, stream=None):
  """The files of a saved input position (their contents do not matter to the check)."""
  prefix = run.input_state_prefix(worker, workers, step)
  os.makedirs(os.path.dirname(prefix), exist_ok=True)
  for suffix in (".index", ".data-00000-of-00001"):
    open(prefix + suffix, "wb").close()
  if stream is not None:
    with open(stream_path(prefix), "w") as file:
      json.dump(stream, file)
  return prefix


def test_the_stream_record_holds_what_fixes_the_input():
  config = TrainConfig(task="mlm", data="text:a.txt", batch_size=8, seq_length=16, seed=3, shuffle_buffer=100,
                       whole_word_masking=True)
  stream = input_stream(config, VOCAB, workers=2, local_replicas=4)
  assert {key: stream[key] for key in ("task", "data", "batch_size", "seq_length", "seed", "shuffle_buffer",
                                       "workers", "local_replicas", "whole_word_masking",
                                       "max_predictions_per_seq")} == dict(
      task="mlm", data="text:a.txt", batch_size=8, seq_length=16, seed=3, shuffle_buffer=100, workers=2,
      local_replicas=4, whole_word_masking=True, max_predictions_per_seq=None)
  assert len(stream["vocabulary"]) == 64
  assert input_stream(config, VOCAB[:-1], 2, 4)["vocabulary"] != stream["vocabulary"]
  # Settings that change no example are not part of it.
  assert input_stream(config.replace(learning_rate=1.0, steps=5, dropout=0.3), VOCAB, 2, 4) == stream
  assert "learning_rate" not in stream and "dropout" not in stream and "steps_per_execution" not in stream


def test_a_position_of_another_stream_is_refused_naming_each_difference(tmp_path, caplog):
  run = ModelDir(str(tmp_path))
  config = TrainConfig(task="mlm", data="text:a.txt", batch_size=8, seq_length=16)
  saved = input_stream(config, VOCAB, 1, 2)
  prefix = _position(run, 0, 1, 6, saved)
  assert resume_input(run, Worker(), 6, saved, seed=0).prefix == prefix

  now = input_stream(config.replace(batch_size=16, data="text:b.txt"), VOCAB, 1, 1)
  with pytest.raises(InputStreamChanged) as refused:
    resume_input(run, Worker(), 6, now, seed=0)
  message = str(refused.value)
  assert message.startswith(f"{tmp_path}: the checkpoint of step 6 was saved with another input stream")
  assert ('batch_size: 8 saved, 16 now; data: "text:a.txt" saved, "text:b.txt" now; local_replicas: 2 saved, '
          '1 now. Rerun with the saved settings') in message
  assert "or add --reset-input to continue the model from step 6" in message

  caplog.set_level(logging.INFO, logger="tpu")
  assert resume_input(run, Worker(), 6, now, seed=5, reset_input=True) == Resume(11, origin=6)   # new
  assert "--reset-input: the input position saved at step 6 belongs to another input stream" in caplog.text
  assert "batch_size: 8 saved, 16 now" in caplog.text and "a new shuffle (seed 11)" in caplog.text


def test_a_finished_run_is_compared_alike_and_a_rerun_that_trains_nothing_keeps_config_json(tmp_path, caplog):
  """A rerun of a run that has trained all its steps (it evaluates and exports again) compares the record
  of its last step as a resume does; with --reset-input it only warns (it trains nothing). config.json is
  the record of the settings the run trained with: only a run that trains writes it."""
  run = ModelDir(str(tmp_path))
  config = TrainConfig(task="mlm", data="text:a.txt", batch_size=8, seq_length=16)
  saved = input_stream(config, VOCAB, 1, 1)
  _position(run, 0, 1, 6, saved)
  caplog.set_level(logging.INFO, logger="tpu")
  check_finished_input(run, Worker(), 6, saved)   # the same stream: nothing to say
  assert not caplog.text
  now = input_stream(config.replace(batch_size=16), VOCAB, 1, 1)
  with pytest.raises(InputStreamChanged) as refused:
    check_finished_input(run, Worker(), 6, now)
  assert str(refused.value).startswith(f"{tmp_path}: the checkpoint of step 6 was saved with another input "
                                       "stream than this run's settings make: batch_size: 8 saved, 16 now. "
                                       "The run has trained all its steps")
  check_finished_input(run, Worker(), 6, now, reset_input=True)
  assert ("--reset-input: the checkpoint of step 6 was saved with another input stream (batch_size: 8 "
          "saved, 16 now), but the run has trained all its steps") in caplog.text

  finished = tiny_config(tmp_path / "finished", steps=4).validate()
  model_dir = ModelDir(finished.model_dir)
  model_dir.write_config(finished.recorded().to_dict())
  with open(model_dir.config_path, "rb") as file:
    record = file.read()
  caplog.clear()
  rerun = finished.replace(learning_rate=0.5)
  train._write_run_files(Prepared(rerun, VOCAB, None, None, model_dir), Worker(), 4)
  with open(model_dir.config_path, "rb") as file:
    assert file.read() == record
  assert "config.json keeps the settings it trained with" in caplog.text
  assert "learning_rate: 0.001 recorded, 0.5 now" in caplog.text
  train._write_run_files(Prepared(rerun.replace(steps=6), VOCAB, None, None, model_dir), Worker(), 4)
  written = TrainConfig.from_model_dir(model_dir)   # more steps train: their settings are the record
  assert (written.learning_rate, written.steps) == (0.5, 6)


def test_changed_evaluation_data_is_named_in_a_warning(tmp_path, caplog):
  """The evaluation data fixes no training example: its changes are warned of, not refused."""
  run = ModelDir(str(tmp_path))
  config = TrainConfig(task="classify", data="tsv:train.tsv", batch_size=8, seq_length=16)
  then = dict(spec="tsv:dev.tsv", files=[dict(path="dev.tsv", size=10, modified=1, sha256="a")])
  prefix = _position(run, 0, 1, 6, input_stream(config, VOCAB, 1, 1, evaluation=then))
  caplog.set_level(logging.INFO, logger="tpu")
  same = input_stream(config, VOCAB, 1, 1, evaluation=dict(then))
  assert resume_input(run, Worker(), 6, same, seed=0).prefix == prefix and not caplog.text
  now = dict(then, files=[dict(path="dev.tsv", size=12, modified=2, sha256="b")])
  changed = input_stream(config, VOCAB, 1, 1, evaluation=now)
  assert resume_input(run, Worker(), 6, changed, seed=0).prefix == prefix
  assert ("the evaluation data differs from the run's until step 6 (1 file(s) changed: dev.tsv (10 bytes "
          "then, 12 now)): its metrics from here on measure other examples") in caplog.text


def test_another_number_of_workers_is_refused_and_a_step_without_positions_starts_a_new_shuffle(tmp_path,
                                                                                                caplog):
  run = ModelDir(str(tmp_path))
  config = TrainConfig(task="classify", data="demo", batch_size=8, seq_length=16)
  for index in range(2):
    _position(run, index, 2, 4, input_stream(config, VOCAB, 2, 1))
  with pytest.raises(InputStreamChanged, match=r"step 4 .*: workers: 2 saved, 1 now\. Rerun"):
    resume_input(run, Worker(), 4, input_stream(config, VOCAB, 1, 1), seed=0)
  # Positions written before the record existed: the worker count still tells.
  os.remove(stream_path(run.input_state_prefix(0, 2, 4)))
  with pytest.raises(InputStreamChanged, match=r"step 4 .*: workers: 2 saved, 1 now\. Rerun"):
    resume_input(run, Worker(), 4, input_stream(config, VOCAB, 1, 1), seed=0)
  old = _position(run, 0, 1, 8)   # this worker's position without a record: taken as it is
  assert resume_input(run, Worker(), 8, input_stream(config, VOCAB, 1, 1), seed=0).prefix == old

  caplog.set_level(logging.INFO, logger="tpu")
  assert resume_input(run, Worker(), 12, input_stream(config, VOCAB, 1, 1), seed=2) == Resume(14, origin=12)
  assert "no input position saved at step 12 for the only worker: the input pipeline starts a new shuffle " \
         "(seed 14)" in caplog.text
  # One worker's position lost, its sibling's kept: that worker starts a new shuffle, and says so.
  stream = input_stream(config, VOCAB, 2, 1)
  sibling = _position(run, 0, 2, 16, stream)
  me = Worker(index=1, count=2, is_chief=False, name="worker 1")
  assert resume_input(run, me, 16, stream, seed=3) == Resume(19, origin=16)
  assert (f"no input position saved at step 16 for worker 1, though {sibling} holds another worker's "
          "of the same stream: this worker's input pipeline starts a new shuffle (seed 19)") in caplog.text


def _corpus(path, words):
  path.write_text("".join(f"{' '.join(words[(i + j) % len(words)] for j in range(9))}\n" for i in range(200)),
                  encoding="utf-8")
  return f"text:{path}"


@pytest.mark.slow
def test_a_resume_with_changed_batch_size_or_data_is_refused_before_any_step_then_reset(tmp_path, caplog):
  """The same model directory rerun with another batch size, or on another corpus (both would
  have gone on silently or in a TensorFlow traceback): refused before any step, nothing written;
  with --reset-input the model continues from its checkpoint on the new input, with a warning."""
  first = _corpus(tmp_path / "a.txt", ["the", "film", "was", "good", "plot", "dull", "cast", "fine"])
  second = _corpus(tmp_path / "b.txt", ["a", "story", "felt", "long", "ending", "bad", "music", "loud"])
  config = tiny_config(tmp_path / "run", task="mlm", data=first, steps=4, checkpoint_every=2, batch_size=8,
                       model_overrides=dict(TINY_FUNNEL, num_decoder_layers=1), vocab_size=60,
                       max_predictions_per_seq=2, export=False)
  train.run(config)
  run = ModelDir(config.model_dir)
  lines = run.read_history()
  with open(run.config_path) as file:
    saved_config = file.read()
  assert _saved_stream(run, 4)["batch_size"] == 8

  # The run has trained all its steps: a rerun (which evaluates and exports it again) is compared all the
  # same, refused by name with nothing written; with --reset-input it trains nothing and keeps the record.
  with pytest.raises(InputStreamChanged, match="batch_size: 8 saved, 16 now") as refused:
    train.run(config.replace(batch_size=16))
  assert "The run has trained all its steps: rerun with the saved settings" in str(refused.value)
  with pytest.raises(InputStreamChanged, match="whole_word_masking: false saved, true now"):   # a task's
    train.run(config.replace(whole_word_masking=True))
  with pytest.raises(ValueError, match="other model settings .*mlm_transform"):   # even with --reset-input
    train.run(config.replace(mlm_transform=True), reset_input=True)
  with open(run.config_path) as file:
    assert file.read() == saved_config
  caplog.set_level(logging.INFO, logger="tpu")
  train.run(config.replace(batch_size=16, learning_rate=0.5), reset_input=True)
  assert "but the run has trained all its steps, so this run trains nothing" in caplog.text
  assert "config.json keeps the settings it trained with" in caplog.text
  assert "batch_size: 8 recorded, 16 now" in caplog.text
  assert run.read_history() == lines and run.latest_step() == 4
  with open(run.config_path) as file:
    assert file.read() == saved_config
  caplog.clear()

  for changed, named in ((dict(batch_size=16), "batch_size: 8 saved, 16 now"),
                         (dict(data=second), f'data: "{first}" saved, "{second}" now')):
    with pytest.raises(InputStreamChanged, match="Rerun with the saved settings") as refused:
      train.run(config.replace(steps=6, **changed))
    assert named in str(refused.value) and "step 4" in str(refused.value)
    assert run.read_history() == lines and run.latest_step() == 4   # not a step taken
    with open(run.config_path) as file:
      assert file.read() == saved_config   # nor the refused settings written

  # The vocabulary is the run's: another --vocab is refused, never ignored (nothing written).
  other_vocab = tmp_path / "other_vocab.txt"
  other_vocab.write_text("\n".join(run.read_vocab()[:-1]) + "\n", encoding="utf-8")
  size = len(run.read_vocab())
  expected = (rf"--vocab .*other_vocab.txt \({size - 1} tokens, .*is not the vocabulary of the run in this "
              rf"model directory, .*vocab.txt \({size} tokens")
  with pytest.raises(ValueError, match=expected) as refused:
    train.run(config.replace(steps=6, vocab=str(other_vocab)))
  assert "a run's vocabulary cannot change" in str(refused.value)
  # Another document mode, though the first run took the default.
  with pytest.raises(InputStreamChanged, match='documents: "line" saved, "blank-line" now'):
    train.run(config.replace(steps=6, documents="blank-line"))
  # The same path with other contents; a copy of the same bytes (a new modification time) is the same file.
  corpus = tmp_path / "a.txt"
  text = corpus.read_text(encoding="utf-8")
  corpus.write_text(text.replace("film", "book", 1), encoding="utf-8")
  with pytest.raises(InputStreamChanged, match=r"the training data's files: 1 file\(s\) changed: .*a.txt "
                                               r"\(the same size, other contents\)"):
    train.run(config.replace(steps=6))
  corpus.write_text(text + "one more line\n", encoding="utf-8")
  before, after = len(text.encode()), len(text.encode()) + 14
  with pytest.raises(InputStreamChanged, match=rf"a.txt \({before:,} bytes then, {after:,} now\)"):
    train.run(config.replace(steps=6))
  for _ in range(2):
    assert run.read_history() == lines and run.latest_step() == 4
    with open(run.config_path) as file:
      assert file.read() == saved_config
  corpus.write_text(text, encoding="utf-8")

  # The command line says the same on stderr, with status 2 and no traceback.
  process = subprocess.run([sys.executable, "-m", "tpu.train", "--config", _write_config(tmp_path, config),
                            "--steps", "6", "--batch-size", "16"], cwd=ROOT, capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=ROOT), timeout=300)
  assert process.returncode == 2, process.stderr[-2000:]
  assert "tpu.train: error: " in process.stderr and "batch_size: 8 saved, 16 now" in process.stderr
  assert "Traceback" not in process.stderr

  caplog.set_level(logging.INFO, logger="tpu")
  train.run(config.replace(steps=6, data=second), reset_input=True)
  assert "--reset-input: the input position saved at step 4 belongs to another input stream" in caplog.text
  assert [record["step"] for record in run.read_history() if "loss" in record] == [1, 2, 3, 4, 5, 6]
  assert _saved_stream(run, 6)["data"] == second   # the positions from here on belong to the new stream
  train.run(config.replace(steps=8, data=second))   # which resumes as usual
  assert run.latest_step() == 8


def _saved_stream(run, step):
  """The stream record of the only worker's input position at `step`."""
  with open(stream_path(run.input_state_prefix(0, 1, step))) as file:
    return json.load(file)


def _write_config(tmp_path, config):
  path = tmp_path / "config.json"
  path.write_text(json.dumps(config.to_dict()), encoding="utf-8")
  return str(path)


@pytest.mark.slow
def test_leftovers_of_killed_writers_are_removed_at_start(tmp_path, caplog):
  """What kill -9 leaves in a model directory: interrupted checkpoint saves of the model and of a
  worker's input position, and the temporary files of atomic writes. The next run removes them
  and nothing else (an export being written belongs to its exporter)."""
  config = tiny_config(tmp_path / "run", steps=2, checkpoint_every=2, export=False, eval_batch_size=500)
  run = ModelDir(config.model_dir)
  saves = [os.path.join(run.checkpoint_dir, "ckpt-7_temp"),
           os.path.join(os.path.dirname(run.input_state_prefix(1, 2, 0)), "ckpt-7_temp")]
  for save in saves:
    os.makedirs(os.path.join(save, "part-00000-of-00001"))
  writes = [temporary_path(run.config_path), temporary_path(run.history_path),
            temporary_path(stream_path(run.input_state_prefix(0, 1, 7)))]
  kept = [os.path.join(run.export_dir, ".tmp-1-12345", "saved_model.pb"), os.path.join(run.path, "notes.txt")]
  for path in writes + kept:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as file:
      file.write("partial")
  caplog.set_level(logging.INFO, logger="tpu")
  train.run(config)
  for save in saves:
    assert not os.path.exists(save)
    assert f"removed {save}, left by an interrupted checkpoint save" in caplog.text
  for path in writes:
    assert not os.path.exists(path)
    assert f"removed {path}, left by an interrupted write" in caplog.text
  assert all(os.path.exists(path) for path in kept)
  assert run.latest_step() == 2


@pytest.mark.slow
def test_a_pipeline_that_cannot_save_its_position_resumes_exactly_by_replaying(tmp_path, caplog):
  """Blank-line documents are read by Python code, whose state TensorFlow cannot save: the run says so
  at its start, and a run resumed from an earlier checkpoint replays the batches before it, so its
  losses equal the uninterrupted run's."""
  corpus = tmp_path / "corpus.txt"
  words = ["the", "film", "was", "good", "plot", "dull", "cast", "fine", "a", "story", "felt", "long"]
  lines = [" ".join(words[(i * 5 + j) % len(words)] for j in range(7)) + ("\n\n" if i % 3 else "\n")
           for i in range(120)]
  corpus.write_text("".join(lines), encoding="utf-8")
  config = tiny_config(tmp_path / "run", task="mlm", data=f"text:{corpus}", documents="blank-line", steps=4,
                       checkpoint_every=2, keep_checkpoints=3, batch_size=4,
                       model_overrides=dict(TINY_FUNNEL, num_decoder_layers=1), vocab_size=60,
                       max_predictions_per_seq=2, dropout=0.1)
  caplog.set_level(logging.INFO, logger="tpu")
  train.run(config)
  assert "cannot save its position (PyFunc is stateful" in caplog.text
  run = ModelDir(config.model_dir)
  expected = [record["loss"] for record in run.read_history() if "loss" in record]
  assert not os.path.exists(run.input_state_prefix(0, 1, 4) + ".index")
  assert _saved_stream(run, 4)["since"] == dict(step=0, seed=config.seed)

  # Back to the checkpoint of step 2, as after a kill before step 4's.
  import tensorflow as tf
  for path in tf.io.gfile.glob(os.path.join(run.checkpoint_dir, "ckpt-4.*")):
    os.remove(path)
  tf.compat.v1.train.update_checkpoint_state(run.checkpoint_dir, os.path.join(run.checkpoint_dir, "ckpt-2"))
  assert run.latest_step() == 2
  caplog.clear()
  train.run(config)
  assert "the input pipeline replays the batches of steps 1 to 2" in caplog.text
  resumed = [record["loss"] for record in run.read_history() if "loss" in record]
  assert resumed == expected   # exact: the same batches, masks and dropout


def test_the_pair_truncator_is_recorded_and_a_run_recorded_before_it_keeps_round_robin(tmp_path, caplog):
  """config.json records how text pairs are trimmed; one that records nothing (written before the
  default became transformers' "longest_first") means "round_robin": a resume, its export and a rerun keep
  it, another rule is refused by name, and a run started from its checkpoint takes the default."""
  from tpu.config import apply_init_checkpoint
  from tpu.config import check_resumable
  from zoo.text import TextEncoder
  fresh = tiny_config(tmp_path / "fresh").validate()
  assert fresh.recorded().tokenizer == dict(truncator="longest_first")
  old = tiny_config(tmp_path / "old").validate()
  model_dir = ModelDir(old.model_dir)
  record = dict(old.recorded().to_dict(), tokenizer=None)   # as written before the truncator was recorded
  model_dir.write_config(record)
  saved = TrainConfig.from_model_dir(model_dir)
  assert saved.tokenizer == dict(truncator="round_robin")
  resumed = tiny_config(tmp_path / "old").resumed_from(saved).validate()
  check_resumable(saved, resumed.recorded())
  assert TextEncoder(VOCAB, seq_length=16, **resumed.text_encoder_args()).truncator == "round_robin"
  changed = tiny_config(tmp_path / "old", tokenizer=dict(truncator="longest_first")).validate()
  refused = "tokenizer: {'truncator': 'round_robin'} -> {'truncator': 'longest_first'}"
  with pytest.raises(ValueError, match=re.escape(refused)):
    check_resumable(saved, changed.resumed_from(saved).recorded())
  # The input position's stream record: one saved before the truncator was recorded is the same stream.
  stream = input_stream(resumed, VOCAB, 1, 1)
  assert stream["tokenizer"] == dict(truncator="round_robin")
  _position(model_dir, 0, 1, old.steps, dict(stream, tokenizer=None))
  check_finished_input(model_dir, Worker(), old.steps, stream)
  other = input_stream(changed.resumed_from(saved), VOCAB, 1, 1)
  with pytest.raises(InputStreamChanged, match=re.escape('tokenizer: {"truncator": "round_robin"} saved, '
                                                         '{"truncator": "longest_first"} now')):
    check_finished_input(model_dir, Worker(), old.steps, other)
  # A rerun that trains nothing names no tokenizer setting as changed, and keeps the record as written.
  caplog.set_level(logging.INFO, logger="tpu")
  train._write_run_files(Prepared(resumed, VOCAB, None, None, model_dir), Worker(), old.steps)
  assert "tokenizer" not in caplog.text and model_dir.read_config() == json.loads(json.dumps(record))
  # Fine-tuning from that checkpoint: its special tokens, this run's packing.
  init = saved.replace(tokenizer=dict(special_tokens=dict(cls="<cls>"), truncator="round_robin"))
  started = apply_init_checkpoint(tiny_config(tmp_path / "new", init_checkpoint=old.model_dir), init)
  assert started.recorded().tokenizer == dict(special_tokens=dict(cls="<cls>"), truncator="longest_first")

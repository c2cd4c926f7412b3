"""The training job: tiny end-to-end runs of every task, resume after a kill, SIGTERM, NaN stop,
XLA, bfloat16, TFDS mock data and error messages (each task's loss: tests/tpu/tasks/)."""

import json
import logging
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds
import tf_keras as keras

from tests.tpu.tasks.losses import softmax_cross_entropy
from tests.tpu.tasks.losses import tiny_config
from tpu import train
from tpu.checkpointing import Preempted
from tpu.checkpointing import restore_encoder
from tpu.config import TrainConfig
from tpu.data import pipeline
from tpu.prepare import prepare
from tpu.trainer import Trainer
from tpu.trainer import TrainingError
from zoo.model_dir import ModelDir
from zoo.text import TextEncoder

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY_FUNNEL = dict(hidden_size=32, num_heads=2, intermediate_size=64, block_sizes=[1, 1, 1])
TINY_DECODER = dict(TINY_FUNNEL, num_decoder_layers=1)
TINY_TRANSFORMER = dict(hidden_size=32, num_heads=2, intermediate_size=64, num_layers=2)


def history(model_dir):
  return ModelDir(str(model_dir)).read_history()


def write(path, text):
  path.write_text(text, encoding="utf-8")
  return str(path)


def run_job(args, **kwargs):
  env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
  return subprocess.Popen([sys.executable, "-m", "tpu.train", *args], cwd=ROOT, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


# ---------------------------------------------------------------------------------------------
# End-to-end runs.


@pytest.mark.slow
def test_classify_run_writes_model_dir_and_resumes_under_xla_and_bfloat16(tmp_path):
  model_dir = tmp_path / "run"
  results = train.run(tiny_config(model_dir, steps_per_execution=2))
  assert set(results) >= {"loss", "accuracy", "f1", "mcc"} and results["examples"] == 500
  assert 0 <= results["accuracy"] <= 1 and -1 <= results["mcc"] <= 1
  saved = TrainConfig.from_model_dir(str(model_dir))
  assert (saved.num_classes, saved.label_names, saved.sentence_pair) == (2, ["negative", "positive"], False)
  run_dir = ModelDir(str(model_dir))
  assert os.path.exists(run_dir.vocab_path) and os.listdir(run_dir.summaries_dir("train"))
  assert tf.train.latest_checkpoint(run_dir.checkpoint_dir).endswith("ckpt-4")
  assert [record["step"] for record in history(model_dir) if "loss" in record] == [2, 4]
  with open(ModelDir(str(model_dir)).eval_results_path) as file:
    assert json.load(file)["accuracy"] == results["accuracy"]

  # The same command with more steps continues from step 4; here with the step XLA-compiled
  # (the TPU proxy: static shapes, no host ops in the step) and in mixed bfloat16.
  results = train.run(tiny_config(model_dir, steps=6, jit_compile=True, mixed_precision="bfloat16"))
  records = [record for record in history(model_dir) if "loss" in record]
  assert [record["step"] for record in records] == [2, 4, 5, 6]
  assert all(np.isfinite(record["loss"]) for record in records) and np.isfinite(results["loss"])
  assert keras.mixed_precision.global_policy().name == "float32"   # restored after the run
  with pytest.raises(ValueError, match="other model settings.*seq_length"):
    train.run(tiny_config(model_dir, steps=8, seq_length=32))


def test_evaluation_sees_every_example_once(tmp_path):
  """Padded evaluation batches give the metrics of the model over exactly the 500 examples."""
  prepared = prepare(tiny_config(tmp_path, eval_batch_size=64))
  config, vocab, evaluation = prepared.config, prepared.vocab, prepared.evaluation   # 7 full + 52
  trainer = Trainer(config, tf.distribute.get_strategy())
  encoder = TextEncoder(vocab, seq_length=config.seq_length)
  results = trainer.evaluate(pipeline.eval_dataset(evaluation.dataset, trainer.task, encoder, 64))
  examples = list(evaluation.dataset.as_numpy_iterator())
  texts, labels = [e["text_a"] for e in examples], np.array([e["label"] for e in examples])
  logits = trainer.model(encoder.encode(tf.constant(texts)), training=False).numpy()
  predictions = logits.argmax(-1)
  assert results["examples"] == 500
  np.testing.assert_allclose(results["accuracy"], (predictions == labels).mean(), rtol=1e-6)
  np.testing.assert_allclose(results["loss"], softmax_cross_entropy(labels, logits).mean(), rtol=1e-4)
  tp = ((predictions == 1) & (labels == 1)).sum()
  f1 = 2 * tp / ((predictions == 1).sum() + (labels == 1).sum())
  np.testing.assert_allclose(results["f1"], f1, rtol=1e-6)


def _corpus(tmp_path):
  lines = [f"the cat number {i} sat on the mat and purred" for i in range(40)]
  return write(tmp_path / "corpus.txt", "\n".join(lines))


@pytest.mark.slow
def test_mlm_pretraining_then_fine_tuning_from_it(tmp_path):
  pretrain_dir = tmp_path / "pretrain"
  results = train.run(tiny_config(pretrain_dir, task="mlm", model="funnel_b4_4_4_decoder",
                                  model_overrides=TINY_DECODER, data=f"text:{_corpus(tmp_path)}",
                                  eval_data="demo"))
  assert set(results) >= {"loss", "mlm_loss", "mlm_accuracy"} and 0 <= results["mlm_accuracy"] <= 1
  records = [record for record in history(pretrain_dir) if "loss" in record]
  assert len(records) == 4 and all(np.isfinite(record["mlm_loss"]) for record in records)

  # --init-checkpoint restores the encoder and takes the vocabulary of the pre-training run.
  config = tiny_config(tmp_path / "finetune", model="funnel_b4_4_4_decoder", model_overrides=TINY_DECODER,
                       init_checkpoint=str(pretrain_dir), vocab_size=999)
  prepared = prepare(config)
  config, vocab, _ = prepared.config, prepared.vocab, prepared.evaluation
  with open(ModelDir(str(pretrain_dir)).vocab_path) as file:
    assert vocab == file.read().split()
  trainer = Trainer(config, tf.distribute.get_strategy())
  restore_encoder(trainer.encoder, str(pretrain_dir))
  checkpoints = ModelDir(str(pretrain_dir)).checkpoint_dir
  reader = tf.train.load_checkpoint(checkpoints)
  saved = [reader.get_tensor(name) for name, _ in tf.train.list_variables(checkpoints)
           if name.endswith("VARIABLE_VALUE") and "OPTIMIZER" not in name]
  for variable in trainer.encoder.trainable_weights:   # every weight holds its pre-trained value
    value = variable.numpy()
    assert any(s.shape == value.shape and np.array_equal(s, value) for s in saved), variable.name
  fresh = Trainer(config, tf.distribute.get_strategy()).encoder.get_embedding_table().numpy()
  assert not any(s.shape == fresh.shape and np.array_equal(s, fresh) for s in saved)   # the check can fail

  # Without --model the encoder is the init checkpoint's; a --model that builds other weights is refused.
  inherited = prepare(tiny_config(tmp_path / "inherit", model="", model_overrides={},
                                  init_checkpoint=str(pretrain_dir))).config
  # The init directory records the pooling semantics its run had (the preset's, Hugging Face's).
  assert (inherited.model, inherited.model_overrides) == (
      "funnel_b4_4_4_decoder", {**TINY_DECODER, "pooling_semantics": "huggingface"})
  wide = tiny_config(tmp_path / "other", model="funnel_b4_4_4_decoder", init_checkpoint=str(pretrain_dir),
                     model_overrides=dict(TINY_DECODER, hidden_size=64))
  with pytest.raises(ValueError, match=r"does not match: hidden_size: 32 in the checkpoint, 64 here"):
    prepare(wide)
  wide = prepare(wide.replace(init_checkpoint=None, model_dir=str(tmp_path / "wide"))).config
  with pytest.raises(ValueError, match="does not fit the encoder"):
    restore_encoder(Trainer(wide, tf.distribute.get_strategy()).encoder, str(pretrain_dir))

  # The pre-trained Funnel leaves the zoo by default: transformers' FunnelForMaskedLM computes its logits.
  _check_exported_masked_lm(pretrain_dir, tmp_path / "hf")


def _check_exported_masked_lm(run_dir, out):
  import torch
  import transformers

  from tpu.serving import restore_model
  from zoo.convert.to_hf.export import to_hf
  assert to_hf(str(run_dir), str(out)).architecture == "FunnelForMaskedLM"
  model, info = transformers.AutoModelForMaskedLM.from_pretrained(str(out), output_loading_info=True)
  assert not info["missing_keys"] and not info["unexpected_keys"], info
  config = TrainConfig.from_model_dir(str(run_dir))
  zoo_model = restore_model(config, ModelDir(str(run_dir)).latest_checkpoint())
  features = TextEncoder(ModelDir(str(run_dir)).read_vocab(), seq_length=config.seq_length).encode(
      tf.constant(["the cat sat on the mat .", "a dog", ""]))
  positions = np.tile(np.arange(config.seq_length, dtype=np.int32), [3, 1])
  expected = zoo_model(dict(features, masked_lm_positions=positions), training=False)["mlm_logits"].numpy()
  with torch.no_grad():
    actual = model.eval()(input_ids=torch.tensor(features["input_word_ids"].numpy()).long(),
                          attention_mask=torch.tensor(features["input_mask"].numpy()).long(),
                          token_type_ids=torch.tensor(np.where(np.arange(config.seq_length) == 0, 2, 0)[None]
                                                      .repeat(3, 0)).long()).logits.numpy()
  mask = features["input_mask"].numpy().astype(bool)
  assert np.abs(actual - expected)[mask].max() < 1e-4


@pytest.mark.slow
def test_electra_pretraining(tmp_path):
  results = train.run(tiny_config(tmp_path / "run", task="electra", model="realformer_small",
                                  model_overrides=TINY_TRANSFORMER, data=f"text:{_corpus(tmp_path)}",
                                  eval_data="demo"))
  assert set(results) >= {"loss", "mlm_loss", "mlm_accuracy", "disc_loss", "disc_accuracy"}
  np.testing.assert_allclose(results["loss"], results["mlm_loss"] + 50 * results["disc_loss"], rtol=1e-6)
  assert all(np.isfinite(r["disc_loss"]) for r in history(tmp_path / "run") if "loss" in r)
  # A RealFormer cannot leave for transformers: the export names why and writes nothing.
  from zoo.convert import ConversionError
  from zoo.convert.to_hf.export import to_hf
  with pytest.raises(ConversionError, match="RealFormer residual attention"):
    to_hf(str(tmp_path / "run"), str(tmp_path / "hf"))
  assert not (tmp_path / "hf").exists()


@pytest.mark.slow
def test_regression_on_tfds_sentence_pairs_with_mock_data(tmp_path):
  with tfds.testing.mock_data(num_examples=24):
    results = train.run(tiny_config(tmp_path, task="regress", data="tfds:glue/stsb", steps=2))
  assert set(results) >= {"loss", "pearson", "spearman"} and results["examples"] == 24
  saved = TrainConfig.from_model_dir(str(tmp_path))
  assert saved.sentence_pair and saved.num_classes == 1


@pytest.mark.slow
def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path):
  rows = ["text\tlabel"] + [f"sentence {i}\t{i % 3}" for i in range(11)] + ["overflowing\t1e38"]
  table = write(tmp_path / "bad.tsv", "\n".join(rows) + "\n")
  config = tiny_config(tmp_path / "run", task="regress", data=f"tsv:{table}", steps=12, batch_size=1,
                       checkpoint_every=1)
  with pytest.raises(TrainingError, match=r"loss became inf in steps (\d+)\.\.\1;") as error:
    train.run(config)
  bad_step = int(re.search(r"steps (\d+)", str(error.value)).group(1))
  assert bad_step > 1   # the seeded shuffle puts the bad row after the first step
  latest = tf.train.latest_checkpoint(ModelDir(str(tmp_path / "run")).checkpoint_dir)
  assert latest.endswith(f"ckpt-{bad_step - 1}") and latest in str(error.value)


# ---------------------------------------------------------------------------------------------
# Processes: interruption, preemption, several replicas.


def _wait_for(predicate, process, timeout=240):
  deadline = time.monotonic() + timeout
  while not predicate():
    if process.poll() is not None:
      raise AssertionError(f"the job ended early ({process.returncode}): {process.stderr.read()[-2000:]}")
    if time.monotonic() > deadline:
      process.kill()
      raise AssertionError("timed out waiting for the job")
    time.sleep(0.05)


@pytest.mark.slow
def test_a_run_killed_at_a_random_moment_resumes_as_the_same_run(tmp_path, caplog, capsys):
  """kill -9 of `python -m tpu.train` after the first checkpoint, at a random moment, then the
  same command (here in the test process): the per-step losses equal an uninterrupted run's
  with the same seed, dropout and masking included (the input position and the random draws of
  every step are restored, not re-drawn), and history.jsonl holds each step once."""
  config = tiny_config(tmp_path / "run", task="mlm", model_overrides=TINY_DECODER, steps=16,
                       checkpoint_every=4, dropout=0.1, max_predictions_per_seq=3, seed=7)
  model_dir = tmp_path / "run"
  path = write(tmp_path / "config.json", json.dumps(config.to_dict()))
  checkpoints = ModelDir(str(model_dir)).checkpoint_dir
  first = run_job(["--config", path])
  # A checkpoint counts once the manager has recorded it: its files come first, then the
  # `checkpoint` state file that resuming reads.
  _wait_for(lambda: tf.train.latest_checkpoint(str(checkpoints)) is not None, first)
  time.sleep(np.random.default_rng().uniform(0, 0.5))
  first.kill()
  first.wait()
  killed_at = int(tf.train.latest_checkpoint(str(checkpoints)).rsplit("-", 1)[1])
  assert killed_at < 16, "the run ended before the kill"

  caplog.set_level(logging.INFO, logger="tpu")
  capsys.readouterr()
  assert train.main(["--config", path]) == 0   # the same command
  assert f"(step {killed_at})" in caplog.text
  assert f"continues from its position at step {killed_at}" in caplog.text
  records = [record for record in history(model_dir) if "loss" in record]
  assert [record["step"] for record in records] == list(range(1, 17))   # each step once
  assert tf.train.latest_checkpoint(str(checkpoints)).endswith("ckpt-16")
  assert "mlm_accuracy" in json.loads(capsys.readouterr().out)

  train.run(config.replace(model_dir=str(tmp_path / "uninterrupted")))
  expected = np.array([record["loss"] for record in history(tmp_path / "uninterrupted") if "loss" in record])
  resumed = np.array([record["loss"] for record in records])
  print(f"killed after step {killed_at}; largest loss difference to the uninterrupted run:",
        np.abs(resumed - expected).max())
  np.testing.assert_array_equal(resumed, expected)   # exact: the same batches, masks and dropout


@pytest.mark.slow
def test_sigterm_saves_a_checkpoint_and_exits(tmp_path):
  model_dir = tmp_path / "run"
  config = tiny_config(model_dir, steps=10_000, checkpoint_every=1000)

  def preempt():
    while not (os.path.exists(ModelDir(str(model_dir)).history_path) and len(history(model_dir)) >= 3):
      time.sleep(0.02)
    os.kill(os.getpid(), signal.SIGTERM)

  threading.Thread(target=preempt, daemon=True).start()
  with pytest.raises(Preempted, match="SIGTERM: saved a checkpoint at step"):
    train.run(config)
  last_step = history(model_dir)[-1]["step"]
  assert 3 <= last_step < 1000
  assert tf.train.latest_checkpoint(ModelDir(str(model_dir)).checkpoint_dir).endswith(f"ckpt-{last_step}")
  assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL   # the handler is removed again


def _pretraining_sources(tmp_path):
  """The pre-training inputs of the replica runs: a text corpus, and its pre-tokenized shards (T 16, two
  shards) with a vocabulary learned from it, as `--data` specs by name."""
  corpus = _corpus(tmp_path)
  from tpu.data import shard_writer
  from zoo.text import build_vocab
  from zoo.text import write_vocab
  write_vocab(build_vocab([corpus], 200), str(tmp_path / "vocab"))
  shard_writer.write_pretraining_data([corpus], str(tmp_path / "vocab"), 16, str(tmp_path / "records"), 2,
                                      progress=False)
  return dict(text=f"text:{corpus}", tfrecord=f"tfrecord:{tmp_path}/records/*.tfrecord")


def _replica_runs_script(tmp_path, sources):
  """The program of the replica runs (one process with two logical CPUs): it prints, as one JSON line,
  the losses of each source on one device and on two replicas, the records of the uninterrupted,
  stopped and resumed two-replica MLM and ELECTRA runs, and the outcome of resuming on one device."""
  return textwrap.dedent(f"""
      import json
      import tensorflow as tf
      cpu = tf.config.list_physical_devices("CPU")[0]
      tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
      from tpu import train
      from tpu.config import TrainConfig
      from zoo.model_dir import ModelDir
      losses = {{}}
      for source, data in {sources!r}.items():
        for name, strategy in (("one", tf.distribute.OneDeviceStrategy("/cpu:0")),
                               ("two", tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))):
          model_dir = {str(tmp_path)!r} + "/" + source + "-" + name
          config = TrainConfig(model="realformer_small", model_overrides={TINY_TRANSFORMER!r}, task="mlm",
                               data=data, model_dir=model_dir, steps=6, batch_size=8, seq_length=16,
                               vocab_size=200, dropout=0.0, export=False, learning_rate=3e-3, warmup_steps=0)
          train.run(config, strategy=strategy)
          losses[source + "-" + name] = [record["loss"] for record in ModelDir(model_dir).read_history()]
      # Resume under MirroredStrategy with dropout, two steps per execution, MLM and ELECTRA: an
      # uninterrupted run, then one stopped by SIGTERM and run again.
      import os, signal, threading, time
      from tpu.checkpointing import InputStreamChanged, Preempted
      two = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
      for task in ("mlm", "electra"):
        config = TrainConfig(model="realformer_small", model_overrides={TINY_TRANSFORMER!r}, task=task,
                             data={sources["tfrecord"]!r}, steps=8, checkpoint_every=4, steps_per_execution=2,
                             batch_size=8, seq_length=16, vocab_size=200, dropout=0.1, export=False,
                             learning_rate=3e-3, warmup_steps=0, max_predictions_per_seq=3,
                             model_dir={str(tmp_path)!r} + "/" + task + "-uninterrupted")
        train.run(config, strategy=two)
        losses[task + "-uninterrupted"] = ModelDir(config.model_dir).read_history()
        resumed = ModelDir(config.model_dir.replace("uninterrupted", "resumed"))
        def preempt():
          while len(resumed.read_history()) < 1:
            time.sleep(0.01)
          os.kill(os.getpid(), signal.SIGTERM)
        threading.Thread(target=preempt, daemon=True).start()
        try:
          train.run(config.replace(model_dir=resumed.path), strategy=two)
        except Preempted:
          losses[task + "-stopped"] = resumed.latest_step()
        train.run(config.replace(model_dir=resumed.path), strategy=two)
        losses[task + "-resumed"] = resumed.read_history()
      # The two-replica run resumed on one device: refused, naming the replica count; then reset.
      one = tf.distribute.OneDeviceStrategy("/cpu:0")
      try:
        train.run(config.replace(model_dir=resumed.path, steps=10), strategy=one)
      except InputStreamChanged as error:
        losses["one-device-refused"] = str(error)
      train.run(config.replace(model_dir=resumed.path, steps=10), strategy=one, reset_input=True)
      losses["one-device-reset"] = [record["step"] for record in resumed.read_history()]
      print(json.dumps(losses))
  """)


@pytest.mark.slow
def test_two_replicas_follow_the_single_device_trajectory(tmp_path):
  """MLM: the replicas hold different numbers of masked tokens, so only the exact global
  normalisation gives the single-device loss. The input comes per input pipeline: concatenated
  online text, and pre-tokenized shards (both in one process: the logical devices are
  configured once). Two-replica MLM and ELECTRA runs with dropout, two steps per execution,
  stopped by SIGTERM and run again repeat the uninterrupted runs' records exactly (a wrong
  per-replica seed would not); resumed on one device, the run is refused, naming the replica
  count, and continues with --reset-input."""
  sources = _pretraining_sources(tmp_path)
  env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
  result = subprocess.run([sys.executable, "-c", _replica_runs_script(tmp_path, sources)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  losses = json.loads(result.stdout.strip().splitlines()[-1])
  for source in sources:
    one, two = np.array(losses[f"{source}-one"]), np.array(losses[f"{source}-two"])
    assert len(one) == 6 and one[0] != one[-1]
    np.testing.assert_allclose(two, one, atol=1e-5, err_msg=source)
    print(f"{source}: largest difference, 2 replicas vs 1 device:", np.abs(two - one).max())
  # Stopped and resumed under MirroredStrategy with dropout: exactly the records of the uninterrupted run.
  for task in ("mlm", "electra"):
    assert 2 <= losses[f"{task}-stopped"] < 8
    uninterrupted, resumed = losses[f"{task}-uninterrupted"], losses[f"{task}-resumed"]
    assert [record["step"] for record in uninterrupted] == [2, 4, 6, 8]
    assert resumed == uninterrupted, task   # every value of every record, to the last bit
  assert ("the checkpoint of step 8 was saved with another input stream than this run's settings make: "
          "local_replicas: 2 saved, 1 now. Rerun with the saved settings") in losses["one-device-refused"]
  assert losses["one-device-reset"] == [2, 4, 6, 8, 10]


# ---------------------------------------------------------------------------------------------
# The command line.


def test_help_and_bad_choices(capsys):
  with pytest.raises(SystemExit) as exit_info:
    train.main(["--help"])
  assert exit_info.value.code == 0 and "--steps-per-execution" in capsys.readouterr().out
  with pytest.raises(SystemExit):
    train.main(["--task", "translate"])
  err = capsys.readouterr().err
  assert "invalid choice: 'translate'" in err and "mlm, electra, classify, regress" in err.replace("'", "")
  assert train.main(["--model", "bert_tiny", "--task", "classify", "--data", "demo",
                     "--model-dir", "/nonexistent/run"]) == 2
  err = capsys.readouterr().err
  assert "unknown preset 'bert_tiny'" in err and "funnel_b6_6_6" in err


def test_a_missing_model_names_the_presets_and_the_init_checkpoint_in_one_line(tmp_path, capsys):
  from zoo import presets
  assert train.main(["--task", "classify", "--data", "demo", "--model-dir", str(tmp_path / "run")]) == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and not (tmp_path / "run").exists()
  assert err.startswith(f"tpu.train: error: --model is required: one of the presets of zoo.presets "
                        f"({', '.join(presets.names())}; `python -m zoo.presets` describes them), or "
                        "--init-checkpoint DIR to take the encoder from a model directory")


def test_task_from_a_config_file_is_checked(tmp_path, capsys):
  config = write(tmp_path / "c.json", json.dumps(dict(model="bert_small", task="ner", data="demo",
                                                       model_dir=str(tmp_path / "run"))))
  assert train.main(["--config", config]) == 2
  assert "unknown task 'ner'; choose one of: mlm, electra, classify, regress" in capsys.readouterr().err
  broken = write(tmp_path / "broken.json", '{"model": "bert_small",\n "steps": }')
  assert train.main(["--config", broken]) == 2
  assert f"{broken}:2: not valid JSON" in capsys.readouterr().err
  unknown = write(tmp_path / "unknown.json", '{"stepz": 3}')
  assert train.main(["--config", unknown]) == 2
  assert "unknown setting(s) ['stepz']" in capsys.readouterr().err


@pytest.mark.parametrize("content, message", [
    ("text\tlabel\nfine\t0\nbroken row\n", r"bad\.tsv:3: "),
    ("sentence\tlabel\nfine\t0\n", r"bad\.tsv:1: no column 'text'"),
    ("", r"bad\.tsv:1: the file is empty"),
])
def test_malformed_data_names_file_and_line(tmp_path, capsys, content, message):
  bad = write(tmp_path / "bad.tsv", content)
  code = train.main(["--model", "bert_small", "--task", "classify", "--data", f"tsv:{bad}", "--text-columns",
                     "text", "--model-dir", str(tmp_path / "run")])
  assert code == 2
  assert re.search(message, capsys.readouterr().err)


def test_label_out_of_range_names_file_and_line(tmp_path, capsys):
  train_file = write(tmp_path / "train.tsv", "text\tlabel\na\tyes\nb\tno\n")
  eval_file = write(tmp_path / "dev.tsv", "text\tlabel\na\tyes\nb\tmaybe\n")
  code = train.main(["--model", "bert_small", "--task", "classify", "--data", f"tsv:{train_file}",
                     "--eval-data", f"tsv:{eval_file}", "--model-dir", str(tmp_path / "run")])
  assert code == 2
  err = capsys.readouterr().err
  assert "dev.tsv:3" in err and "maybe" in err

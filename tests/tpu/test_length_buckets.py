"""--length-buckets in the training job: bucketed batches, exact resume, the same steps as at seq_length.

Data is real prose: sentences of the standard library's docstrings in a TSV file, most of
them short, some longer than the trained length (as GLUE-style data is). References: the
same model stepped on the same batches at `seq_length` (the job without buckets), and an
uninterrupted bucketed run for the resume.
"""

import collections
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.tpu.tasks.losses import tiny_config
from tpu import train
from tpu.config import TrainConfig
from tpu.data import pipeline
from tpu.prepare import prepare
from tpu.trainer import Trainer
from zoo.model_dir import ModelDir
from zoo.models import bucketing
from zoo.text import TextEncoder

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEQ_LENGTH = 32
TINY_BERT = dict(hidden_size=32, num_heads=2, intermediate_size=64, num_layers=1)


def _sentences():
  """Sentences of a few standard-library docstrings, of 1 to about 60 words."""
  import collections as c
  import json as j
  import os as o
  import textwrap
  text = " ".join(doc for doc in (j.__doc__, o.__doc__, c.__doc__, textwrap.__doc__, tf.__doc__) if doc)
  return [" ".join(part.split()) for part in re.split(r"(?<=[.:;])\s+", text) if part.strip()]


@pytest.fixture(scope="module")
def prose(tmp_path_factory):
  """A TSV of the sentences, labelled by whether they hold a digit or a parenthesis (something to learn)."""
  path = tmp_path_factory.mktemp("prose") / "train.tsv"
  rows = [f"{sentence}\t{int(bool(re.search(r'[0-9()]', sentence)))}" for sentence in _sentences()]
  path.write_text("sentence\tlabel\n" + "\n".join(rows) + "\n", encoding="utf-8")
  return str(path)


@pytest.fixture(scope="module")
def prose_tags(tmp_path_factory):
  """The sentences, cut into phrases of up to 6 words, as CoNLL: a word per line, tagged B-NUM where it holds
  a digit, else O."""
  path = tmp_path_factory.mktemp("prose") / "train.conll"
  phrases = [words[start:start + 6] for words in map(str.split, _sentences())
             for start in range(0, len(words), 6)]
  sentences = ["\n".join(f"{word} {'B-NUM' if re.search('[0-9]', word) else 'O'}" for word in phrase)
               for phrase in phrases]
  path.write_text("\n\n".join(sentences) + "\n", encoding="utf-8")
  return str(path)


def _config(model_dir, prose, **changes):
  values = dict(model="bert_small", model_overrides=TINY_BERT, data=f"tsv:{prose}", seq_length=SEQ_LENGTH,
                vocab_size=300, length_buckets="8,16", dropout=0.0)
  return tiny_config(model_dir, **{**values, **changes})


def test_bucketed_batches_hold_one_bucket_each_and_every_example_once(prose, tmp_path):
  prepared = prepare(_config(tmp_path / "run", prose).validate())
  encoder = TextEncoder(prepared.vocab, seq_length=SEQ_LENGTH)
  capacities = [8, 16, 32]
  examples = prepared.train.dataset
  count = int(examples.reduce(0, lambda n, _: n + 1))
  batches = pipeline.bucketed(examples.batch(5).map(lambda raw: dict(encoder.encode(raw["text_a"]),
                                                                       label=raw["label"])), 4, capacities)
  seen, buckets = collections.Counter(), collections.Counter()
  for batch in batches.as_numpy_iterator():
    lengths = batch["input_mask"].sum(-1)
    index = int(bucketing.bucket_index(batch["input_mask"], capacities))
    assert all(int(bucketing.index_of(length, capacities)) == index for length in lengths), lengths
    buckets[index] += 1
    seen.update(map(tuple, batch["input_word_ids"].tolist()))
  assert len(buckets) == 3, "the prose has short, middle and long sentences"
  assert max(seen.values()) == 1 or len(set(_sentences())) < count   # none twice (bar repeated sentences)
  assert count - 3 * 3 <= sum(seen.values()) <= count   # at most batch - 1 left in each bucket's window


def _step_losses(config, batches, steps):
  trainer = Trainer(config, tf.distribute.get_strategy())
  trainer.model.set_weights(_step_losses.weights)
  losses = []
  iterator = iter(batches)
  for _ in range(steps):
    trainer.train_input = type("Input", (), {"iterator": iterator, "next": staticmethod(next)})()
    losses.append(trainer.run_steps(1)["loss"])
  return losses, trainer


@pytest.mark.slow
@pytest.mark.parametrize("task", ["classify", "tag"])
def test_a_bucketed_step_equals_the_step_at_seq_length(prose, prose_tags, tmp_path, task):
  """The same bucketed batches, stepped with buckets and at seq_length: the same losses and weights
  (dropout off: its draws have the shape of the length run), and the same evaluation metrics. A tagger
  does not read the pooler: it gets no gradient and no optimizer slots, as without buckets. (XLA: the
  encoder's gradients through the switch, compiled, in tests/zoo/models/test_length_buckets.py.)"""
  data = f"tsv:{prose}" if task == "classify" else f"conll:{prose_tags}"
  prepared = prepare(_config(tmp_path / "run", prose, task=task, data=data).validate())
  config = prepared.config
  encoder = TextEncoder(prepared.vocab, seq_length=SEQ_LENGTH)
  task = Trainer(config, tf.distribute.get_strategy()).task
  # Two batches at a short length and two at the full one, whatever the shuffle's order (its seed is the
  # op's and the global one, which other tests of the process may have set).
  stream = pipeline.train_dataset(prepared.train, task, encoder, 8, capacities=[8, 16, 32]).take(40)
  lengths = [(int(batch["input_mask"].numpy().sum(-1).max()), batch) for batch in stream]
  short = [batch for length, batch in lengths if length <= 16][:2]
  full = [batch for length, batch in lengths if length > 16][:2]
  assert len(short) == len(full) == 2, [length for length, _ in lengths]
  batches = [short[0], full[0], short[1], full[1]]
  _step_losses.weights = Trainer(config, tf.distribute.get_strategy()).model.get_weights()
  bucketed, trained = _step_losses(config, batches, 4)
  plain, reference = _step_losses(config.replace(length_buckets=None), batches, 4)
  np.testing.assert_allclose(bucketed, plain, rtol=1e-5)
  for a, b in zip(trained.model.get_weights(), reference.model.get_weights(), strict=True):
    np.testing.assert_allclose(a, b, atol=2e-5)
  assert len(trained.optimizer.variables()) == len(reference.optimizer.variables())

  evaluation = pipeline.eval_dataset(prepared.train, task, encoder, 16)
  for trainer in (trained, reference):
    trainer.task.prepare_evaluation(prepared.train)
  with_buckets, without = trained.evaluate(evaluation), reference.evaluate(evaluation)
  assert with_buckets.keys() == without.keys()
  for name, value in without.items():
    np.testing.assert_allclose(with_buckets[name], value, rtol=1e-5, err_msg=name)


@pytest.mark.slow
def test_a_resumed_bucketed_run_repeats_the_uninterrupted_one(prose, tmp_path):
  """Back to the checkpoint of step 2 (as after a kill before step 4's): the input position saved with it
  holds the buckets' waiting examples, so steps 3 and 4 are those of the uninterrupted run, to the last
  bit."""
  config = _config(tmp_path / "run", prose, dropout=0.1, steps=4, checkpoint_every=2)
  train.run(config)
  run = ModelDir(config.model_dir)
  expected = [record["loss"] for record in run.read_history() if "loss" in record]
  assert json.load(open(run.config_path))["length_buckets"] == "8,16"
  for path in tf.io.gfile.glob(os.path.join(run.checkpoint_dir, "ckpt-4.*")):
    os.remove(path)
  tf.compat.v1.train.update_checkpoint_state(run.checkpoint_dir, os.path.join(run.checkpoint_dir, "ckpt-2"))
  train.run(config)
  assert [record["loss"] for record in run.read_history() if "loss" in record] == expected

  for changed, now in (("auto", '"auto"'), (None, "null")):   # a changed ladder, or none, is refused by name
    with pytest.raises(ValueError, match=f'length_buckets: "8,16" saved, {now}'):
      train.run(config.replace(steps=6, length_buckets=changed))


def test_settings_that_cannot_take_buckets_are_refused(prose, tmp_path):
  with pytest.raises(ValueError, match="task 'mlm' packs documents .* classify, regress"):
    _config(tmp_path, prose, task="mlm").validate()
  with pytest.raises(ValueError, match="--length-buckets 8,16: .*pooling_semantics='huggingface'.*"
                                       r"\(add --padding-dependent-buckets\)"):
    tiny_config(tmp_path, length_buckets="8,16").validate()
  config = tiny_config(tmp_path, length_buckets="8", padding_dependent_buckets=True).validate()
  assert TrainConfig.from_dict(config.to_dict()) == config
  with pytest.raises(ValueError, match="length bucket 4: 4 tokens are too few for 3 blocks"):
    tiny_config(tmp_path, length_buckets="4,8", padding_dependent_buckets=True).validate()
  with pytest.raises(ValueError, match="'auto', 'off' or comma-separated lengths"):
    tiny_config(tmp_path, length_buckets="short").validate()


TWO_REPLICAS = """
import json, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from tests.tpu.test_length_buckets import _config
from tpu import train
from zoo.model_dir import ModelDir
losses = {}
for name, strategy in (("one", tf.distribute.OneDeviceStrategy("/cpu:0")),
                       ("two", tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))):
  config = _config(sys.argv[1] + "/" + name, sys.argv[2], steps=6, checkpoint_every=6, batch_size=8)
  train.run(config, strategy=strategy)
  losses[name] = [record["loss"] for record in ModelDir(config.model_dir).read_history() if "loss" in record]
print(json.dumps(losses))
"""


@pytest.mark.slow
def test_two_replicas_run_each_step_in_one_bucket_as_one_device(prose, tmp_path):
  """Two replicas split each bucketed batch; the step runs both halves at the length of its longest example
  (the replicas' buckets all-reduced), so the losses are the single device's."""
  env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
  result = subprocess.run([sys.executable, "-c", TWO_REPLICAS, str(tmp_path), prose], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  losses = json.loads(result.stdout.strip().splitlines()[-1])
  assert len(losses["one"]) == 6 and losses["one"][0] != losses["one"][-1]
  np.testing.assert_allclose(losses["two"], losses["one"], atol=1e-5)

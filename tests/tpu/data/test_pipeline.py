"""The training input: which shards or examples each input pipeline reads, refusals of data that
would starve a pipeline, and the position a resumed run continues from."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from tests.tpu.tasks.losses import tiny_config
from tpu import data
from tpu.data import pipeline
from tpu.data import records
from tpu.strategy import Worker
from tpu.tasks import get_task
from tpu.trainer import TrainInput
from zoo.text import TextEncoder


def write_shards(folder, counts):
  """Shards holding `counts[i]` records each, in the writer's layout; record j (over all shards, in
  order) has the token id 100 + j at position 1. Returns the `tfrecord:` source."""
  os.makedirs(folder, exist_ok=True)
  shards, number = [], 0
  for index, count in enumerate(counts):
    name = records.shard_name(index, len(counts), False)
    with tf.io.TFRecordWriter(os.path.join(folder, name)) as writer:
      for _ in range(count):
        writer.write(records.serialize([2, 100 + number, 3, 0]))
        number += 1
    shards.append(dict(file=name, examples=count, full_examples=count, tokens=count))
  metadata = dict(format=records.FORMAT, seq_length=4, compress=False, shards=shards, examples=sum(counts))
  with open(os.path.join(folder, records.METADATA_FILE), "w") as file:
    json.dump(metadata, file)
  return data.load(f"tfrecord:{folder}/*.tfrecord")


def record_ids(source, pipelines, index, count):
  """The record numbers of the first `count` records pipeline `index` of `pipelines` reads."""
  context = tf.distribute.InputContext(pipelines, index, pipelines)
  serialized, _ = pipeline._examples(source, None, None, training=True, seed=index, context=context,
                                     shared_seed=7)
  spec = {records.FEATURE: tf.io.FixedLenFeature([4], tf.int64)}
  return [int(tf.io.parse_single_example(record, spec)[records.FEATURE][1]) - 100
          for record in serialized.take(count)]


def test_three_shards_over_two_pipelines_give_each_its_own_files(tmp_path):
  source = write_shards(str(tmp_path), [3, 4, 2])
  pipeline.check_input(source, 2)
  assert pipeline.reads_own_files(source, 2)
  names = [os.path.basename(path) for path in source.files]
  context = lambda index: tf.distribute.InputContext(2, index, 2)   # noqa: E731
  assert pipeline.describe_share(source, context(0)) == (
      f"the shards {names[0]} (3 examples), {names[2]} (2 examples)")
  assert pipeline.describe_share(source, context(1)) == f"the shards {names[1]} (4 examples)"
  first, second = record_ids(source, 2, 0, 5), record_ids(source, 2, 1, 4)
  assert sorted(first) == [0, 1, 2, 7, 8] and sorted(second) == [3, 4, 5, 6]   # an epoch each


def test_empty_shards_do_not_starve_a_pipeline(tmp_path):
  """Pipeline 1's own files (shards 1 and 3) are empty: every pipeline reads every shard and
  keeps every 2nd record instead; together they read each record of an epoch once."""
  source = write_shards(str(tmp_path), [5, 0, 7, 0])
  pipeline.check_input(source, 2)
  assert not pipeline.reads_own_files(source, 2)
  assert "every 2-th record from the 1-th of all 4 shards" in pipeline.describe_share(
      source, tf.distribute.InputContext(2, 1, 2))
  first, second = record_ids(source, 2, 0, 6), record_ids(source, 2, 1, 6)
  assert sorted(first + second) == list(range(12))


@pytest.mark.parametrize("counts, pipelines, message", [
    ([1, 0, 0], 2, r"1 examples in all \(shards: pretrain-00000-of-00003.tfrecord \(1\), pretrain-00001-of-"
                   r"00003.tfrecord \(0\), pretrain-00002-of-00003.tfrecord \(0\)\) for 2 input"),
    ([0, 0], 1, r"0 examples in all .* for 1 input pipeline"),
])
def test_too_few_examples_for_the_pipelines_are_refused_with_the_counts(tmp_path, counts, pipelines, message):
  source = write_shards(str(tmp_path), counts)
  with pytest.raises(ValueError, match=message):
    pipeline.check_input(source, pipelines)


def test_text_with_fewer_examples_than_pipelines_is_refused(tmp_path):
  path = tmp_path / "one.tsv"
  path.write_text("sentence\tlabel\na good film\t1\n", encoding="utf-8")
  source = data.load(f"tsv:{path}")
  pipeline.check_input(source, 1)
  with pytest.raises(ValueError, match=r"tsv:.*one.tsv: 1 example\(s\) for 2 input pipelines"):
    pipeline.check_input(source, 2)


def test_a_restored_position_continues_the_stream_and_an_epoch_sees_each_example_once(tmp_path):
  """Three batches, the position saved, a new pipeline (a new process would build it the same
  way) restored: its batches are the uninterrupted stream's, and over the epoch that spans
  the two, every example appears once."""
  path = tmp_path / "numbers.tsv"
  lines = "".join(f"example {n}\t{n % 2}\n" for n in range(40))
  path.write_text("sentence\tlabel\n" + lines, encoding="utf-8")
  source = data.load(f"tsv:{path}")
  config = tiny_config(str(tmp_path / "run"), data=f"tsv:{path}", num_classes=2).validate()
  vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "example"] + [str(n) for n in range(40)]
  encoder, task = TextEncoder(vocab, seq_length=8), get_task(config)
  worker = Worker()

  def stream():
    return TrainInput(tf.distribute.get_strategy(), pipeline.train_input_fn(
        source, task, encoder, 4, shuffle_buffer=100, seed=5), worker)

  def numbers(train_input, count):
    return [int(vocab[token]) for _ in range(count)
            for token in train_input.next(train_input.iterator)["input_word_ids"][:, 2].numpy()]

  uninterrupted = numbers(stream(), 10)
  first = stream()
  before = numbers(first, 3)
  first.save(str(tmp_path / "position" / "ckpt-3"))
  numbers(first, 2)   # trained on after the checkpoint, then lost with the process
  resumed = stream()
  resumed.restore(str(tmp_path / "position" / "ckpt-3"))
  after = numbers(resumed, 7)
  assert before + after == uninterrupted
  assert sorted(before + after) == list(range(40))
  np.testing.assert_array_equal(sorted(uninterrupted), np.arange(40))

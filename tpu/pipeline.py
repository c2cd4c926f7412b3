"""Input pipelines of the training job: raw examples -> batched int32 features of static shape.

Tokenization runs on the host inside tf.data (`zoo.text.TextEncoder`), after batching,
so the accelerator only sees fixed `[batch_size, seq_length]` int32 tensors (TPUs need
static shapes). Training batches drop the remainder; evaluation batches are padded to
the full batch size with all-zero examples of `weight` 0 (and no masked tokens), so
every example is evaluated exactly once and shapes stay static.

Example:
  >>> from tpu import data
  >>> from tpu.config import TrainConfig
  >>> from tpu.tasks import get_task
  >>> from zoo.text import TextEncoder
  >>> config = TrainConfig(model="bert_small", task="classify", data="demo", model_dir="/tmp/x",
  ...                      batch_size=4, seq_length=16, num_classes=2).validate()
  >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "plot", "was", "good"]
  >>> encoder = TextEncoder(vocab, seq_length=16)
  >>> batches = eval_dataset(data.load("demo", "validation").dataset.take(6), get_task(config), encoder, 4)
  >>> [batch["weight"].numpy().tolist() for batch in batches]
  [[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0]]
"""

import tensorflow as tf


def train_dataset(dataset, task, text_encoder, batch_size, *, shuffle_buffer=10000, seed=0):
  """Shuffled, repeated batches of `task.features`, `[batch_size, ...]`, remainder dropped.

  Args:
    dataset: a `tpu.data.DataSource.dataset` of raw examples.
    task: the `tpu.tasks.Task`.
    text_encoder: the `zoo.text.TextEncoder` (fixes the sequence length).
    batch_size: the GLOBAL batch size.
    shuffle_buffer: examples in the shuffle buffer.
    seed: shuffling and masking seed; a resumed run passes another one, so it does not
      replay the batches the first run already trained on.
  """
  dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True).repeat()
  dataset = dataset.batch(batch_size, drop_remainder=True).enumerate()

  def features(index, raw):
    return task.features(raw, text_encoder, seed=tf.stack([tf.constant(seed, tf.int64), index]))

  dataset = dataset.map(features, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  return dataset.prefetch(tf.data.AUTOTUNE)


def _pad_batch(features, batch_size):
  """Pads every feature along axis 0 to `batch_size` with zeros; sets the static shapes."""
  real = tf.shape(next(iter(features.values())))[0]
  padded = {}
  for key, value in features.items():
    paddings = [[0, batch_size - real]] + [[0, 0]] * (value.shape.rank - 1)
    value = tf.pad(value, paddings)
    value.set_shape([batch_size] + value.shape[1:].as_list())
    padded[key] = value
  return padded


def eval_dataset(dataset, task, text_encoder, batch_size, *, seed=0):
  """Every example once, in batches of `batch_size` padded with examples of weight 0.

  MLM masking uses a fixed seed per batch, so evaluations of different checkpoints
  score the same masked positions.
  """
  dataset = dataset.batch(batch_size).enumerate()

  def features(index, raw):
    values = task.features(raw, text_encoder, seed=tf.stack([tf.constant(seed, tf.int64), index]))
    values["weight"] = tf.ones_like(values["input_mask"][:, 0], tf.float32)
    return _pad_batch(values, batch_size)

  return dataset.map(features, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).prefetch(
      tf.data.AUTOTUNE)

"""Length buckets in TensorFlow: which ladder length a batch runs at (`zoo.length_buckets` has the ladder).

`EncoderModel.use_length_buckets` makes an encoder run each batch at a ladder length. By
default the encoder picks it from the batch's `input_mask` (`bucket_index`). A training
step on several replicas picks one for all of them first (`replicas_bucket`, every
replica's longest text all-reduced), so every replica of a step runs the same branch, and
runs its forward and backward pass in the branch of that index, the encoders at that length
(`stepping(index)`).

Example:
  >>> mask = tf.constant([[1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0]])
  >>> int(bucket_index(mask, [2, 4, 6]))
  1
"""

import contextlib
import threading
from collections.abc import Iterator

import tensorflow as tf

_STEP = threading.local()   # MirroredStrategy runs each replica's step in a thread of its own


def longest(input_mask: tf.Tensor) -> tf.Tensor:
  """The most real tokens of any sequence in `input_mask` (`[..., T]`, 1 for a real token), int32 scalar."""
  counts = tf.reduce_sum(tf.cast(tf.not_equal(input_mask, 0), tf.int32), axis=-1)
  return tf.reduce_max(tf.concat([tf.reshape(counts, [-1]), [0]], axis=0))


def index_of(real: tf.Tensor, capacities: list[int]) -> tf.Tensor:
  """The first ladder index whose capacity holds `real` tokens (the last one for more), int32 scalar."""
  fits = tf.cast(tf.constant(capacities[:-1], tf.int32) < real, tf.int32)
  return tf.reduce_sum(fits)


def text_buckets(input_mask: tf.Tensor, capacities: list[int]) -> tf.Tensor:
  """The ladder index of each text of `input_mask` (`[..., T]`): the first capacity that holds its real
  tokens, int32 `[...]`."""
  counts = tf.reduce_sum(tf.cast(tf.not_equal(input_mask, 0), tf.int32), axis=-1)
  return tf.reduce_sum(tf.cast(tf.constant(capacities[:-1], tf.int32) < counts[..., tf.newaxis], tf.int32),
                       axis=-1)


def bucket_index(input_mask: tf.Tensor, capacities: list[int]) -> tf.Tensor:
  """The ladder index of a batch: the smallest ladder length whose capacity holds its longest text."""
  return index_of(longest(input_mask), capacities)


def replicas_bucket(input_mask: tf.Tensor, capacities: list[int]) -> tf.Tensor:
  """`bucket_index` of the longest text over every replica of a step (in a replica context): each replica
  adds a one-hot of its own index, so every replica gets the largest (a SUM, which every strategy reduces)."""
  context = tf.distribute.get_replica_context()
  own = bucket_index(input_mask, capacities)
  if context is None or context.num_replicas_in_sync == 1:
    return own
  counts = context.all_reduce(tf.distribute.ReduceOp.SUM, tf.one_hot(own, len(capacities), dtype=tf.float32))
  return tf.cast(tf.reduce_max(tf.where(counts > 0)), tf.int32)


@contextlib.contextmanager
def stepping(index: tf.Tensor | int | None) -> Iterator[None]:
  """Encoders with length buckets called inside run at ladder index `index`: a tensor (a switch between the
  ladder lengths), a Python int (that length alone), or None (each picks its own from its input mask)."""
  previous = getattr(_STEP, "index", None)
  _STEP.index = index
  try:
    yield
  finally:
    _STEP.index = previous


def step_bucket() -> tf.Tensor | int | None:
  """The ladder index `stepping` set in this thread, or None."""
  return getattr(_STEP, "index", None)

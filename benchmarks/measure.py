"""What the benchmarks measure: training steps, interleaved timings, matmul peak, graph ops.

Axes: B batch, T sequence length.

A training step is what fine-tuning runs: the encoder's forward pass with dropout on,
a two-class softmax head on `pooled_output`, the backward pass and one update by the
training job's optimizer (Model Garden's AdamW, `tpu.optimization.make_optimizer`), traced
once with `tf.function` (graph mode; no XLA, which is slower on CPU). Inputs are
random word ids with no padding, so every model does the work of full sequences.
"""

import statistics
import time

import numpy as np
import tensorflow as tf
import tf_keras as keras

from tpu.config import TrainConfig
from tpu.optimization import make_optimizer

NUM_CLASSES = 2


def random_inputs(batch_size, seq_length, vocab_size, seed=0):
  """Full-length int32 encoder inputs `[B, T]` (two segments) and labels `[B]`."""
  rng = np.random.default_rng(seed)
  type_ids = np.zeros([batch_size, seq_length], np.int32)
  type_ids[:, seq_length // 2:] = 1
  features = dict(
      input_word_ids=tf.constant(rng.integers(1, vocab_size, [batch_size, seq_length]), tf.int32),
      input_mask=tf.ones([batch_size, seq_length], tf.int32),
      input_type_ids=tf.constant(type_ids))
  labels = tf.constant(rng.integers(0, NUM_CLASSES, [batch_size]), tf.int32)
  return features, labels


class TrainStep:
  """One compiled fine-tuning step of `encoder` on fixed inputs; `__call__` runs it.

  `encoder` is any Keras model with Model Garden's dict interface (a zoo encoder or
  Model Garden's `BertEncoderV2`). The call blocks until the step has finished.
  """

  def __init__(self, encoder, batch_size, seq_length, vocab_size, learning_rate=1e-5):
    self.encoder = encoder
    self.head = keras.layers.Dense(NUM_CLASSES, dtype="float32", name="classifier")   # float32 logits
    self.optimizer, _ = make_optimizer(TrainConfig(learning_rate=learning_rate, steps=10**6, warmup_steps=1))
    self.features, self.labels = random_inputs(batch_size, seq_length, vocab_size)
    if not encoder.built:   # a subclassed encoder (Model Garden's) creates its weights on a first call
      encoder({name: tensor[:1] for name, tensor in self.features.items()})
    self.head.build([None, encoder.get_config()["hidden_size"]])
    self.variables = encoder.trainable_variables + self.head.trainable_variables
    # AdamW's moment slots exist before the first step (what the Keras 2 optimizer's first
    # apply_gradients would create), so that they count as the model's steady memory.
    self.optimizer._create_all_weights(self.variables)
    self._step = tf.function(self._train_step)

  def _loss(self, features, labels):
    logits = self.head(self.encoder(features, training=True)["pooled_output"])
    return tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))

  def _train_step(self, features, labels):
    with tf.GradientTape() as tape:
      loss = self._loss(features, labels)
    gradients = tape.gradient(loss, self.variables)
    self.optimizer.apply_gradients(zip(gradients, self.variables, strict=True))
    return loss

  def __call__(self):
    loss = self._step(self.features, self.labels).numpy()
    if not np.isfinite(loss):
      raise FloatingPointError(f"the training step of {self.encoder.name} gave loss {loss}")
    return loss

  def concrete_function(self):
    return self._step.get_concrete_function(self.features, self.labels)


def interleaved_medians(functions, repeats, warmup=1, progress=None):
  """Median wall time in seconds of each of `functions` (a dict name -> callable).

  Each callable runs `warmup` times first, then all run in turn, `repeats` rounds,
  with the order rotated every round, so that drifts in the machine's speed affect
  every function alike. Returns {name: (median, all times)}.
  """
  names = list(functions)
  for name in names:
    for _ in range(warmup):
      functions[name]()
  times = {name: [] for name in names}
  for round_index in range(repeats):
    shift = round_index % len(names)
    for name in names[shift:] + names[:shift]:
      start = time.perf_counter()
      functions[name]()
      times[name].append(time.perf_counter() - start)
    if progress:
      progress(f"round {round_index + 1}/{repeats}: " + ", ".join(
          f"{name} {times[name][-1]:.2f}s" for name in names))
  return {name: (statistics.median(values), values) for name, values in times.items()}


class Matmul:
  """One `[size, size] x [size, size]` matmul in `dtype`; `__call__` runs it to completion.

  `flops` is its FLOP count, so `flops / seconds` is the machine's sustained matmul rate:
  timed beside a training step (`interleaved_medians`), the yardstick for its efficiency.
  """

  def __init__(self, dtype, size=4096):
    self.flops = 2 * size**3
    self._a = tf.cast(tf.random.stateless_normal([size, size], seed=[0, 1]), dtype)
    self._b = tf.cast(tf.random.stateless_normal([size, size], seed=[2, 3]), dtype)
    self._matmul = tf.function(lambda a, b: tf.reduce_sum(tf.cast(tf.matmul(a, b)[:1, :1], tf.float32)))

  def __call__(self):
    return self._matmul(self._a, self._b).numpy()


def graph_op_types(concrete_function):
  """Op types of a concrete function's graph and of every function it calls."""
  graph_def = concrete_function.graph.as_graph_def()
  types = [node.op for node in graph_def.node]
  for function in graph_def.library.function:
    types += [node.op for node in function.node_def]
  return types


def count_ops(op_types, substring):
  """How many of `op_types` contain `substring` (case-insensitive)."""
  return sum(substring.lower() in op.lower() for op in op_types)


def hlo_gather_count(function, *args):
  """`gather` instructions in the XLA HLO of `function(*args)` (jit-compiled)."""
  compiled = tf.function(function, jit_compile=True)
  hlo = compiled.experimental_get_compiler_ir(*args)(stage="hlo")
  return sum(" gather(" in line for line in hlo.splitlines())

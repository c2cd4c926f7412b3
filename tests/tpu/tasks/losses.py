"""Shared by the task tests: losses of two 'replicas' against numpy."""

import numpy as np
import tensorflow as tf

from tpu.config import TrainConfig

TINY_FUNNEL = dict(hidden_size=32, num_heads=2, intermediate_size=64, block_sizes=[1, 1, 1])


def tiny_config(model_dir, **changes):
  values = dict(model="funnel_b4_4_4", model_overrides=TINY_FUNNEL, task="classify", data="demo",
                model_dir=str(model_dir), steps=4, batch_size=8, eval_batch_size=128, seq_length=16,
                vocab_size=200, checkpoint_every=2, export=False, learning_rate=1e-3, warmup_steps=1)
  values.update(changes)
  return TrainConfig(**values)


def softmax_cross_entropy(labels, logits):
  logits = logits - logits.max(-1, keepdims=True)
  log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  return -np.take_along_axis(log_probs, labels[..., None], -1)[..., 0]


def shares(task, features, outputs):
  """Sum of the losses of two 'replicas' holding the two halves, with all-reduced denominators."""
  halves = [tf.nest.map_structure(lambda value, part=part: value[part], (features, outputs))
            for part in (slice(0, 3), slice(3, None))]
  totals = {}
  for half_features, _ in halves:
    for name, value in task.denominators(half_features).items():
      totals[name] = totals.get(name, 0.0) + value
  return sum(float(task.loss_and_stats(f, o, totals)[0]) for f, o in halves)

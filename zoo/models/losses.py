"""The losses of the heads and pretrainers, float32, with an explicit denominator.

Each loss is `sum(weights · per-item loss) / denominator`. The denominator defaults to
`sum(weights)`, the mean over the real items of this batch, which is what Keras's
`fit` wants. A data-parallel training step passes instead the count summed over all
replicas (`tpu.tasks`): each replica's loss is then its share of the global batch's
mean, and the replicas' losses and gradients sum to those of one device running the
whole batch. A zero denominator gives 0 (the numerator is 0 too: nothing to predict).

Example:
  >>> import numpy as np
  >>> logits = np.log(np.array([[[0.5, 0.5], [0.9, 0.1]]], np.float32))
  >>> round(float(masked_lm_loss([[0, 0]], logits, [[1.0, 1.0]])), 5)   # mean of -log 0.5, -log 0.9
  0.39925
  >>> round(float(masked_lm_loss([[0, 0]], logits, [[1.0, 1.0]], denominator=4.0)), 5)   # sum / 4
  0.19963
"""

from collections.abc import Mapping
from typing import TypeAlias

import tensorflow as tf

# What a loss is divided by: a count, as a number or a scalar tensor; None for this batch's weights' sum.
Denominator: TypeAlias = float | tf.Tensor | None


def _weighted_mean(losses: tf.Tensor, weights: tf.Tensor, denominator: Denominator) -> tf.Tensor:
  weights = tf.cast(weights, tf.float32)
  total = tf.reduce_sum(losses * weights)
  denominator = tf.reduce_sum(weights) if denominator is None else tf.cast(denominator, tf.float32)
  return tf.math.divide_no_nan(total, denominator)


def sparse_cross_entropy(labels: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
  """Per-item softmax cross-entropy in float32: int labels `[...]`, logits `[..., C]`."""
  return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.cast(labels, tf.int32),
                                                        logits=tf.cast(logits, tf.float32))


def masked_lm_loss(labels: tf.Tensor, logits: tf.Tensor, weights: tf.Tensor,
                   denominator: Denominator = None) -> tf.Tensor:
  """Masked-LM cross-entropy: labels int `[B, P]`, logits `[B, P, V]`, weights `[B, P]` (0 = padding)."""
  return _weighted_mean(sparse_cross_entropy(labels, logits), weights, denominator)


def replaced_token_loss(labels: tf.Tensor, logits: tf.Tensor, input_mask: tf.Tensor,
                        denominator: Denominator = None) -> tf.Tensor:
  """ELECTRA's discriminator loss: sigmoid cross-entropy over real tokens.

  labels int `[B, T]` (1 = replaced), logits `[B, T]`, input_mask `[B, T]` (1 = real
  token); padded tokens do not count (Clark et al., 2020, Sec. 2; the authors' code).
  """
  losses = tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.cast(labels, tf.float32),
                                                   logits=tf.cast(logits, tf.float32))
  return _weighted_mean(losses, input_mask, denominator)


def electra_losses(features: Mapping[str, tf.Tensor], outputs: Mapping[str, tf.Tensor],
                   discriminator_weight: float, masked_denominator: Denominator = None,
                   token_denominator: Denominator = None) -> dict[str, tf.Tensor]:
  """ELECTRA's loss `mlm_loss + discriminator_weight · disc_loss` and its two terms (float32 scalars).

  Args:
    features: `masked_lm_ids`, `masked_lm_weights` `[B, P]` and `input_mask` `[B, T]`.
    outputs: `mlm_logits` `[B, P, V]`, `disc_logits` and `disc_labels` `[B, T]` (`ElectraPretrainer`).
    discriminator_weight: λ (50 in Clark et al., 2020).
    masked_denominator, token_denominator: the counts of masked and of real tokens the two
      terms are divided by (default: this batch's).

  Returns:
    dict of `loss`, `mlm_loss`, `disc_loss`.
  """
  mlm_loss = masked_lm_loss(features["masked_lm_ids"], outputs["mlm_logits"], features["masked_lm_weights"],
                            masked_denominator)
  disc_loss = replaced_token_loss(outputs["disc_labels"], outputs["disc_logits"], features["input_mask"],
                                  token_denominator)
  return dict(loss=mlm_loss + discriminator_weight * disc_loss, mlm_loss=mlm_loss, disc_loss=disc_loss)


def classification_loss(labels: tf.Tensor, logits: tf.Tensor, weights: tf.Tensor,
                        denominator: Denominator = None) -> tf.Tensor:
  """Softmax cross-entropy of class ids `[B]` under logits `[B, C]`, weighted per example `[B]`."""
  return _weighted_mean(sparse_cross_entropy(labels, logits), weights, denominator)


def regression_loss(labels: tf.Tensor, predictions: tf.Tensor, weights: tf.Tensor,
                    denominator: Denominator = None) -> tf.Tensor:
  """Squared error of float labels `[B]` and predictions `[B]`, weighted per example `[B]`."""
  errors = tf.square(tf.cast(predictions, tf.float32) - tf.cast(labels, tf.float32))
  return _weighted_mean(errors, weights, denominator)


def token_classification_loss(labels: tf.Tensor, logits: tf.Tensor, weights: tf.Tensor,
                              denominator: Denominator = None) -> tf.Tensor:
  """Softmax cross-entropy per token: labels int `[B, W]`, logits `[B, W, C]`, weights `[B, W]` (0 = no loss).

  For tagging, W indexes the words and the logits are those of each word's first piece.
  """
  labels = tf.maximum(tf.cast(labels, tf.int32), 0)   # ignored items may carry -1
  return _weighted_mean(sparse_cross_entropy(labels, logits), weights, denominator)


def span_loss(start_positions: tf.Tensor, end_positions: tf.Tensor, start_logits: tf.Tensor,
              end_logits: tf.Tensor, weights: tf.Tensor, denominator: Denominator = None) -> tf.Tensor:
  """Extractive QA (BERT on SQuAD): the mean of the start and end position cross-entropies.

  Positions int `[B]`, logits `[B, T]` (mask padding beforehand with a large negative
  bias), weights `[B]` per sequence.
  """
  losses = 0.5 * (sparse_cross_entropy(start_positions, start_logits)
                  + sparse_cross_entropy(end_positions, end_logits))
  return _weighted_mean(losses, weights, denominator)

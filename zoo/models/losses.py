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


def cosine_scores(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
  """`[M, N]` cosine similarities of rows `a` `[M, D]` and `b` `[N, D]` (each row scaled by
  1 / max(|x|, 1e-12), as torch's `normalize` and sentence-transformers' `cos_sim` do)."""
  def unit(x):
    x = tf.cast(x, tf.float32)
    return x / tf.maximum(tf.norm(x, axis=-1, keepdims=True), 1e-12)
  return tf.matmul(unit(a), unit(b), transpose_b=True)


def ranking_loss(queries: tf.Tensor, documents: tf.Tensor, scale: float = 20.0, symmetric: bool = False,
                 weights: tf.Tensor | None = None, denominator: Denominator = None,
                 across_replicas: bool = False) -> tf.Tensor:
  """The in-batch-negatives softmax loss of a dual encoder (sentence-transformers'
  `MultipleNegativesRankingLoss`).

  Query i's candidates are every document of the batch: the positives `documents[:, 0]` then the hard
  negatives `documents[:, 1:]` of every query, in that order; its positive is `documents[i, 0]`. Its loss
  is the cross-entropy of `scale · cos(query, candidate)` over the candidates. `symmetric` adds the other
  direction, each positive document against every query of the batch, and averages the two per query
  (`MultipleNegativesSymmetricRankingLoss`: `directions=("query_to_doc", "doc_to_query")`,
  `partition_mode="per_direction"`).

  Args:
    queries: `[B, D]` query vectors.
    documents: `[B, K, D]`: each query's positive document, then K - 1 hard negatives (`[B, D]`: the
      positives alone).
    scale: the inverse temperature the cosine similarities are multiplied by.
    symmetric: add the document-to-query direction.
    weights: `[B]`, 1 for a real example and 0 for padding (which is no query and no candidate).
    denominator: see the module docstring.
    across_replicas: in a replica context (`tf.distribute`), the candidates are every replica's: the
      vectors are all-gathered (their gradients flow back to the replica that computed them, as
      sentence-transformers' `gather_across_devices=True` does), so N replicas of batch B score each
      query against N·B·K documents, as one device running the global batch would.
  """
  queries = tf.cast(queries, tf.float32)
  documents = tf.cast(documents, tf.float32)
  if documents.shape.rank == 2:   # the positives alone
    documents = documents[:, tf.newaxis]
  batch = tf.shape(queries)[0]
  weights = tf.ones([batch], tf.float32) if weights is None else tf.cast(weights, tf.float32)
  all_queries, all_documents, all_weights, offset = queries, documents, weights, 0
  context = tf.distribute.get_replica_context() if across_replicas else None
  if context is not None and context.num_replicas_in_sync > 1:
    # One all-gather: [B, 1 + K, D + 1], the query and documents of each example with its weight beside them.
    texts = tf.concat([queries[:, tf.newaxis], documents], axis=1)
    width = texts.shape[-1]
    packed = tf.concat([texts, tf.broadcast_to(weights[:, tf.newaxis, tf.newaxis],
                                               tf.concat([tf.shape(texts)[:2], [1]], 0))], axis=2)
    gathered = context.all_gather(packed, axis=0)
    all_queries, all_documents = gathered[:, 0, :width], gathered[:, 1:, :width]
    all_weights = tf.stop_gradient(gathered[:, 0, width])
    offset = tf.cast(context.replica_id_in_sync_group, tf.int32) * batch
  candidates = tf.reshape(tf.transpose(all_documents, [1, 0, 2]), [-1, tf.shape(documents)[-1]])   # [K·N, D]
  candidate_weights = tf.tile(all_weights, [tf.shape(documents)[1]])
  positions = offset + tf.range(batch)                                                     # own positives
  forward = scale * cosine_scores(queries, candidates)                                     # [B, K·N]
  forward = tf.where(candidate_weights[tf.newaxis] > 0, forward, -1e9)
  positive = tf.reduce_sum(forward * tf.one_hot(positions, tf.shape(forward)[1]), axis=1)   # no gather (TPUs)
  losses = tf.reduce_logsumexp(forward, axis=1) - positive
  if symmetric:
    backward = scale * cosine_scores(documents[:, 0], all_queries)                         # [B, N]
    backward = tf.where(all_weights[tf.newaxis] > 0, backward, -1e9)
    losses = (losses + tf.reduce_logsumexp(backward, axis=1) - positive) / 2
  return _weighted_mean(losses, weights, denominator)

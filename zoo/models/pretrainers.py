"""Pretrainers: masked language modelling (BERT) and replaced-token detection (ELECTRA).

Axes: B batch, T sequence length, D model width, E embedding width, V vocabulary size,
P predicted (masked) positions per sequence.

Both are functional models over the encoder inputs plus the masked-LM inputs, in the
format of Model Garden's pre-training data: `masked_lm_positions` int32 `[B, P]`,
`masked_lm_ids` int32 `[B, P]` (the original tokens) and `masked_lm_weights` float32
`[B, P]` (1 for a real prediction, 0 for padding). They override `compute_loss`, so
`model.compile(optimizer=...)` then `model.fit(features)` trains them without a Keras
loss; losses are computed in float32.
"""

from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

import tensorflow as tf
import tf_keras as keras

from zoo.layers import seeds
from zoo.layers.base import ZooLayer
from zoo.layers.transformer_block import ACTIVATIONS
from zoo.model_dir import DISCRIMINATOR_HEAD_ROOT
from zoo.model_dir import ENCODER_ROOT
from zoo.model_dir import GENERATOR_MASKED_LM_ROOT
from zoo.model_dir import GENERATOR_ROOT
from zoo.model_dir import MASKED_LM_ROOT
from zoo.models.heads import EncoderHead
from zoo.models.heads import MaskedLMHead
from zoo.models.heads import deserialize_encoders
from zoo.models.heads import encoder_inputs_like
from zoo.models.heads import full_length_sequence
from zoo.models.heads import truncated_normal
from zoo.models.losses import electra_losses
from zoo.models.losses import masked_lm_loss


def head_activation(activation: str | Callable[..., Any]) -> str | Callable[..., Any]:
  """A head's activation: a name of `zoo.layers.ACTIVATIONS` ("gelu_approximate" is the
  tanh form), else whatever Keras takes."""
  return ACTIVATIONS.get(activation, activation) if isinstance(activation, str) else activation


def discriminator_head(transform: keras.layers.Layer, logits: keras.layers.Layer) -> tf.Module:
  """ELECTRA's discriminator head as a checkpoint item: its two dense layers, `transform`
  (`[.., D] -> [.., D]` with the activation) and `logits` (`-> [.., 1]`)."""
  head = tf.Module(name=DISCRIMINATOR_HEAD_ROOT)
  head.transform, head.logits = transform, logits
  return head


def masked_lm_inputs() -> dict[str, tf.Tensor]:
  """Keras inputs for the masked-LM features: positions, original ids and weights `[B, P]`."""
  return dict(
      masked_lm_positions=keras.Input(shape=(None,), dtype=tf.int32, name="masked_lm_positions"),
      masked_lm_ids=keras.Input(shape=(None,), dtype=tf.int32, name="masked_lm_ids"),
      masked_lm_weights=keras.Input(shape=(None,), dtype=tf.float32, name="masked_lm_weights"))


@keras.utils.register_keras_serializable(package="zoo")
class MaskedLMPretrainer(EncoderHead):
  """BERT's masked-LM pre-training model: an encoder and a tied `MaskedLMHead`.

  Follows Model Garden's `BertPretrainerV2` without the next-sentence head (RoBERTa,
  and the Funnel and RealFormer papers, pre-train with MLM only).

  Inputs: the encoder's dict of int32 `[B, T]` tensors plus `masked_lm_positions` int32
  `[B, P]`. Outputs: a dict with `mlm_logits` float32 `[B, P, V]` and the encoder's
  `sequence_output` `[B, T, D]` and `pooled_output` `[B, D]`.

  `compute_loss` is `masked_lm_loss` with `masked_lm_ids` and `masked_lm_weights` read
  from the features `x` (Model Garden's data format; the model itself ignores them), plus
  any regularization losses; `fit(features)` reports it as `loss` (Keras warns once that
  the model ignores those two keys). The encoder's pooler gets no gradient from this loss
  (there is no next-sentence head).

  Args:
    encoder: an encoder with a full-length `sequence_output` and `get_embedding_table()`.
    activation: activation of the MLM transform (BERT: "gelu"; a name of
      `zoo.layers.ACTIVATIONS`, or a Keras activation).
    initializer_range: stddev of the truncated-normal initializer of the MLM transform.
    mlm_transform: the head's dense and layer norm (BERT's); False for the single
      tied projection of Funnel's published masked-LM models (`MaskedLMHead`).

  Example:
    >>> encoder = TransformerEncoder(vocab_size=50, hidden_size=16, num_layers=1, num_heads=2,
    ...                              intermediate_size=32)
    >>> pretrainer = MaskedLMPretrainer(encoder)
    >>> ids = tf.ones([2, 8], tf.int32)
    >>> outputs = pretrainer(dict(input_word_ids=ids, input_mask=ids, input_type_ids=0 * ids,
    ...                           masked_lm_positions=tf.constant([[1, 2], [3, 4]])))
    >>> outputs["mlm_logits"].shape, outputs["mlm_logits"].dtype
    (TensorShape([2, 2, 50]), tf.float32)
  """

  def __init__(self, encoder, activation="gelu", initializer_range=0.02, mlm_transform=True, **kwargs):
    config = dict(activation=activation, initializer_range=initializer_range, mlm_transform=mlm_transform)

    # Layers.
    masked_lm = MaskedLMHead(encoder.get_embedding_table(), activation=head_activation(activation),
                             initializer=truncated_normal(initializer_range), transform=mlm_transform,
                             name="masked_lm")

    # The functional graph.
    inputs = encoder_inputs_like(encoder)
    positions = keras.Input(shape=(None,), dtype=tf.int32, name="masked_lm_positions")
    encoded = encoder(inputs)
    sequence_output = full_length_sequence(encoded, inputs["input_word_ids"], "MaskedLMPretrainer")
    outputs = dict(mlm_logits=masked_lm(sequence_output, masked_positions=positions),   # [B, P, V]
                   sequence_output=encoded["sequence_output"],
                   pooled_output=encoded["pooled_output"])
    super().__init__(inputs=dict(inputs, masked_lm_positions=positions), outputs=outputs, **kwargs)

    # The config.
    self._config = config
    self.encoder = encoder
    self.masked_lm = masked_lm
    self.loss_tracker = keras.metrics.Mean(name="loss")

  @property
  def checkpoint_items(self) -> dict[str, tf.Module]:
    return {ENCODER_ROOT: self.encoder, MASKED_LM_ROOT: self.masked_lm}

  def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None):
    if y is not None or sample_weight is not None:
      raise ValueError("MaskedLMPretrainer takes masked_lm_ids and masked_lm_weights from the features: "
                       "pass no y or sample_weight")
    loss = masked_lm_loss(x["masked_lm_ids"], y_pred["mlm_logits"], x["masked_lm_weights"])
    if self.losses:
      loss += tf.add_n([tf.cast(extra, tf.float32) for extra in self.losses])
    self.loss_tracker.update_state(loss)
    return loss


@keras.utils.register_keras_serializable(package="zoo")
class ReplacedTokenSampler(ZooLayer):
  """ELECTRA's corruption step: sample replacements from the generator and label them.

  At each real prediction (`masked_lm_weights > 0`) a token is drawn from the
  generator's softmax at temperature 1 on float32 logits (a stateless draw seeded by
  `zoo.layers.seeds`), with no gradient (`stop_gradient`: the generator learns from its
  MLM loss only, Clark et al., 2020, Sec. 2). The discriminator input is `word_ids` with
  those positions overwritten by the samples; the label of a position is 1 if its sampled
  token differs from the original (`masked_lm_ids`) and 0 otherwise — a sample equal to
  the original counts as original, as in the paper. Positions that are not predicted keep
  their token and label 0.

  Predicted positions must be distinct within a sequence (as the masking produces them);
  padded predictions (weight 0) may repeat any position. Uses one-hot matmuls rather than
  scatters, which XLA on TPU prefers; the `[B, P, T]` one-hot is small next to the logits.

  Call arguments:
    mlm_logits: generator logits `[B, P, V]`.
    word_ids: int `[B, T]` generator input ids.
    masked_positions, masked_ids: int `[B, P]` predicted positions and original tokens.
    masked_weights: `[B, P]`, 0 for padded predictions.

  Returns:
    A dict with `sampled_ids` int32 `[B, P]`, `corrupted_word_ids` int32 `[B, T]` and
    `labels` int32 `[B, T]`.

  Example:
    >>> sampler = ReplacedTokenSampler()
    >>> logits = tf.constant([[[0.0, 0.0, 100.0]]])   # the generator is sure of token 2
    >>> result = sampler(logits, word_ids=tf.constant([[0, 1, 1]]), masked_positions=tf.constant([[1]]),
    ...                  masked_ids=tf.constant([[1]]), masked_weights=tf.constant([[1.0]]))
    >>> result["corrupted_word_ids"].numpy().tolist(), result["labels"].numpy().tolist()
    ([[0, 2, 1]], [[0, 1, 0]])
  """

  def __init__(self, **kwargs):
    kwargs.setdefault("dtype", "float32")
    super().__init__(**kwargs)

  def call(self, mlm_logits: tf.Tensor, word_ids: tf.Tensor, masked_positions: tf.Tensor,
           masked_ids: tf.Tensor, masked_weights: tf.Tensor) -> dict[str, tf.Tensor]:
    vocab_size = tf.shape(mlm_logits)[-1]
    logits = tf.stop_gradient(tf.cast(mlm_logits, tf.float32))
    sampled = tf.random.stateless_categorical(tf.reshape(logits, [-1, vocab_size]), 1,
                                             seed=seeds.next_seed(), dtype=tf.int32)
    sampled = tf.reshape(sampled, tf.shape(masked_positions))   # [B * P, 1] -> [B, P]
    word_ids = tf.cast(word_ids, tf.int32)
    predicted = tf.cast(masked_weights > 0, tf.int32)   # [B, P]
    # [B, P] -> [B, P, T]: row p is the one-hot of position p, zero for padded predictions.
    one_hot = tf.one_hot(masked_positions, tf.shape(word_ids)[1], dtype=tf.int32) * predicted[:, :, None]
    replaced = tf.reduce_max(one_hot, axis=1)   # [B, T]
    sampled_at = tf.reduce_sum(one_hot * sampled[:, :, None], axis=1)   # [B, P] -> [B, T]
    corrupted = tf.where(replaced > 0, sampled_at, word_ids)
    changed = tf.cast(sampled != tf.cast(masked_ids, tf.int32), tf.int32)   # [B, P]
    labels = tf.reduce_max(one_hot * changed[:, :, None], axis=1)   # [B, P] -> [B, T]
    return dict(sampled_ids=sampled, corrupted_word_ids=corrupted, labels=labels)


@keras.utils.register_keras_serializable(package="zoo")
class ElectraPretrainer(keras.Model):
  """ELECTRA pre-training: a small MLM generator and a replaced-token discriminator.

  Clark et al., 2020 (ELECTRA), Sec. 2 and 3.2. The generator reads the masked input and
  is trained with MLM (tied `MaskedLMHead`); `ReplacedTokenSampler` draws its replacements
  (no gradient through the sampling); the discriminator reads the corrupted sequence and
  predicts, per token, whether it was replaced (`dense + activation` then `dense -> 1`,
  as in the authors' code). The loss is

    `loss = masked_lm_loss + discriminator_weight · replaced_token_loss`

  with `discriminator_weight = 50` (the paper's λ), the discriminator term averaged over
  real tokens (`input_mask = 1`) only.

  Embedding sharing (Sec. 3.2): with `share_embeddings` (default) the generator's word
  embedding table is replaced by the discriminator's, so both encoders and the
  generator's output layer use one `[V, E]` table. The generator must have the same
  vocabulary and embedding width E (give a narrower generator `embedding_width` equal to
  the discriminator's: it then projects E -> its width). Only the word embeddings are
  shared; the paper also shares position embeddings, which are small and absent from
  relative-position encoders, so they stay separate here.

  Unlike Model Garden's `ElectraPretrainer`, which calls its encoders with a list (our
  encoders take a dict), shares no embeddings and has no loss, this is a functional
  model over named inputs.

  Inputs: the encoder's dict of int32 `[B, T]` tensors (`input_word_ids` with the masked
  tokens) plus `masked_lm_positions`, `masked_lm_ids` int32 `[B, P]` and
  `masked_lm_weights` float32 `[B, P]`. Outputs: a dict with `mlm_logits` float32
  `[B, P, V]`, `sampled_ids` int32 `[B, P]`, `corrupted_word_ids` int32 `[B, T]`,
  `disc_logits` float32 `[B, T]` and `disc_labels` int32 `[B, T]`. The sampling is random
  on every call, in training and inference alike.

  Args:
    generator: encoder of the generator (the paper: 1/4 to 1/2 of the discriminator's width).
    discriminator: encoder of the discriminator, the model kept after pre-training.
    share_embeddings: tie the generator's word embeddings to the discriminator's.
    discriminator_weight: λ.
    activation: activation of the MLM transform and of the discriminator's dense layer.
    mlm_transform: the generator's masked-LM head has BERT's dense and layer norm
      (`MaskedLMHead`; False: the single tied projection of Funnel's masked-LM models).
    initializer_range: stddev of the truncated-normal initializer of the heads.

  Example:
    >>> discriminator = TransformerEncoder(vocab_size=50, hidden_size=16, num_layers=1, num_heads=2,
    ...                                    intermediate_size=32)
    >>> generator = TransformerEncoder(vocab_size=50, hidden_size=8, num_layers=1, num_heads=2,
    ...                                intermediate_size=16, embedding_width=16)
    >>> electra = ElectraPretrainer(generator, discriminator)
    >>> ids = tf.ones([2, 8], tf.int32)
    >>> features = dict(input_word_ids=ids, input_mask=ids, input_type_ids=0 * ids,
    ...                 masked_lm_positions=tf.constant([[1, 2], [3, 4]]),
    ...                 masked_lm_ids=tf.constant([[5, 6], [7, 8]]), masked_lm_weights=tf.ones([2, 2]))
    >>> outputs = electra(features)
    >>> outputs["disc_logits"].shape, sorted(electra.compute_losses(features, outputs))
    (TensorShape([2, 8]), ['disc_loss', 'loss', 'mlm_loss'])
  """

  def __init__(self, generator, discriminator, share_embeddings=True, discriminator_weight=50.0,
               activation="gelu", initializer_range=0.02, mlm_transform=True, **kwargs):
    config = dict(share_embeddings=share_embeddings, discriminator_weight=discriminator_weight,
                  activation=activation, initializer_range=initializer_range, mlm_transform=mlm_transform)
    table, generator_table = discriminator.get_embedding_table(), generator.get_embedding_table()
    if generator_table.shape[0] != table.shape[0]:
      raise ValueError(f"generator and discriminator need the same vocabulary, got "
                       f"{generator_table.shape[0]} and {table.shape[0]} word ids")
    if share_embeddings:
      if not hasattr(generator, "get_embedding_layer"):
        raise ValueError("share_embeddings needs a generator with get_embedding_layer(); "
                         "pass share_embeddings=False for this encoder")
      if generator_table.shape != table.shape:
        raise ValueError(
            f"share_embeddings needs equal word-embedding tables, got {generator_table.shape} (generator) "
            f"and {table.shape} (discriminator): build the generator with "
            f"embedding_width={table.shape[1]}, or pass share_embeddings=False")
      generator.get_embedding_layer().embeddings = table   # Keras puts it in the old variable's place

    # Layers.
    masked_lm = MaskedLMHead(generator.get_embedding_table(), activation=head_activation(activation),
                             initializer=truncated_normal(initializer_range), transform=mlm_transform,
                             name="generator_masked_lm")
    sampler = ReplacedTokenSampler(name="sampler")
    disc_width = discriminator.output["sequence_output"].shape[-1]
    disc_transform = keras.layers.Dense(disc_width, activation=head_activation(activation),
                                        kernel_initializer=truncated_normal(initializer_range),
                                        name="discriminator_transform")
    disc_scores = keras.layers.Dense(1, kernel_initializer=truncated_normal(initializer_range),
                                     dtype="float32", name="discriminator_logits")   # float32 logits

    # The functional graph.
    inputs = dict(encoder_inputs_like(discriminator), **masked_lm_inputs())
    word_ids = inputs["input_word_ids"]
    generator_inputs = {name: inputs[name] for name in generator.input}
    generator_sequence = full_length_sequence(
        generator(generator_inputs), word_ids, "ElectraPretrainer's generator", name="generator_length_check")
    mlm_logits = masked_lm(generator_sequence, masked_positions=inputs["masked_lm_positions"])   # [B, P, V]
    corruption = sampler(mlm_logits, word_ids=word_ids, masked_positions=inputs["masked_lm_positions"],
                         masked_ids=inputs["masked_lm_ids"], masked_weights=inputs["masked_lm_weights"])
    discriminator_inputs = {name: inputs[name] for name in discriminator.input}
    discriminator_inputs["input_word_ids"] = corruption["corrupted_word_ids"]
    disc_sequence = full_length_sequence(discriminator(discriminator_inputs), word_ids,
                                         "ElectraPretrainer's discriminator",
                                         name="discriminator_length_check")
    disc_logits = disc_scores(disc_transform(disc_sequence))[:, :, 0]   # [B, T, 1] -> [B, T]
    outputs = dict(mlm_logits=mlm_logits, sampled_ids=corruption["sampled_ids"],
                   corrupted_word_ids=corruption["corrupted_word_ids"], disc_logits=disc_logits,
                   disc_labels=corruption["labels"])
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)

    # The config.
    self._config = config
    self.generator = generator
    self.discriminator = discriminator
    self.discriminator_weight = discriminator_weight
    self.masked_lm = masked_lm
    self.disc_transform, self.disc_scores = disc_transform, disc_scores
    self.loss_tracker = keras.metrics.Mean(name="loss")
    self.mlm_loss_tracker = keras.metrics.Mean(name="mlm_loss")
    self.disc_loss_tracker = keras.metrics.Mean(name="disc_loss")

  @property
  def checkpoint_items(self) -> dict[str, tf.Module]:
    """The discriminator (the encoder a run keeps) and its head, the generator and its head."""
    return {ENCODER_ROOT: self.discriminator,
            DISCRIMINATOR_HEAD_ROOT: discriminator_head(self.disc_transform, self.disc_scores),
            GENERATOR_ROOT: self.generator, GENERATOR_MASKED_LM_ROOT: self.masked_lm}

  def compute_losses(self, x: Mapping[str, tf.Tensor],
                     y_pred: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """The loss and its two terms (float32 scalars) for features `x` and outputs `y_pred`."""
    return electra_losses(x, y_pred, self.discriminator_weight)

  def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None):
    if y is not None or sample_weight is not None:
      raise ValueError("ElectraPretrainer takes its labels from the features: pass no y or sample_weight")
    losses = self.compute_losses(x, y_pred)
    loss = losses["loss"]
    if self.losses:
      loss += tf.add_n([tf.cast(extra, tf.float32) for extra in self.losses])
    self.loss_tracker.update_state(loss)
    self.mlm_loss_tracker.update_state(losses["mlm_loss"])
    self.disc_loss_tracker.update_state(losses["disc_loss"])
    return loss

  def get_config(self):
    return dict(self._config, generator=keras.layers.serialize(self.generator),
                discriminator=keras.layers.serialize(self.discriminator), name=self.name)

  @classmethod
  def from_config(cls, config, custom_objects=None):
    return cls(**deserialize_encoders(config, ("generator", "discriminator"), custom_objects))

"""Task heads on a zoo encoder: masked LM, sequence and token classification, span QA, multiple choice.

Axes: B batch, T sequence length, D model width, E embedding width, V vocabulary size,
P predicted (masked) positions per sequence, C classes, N choices.

The head models follow Model Garden's `BertClassifier`, `BertTokenClassifier` and
`BertSpanLabeler` (functional models whose inputs are the encoder's), with two
differences that are why they are not reused directly: their logits stay float32 under
`mixed_bfloat16` (see DESIGN.md at the repository root), and the encoder is serialized
inside the head's config, so a `.keras` file holds the whole model (Model Garden's configs
hold the encoder object itself, which `.keras` saving turns into a dict that `from_config`
cannot use).

Any encoder with the Model Garden dict interface works (inputs `input_word_ids`,
`input_mask`, `input_type_ids`; outputs `sequence_output`, `pooled_output`). Heads that
need one output per token check that `sequence_output` is as long as the input (a
Funnel encoder without a decoder returns a pooled, shorter sequence).
"""

from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf
import tf_keras as keras
from official.nlp.modeling import layers as nlp_layers

from zoo.layers import seeds
from zoo.layers.base import WithoutAutograph


def encoder_inputs_like(encoder: keras.Model) -> dict[str, tf.Tensor]:
  """Fresh Keras inputs with the names, shapes and dtypes of `encoder`'s dict inputs."""
  if not isinstance(encoder.input, dict):
    raise ValueError("the encoder must be a functional model with dict inputs (input_word_ids, "
                     f"input_mask, input_type_ids), got inputs {encoder.input}")
  return {name: keras.Input(shape=tensor.shape[1:], dtype=tensor.dtype, name=name)
          for name, tensor in encoder.input.items()}


def deserialize_encoders(config: Mapping[str, Any], keys: Sequence[str] = ("encoder",),
                         custom_objects: Mapping[str, Any] | None = None) -> dict[str, Any]:
  """A copy of a head's `config` with the serialized encoders under `keys` rebuilt."""
  config = dict(config)
  for key in keys:
    config[key] = keras.layers.deserialize(config[key], custom_objects=custom_objects)
  return config


def truncated_normal(stddev: float) -> keras.initializers.Initializer:
  return keras.initializers.TruncatedNormal(stddev=stddev)


class _FullLengthCheck(WithoutAutograph, keras.layers.Layer):
  """Passes `sequence_output` through, failing at run time if it is shorter than `word_ids`.

  Used only when the lengths are not static (the check is then done at construction).
  Not registered: the head models rebuild it from their own arguments.
  """

  def __init__(self, head_name, **kwargs):
    super().__init__(autocast=False, **kwargs)
    self.head_name = head_name

  def call(self, sequence_output: tf.Tensor, word_ids: tf.Tensor) -> tf.Tensor:
    check = tf.debugging.assert_equal(
        tf.shape(sequence_output)[1], tf.shape(word_ids)[1],
        message=f"{self.head_name} needs a full-length sequence_output (one vector per input token)")
    with tf.control_dependencies([check]):
      return tf.identity(sequence_output)


def full_length_sequence(encoded: Mapping[str, tf.Tensor], word_ids: tf.Tensor, head_name: str,
                         name: str = "full_length_check") -> tf.Tensor:
  """The `sequence_output` `[B, T, D]` of the encoder's outputs `encoded`, checked to be of length T.

  The check is made here when both lengths are static, else at run time by a layer `name`.
  """
  sequence_output = encoded["sequence_output"]
  length, expected = sequence_output.shape[1], word_ids.shape[1]
  if length is None or expected is None:
    return _FullLengthCheck(head_name, name=name)(sequence_output, word_ids)
  if length != expected:
    raise ValueError(
        f"{head_name} needs one encoder output per input token, but the encoder's sequence_output "
        f"has length {length} for inputs of length {expected}: use an encoder with full-length "
        "outputs (e.g. a Funnel encoder with a decoder)")
  return sequence_output


def _classifier_graph(encoder, num_classes, dropout, initializer_range, features):
  """`(inputs, logits, config)` of a classification head: `logits = dropout(x) W + b`, float32.

  What `SequenceClassifier` and `TokenClassifier` share: fresh inputs like the encoder's, a
  dropout layer "dropout" and a dense layer "logits" of `num_classes` outputs (truncated-normal
  kernel of stddev `initializer_range`), and their config. `x = features(encoded, inputs)` is
  the encoder output classified (the pooled output, or the checked full-length sequence) given
  the encoder's outputs and the inputs.
  """
  config = dict(num_classes=num_classes, dropout=dropout, initializer_range=initializer_range)

  # Layers.
  dropout_layer = seeds.Dropout(dropout, name="dropout")
  classifier = keras.layers.Dense(num_classes, kernel_initializer=truncated_normal(initializer_range),
                                  dtype="float32", name="logits")   # float32 logits

  # The functional graph.
  inputs = encoder_inputs_like(encoder)
  logits = classifier(dropout_layer(features(encoder(inputs), inputs)))   # [..., D] -> [..., C]
  return inputs, logits, config


class EncoderHead(keras.Model):
  """What every single-encoder head shares: the encoder is saved inside its config.

  Subclasses build their functional graph in `__init__`, then set `self._config` (their
  own arguments) and `self.encoder`.
  """

  @property
  def checkpoint_items(self) -> dict[str, tf.Module]:
    return dict(encoder=self.encoder)

  def get_config(self):
    return dict(self._config, encoder=keras.layers.serialize(self.encoder), name=self.name)

  @classmethod
  def from_config(cls, config, custom_objects=None):
    return cls(**deserialize_encoders(config, custom_objects=custom_objects))


@keras.utils.register_keras_serializable(package="zoo")
class MaskedLMHead(WithoutAutograph, nlp_layers.MaskedLM):
  """BERT's masked-LM output layer, with the output embedding tied to the input one.

  At each predicted position (Devlin et al., 2019, Sec. 3.1; Model Garden's `MaskedLM`):
  `h = LayerNorm(activation(x W + b))` maps the encoder output from D to the embedding
  width E, then `logits = h · tableᵀ + output_bias` `[.., V]` with `table` the encoder's
  word-embedding table `[V, E]` (`encoder.get_embedding_table()`), shared, not copied.

  Only the positions in `masked_positions` are computed (a gather before the dense), so
  the cost is `B·P·E·V` rather than `B·T·E·V`.

  This is Model Garden's `MaskedLM` (same weights and names, so BERT checkpoints map
  onto it) with three additions:
  - a config: `get_config` leaves the shared table out, and whoever owns the head passes
    it again (`MaskedLMPretrainer` rebuilds its head from the encoder);
  - float32: the whole layer runs in float32 by default (`dtype="float32"`), so the
    logits — and the vocabulary projection, by far its largest matmul — stay float32
    under `mixed_bfloat16`;
  - `masked_positions` may be a numpy array as well as a tensor.
  Its layer-norm epsilon is Model Garden's fixed 1e-12 (BERT's).

  With `transform=False` there is no dense and no layer norm: `logits = x · tableᵀ +
  output_bias`, the head of Funnel-Transformer's published masked-LM models (one linear
  layer tied to the word embeddings; Hugging Face's `FunnelForMaskedLM`).

  Args:
    embedding_table: the encoder's word-embedding table `[V, E]`.
    activation: activation of the transform dense (BERT: "gelu").
    transform: the dense and layer norm before the vocabulary projection (BERT's).
    initializer: initializer of the transform dense kernel.
    output: "logits", or "predictions" for log-probabilities.

  Call arguments:
    sequence_output: `[B, T, D]` encoder output.
    masked_positions: int `[B, P]` positions to predict.

  Returns:
    `[B, P, V]` float32 logits.

  Example:
    >>> encoder = TransformerEncoder(vocab_size=50, hidden_size=16, num_layers=1, num_heads=2,
    ...                              intermediate_size=32)
    >>> head = MaskedLMHead(encoder.get_embedding_table())
    >>> ids = tf.ones([2, 8], tf.int32)
    >>> sequence = encoder(dict(input_word_ids=ids, input_mask=ids, input_type_ids=0 * ids))
    >>> head(sequence["sequence_output"], masked_positions=tf.constant([[1, 2], [3, 4]])).shape
    TensorShape([2, 2, 50])
  """

  def __init__(self, embedding_table=None, activation="gelu", initializer="glorot_uniform",
               output="logits", transform=True, dtype="float32", **kwargs):
    super().__init__(embedding_table=embedding_table, activation=activation, initializer=initializer,
                     output=output, dtype=dtype, **kwargs)
    self.transform = transform

  def build(self, input_shape):
    if self.embedding_table is None:
      raise ValueError("MaskedLMHead needs the encoder's word-embedding table: "
                       "MaskedLMHead(embedding_table=encoder.get_embedding_table(), ...)")
    if self.transform:
      super().build(input_shape)
      return
    if self.embedding_table.shape[1] != input_shape[-1]:
      raise ValueError(f"a MaskedLMHead without transform needs the encoder's width {input_shape[-1]} to "
                       f"equal the embedding width {self.embedding_table.shape[1]}")
    self._vocab_size = self.embedding_table.shape[0]
    self.bias = self.add_weight("output_bias/bias", shape=(self._vocab_size,), initializer="zeros",
                                trainable=True)
    keras.layers.Layer.build(self, input_shape)

  def call(self, sequence_output: tf.Tensor, masked_positions: tf.Tensor | np.ndarray) -> tf.Tensor:
    masked_positions = tf.convert_to_tensor(masked_positions, tf.int32)
    if self.transform:
      return super().call(sequence_output, masked_positions)
    picked = tf.gather(tf.cast(sequence_output, self.compute_dtype), masked_positions, batch_dims=1)
    table = tf.cast(self.embedding_table, self.compute_dtype)   # [V, E]
    logits = tf.nn.bias_add(tf.einsum("bpe,ve->bpv", picked, table), self.bias)   # [B, P, V]
    return logits if self._output_type == "logits" else tf.nn.log_softmax(logits)

  def get_config(self):
    # Model Garden's MaskedLM.get_config raises (the table is shared), so chain past it.
    config = keras.layers.Layer.get_config(self)
    config.update(
        activation=keras.activations.serialize(keras.activations.get(self.activation)),
        initializer=keras.initializers.serialize(self.initializer),
        output=self._output_type,
        transform=self.transform,
    )
    return config


@keras.utils.register_keras_serializable(package="zoo")
class SequenceClassifier(EncoderHead):
  """Sequence classification or regression from the encoder's pooled output.

  `logits = dropout(pooled_output) W + b`, `[B, C]` float32 (BERT, Devlin et al., 2019,
  Sec. 4.1; Model Garden's `BertClassifier`). With `num_classes=1` it is a regression
  head (train with mean squared error on the single output).

  Inputs: the encoder's dict of int32 `[B, T]` tensors. Output: `[B, C]` float32 logits.

  Args:
    encoder: a zoo (or Model Garden) encoder with `pooled_output`.
    num_classes: C; 1 for regression.
    dropout: dropout rate on the pooled output.
    initializer_range: stddev of the truncated-normal initializer of the output layer.

  Example:
    >>> encoder = TransformerEncoder(vocab_size=50, hidden_size=16, num_layers=1, num_heads=2,
    ...                              intermediate_size=32)
    >>> classifier = SequenceClassifier(encoder, num_classes=3)
    >>> ids = tf.ones([2, 8], tf.int32)
    >>> classifier(dict(input_word_ids=ids, input_mask=ids, input_type_ids=0 * ids)).shape
    TensorShape([2, 3])
  """

  def __init__(self, encoder, num_classes, dropout=0.1, initializer_range=0.02, **kwargs):
    if num_classes < 1:
      raise ValueError(f"num_classes must be >= 1 (1 for regression), got {num_classes}")
    inputs, logits, config = _classifier_graph(   # [B, D] -> [B, C]
        encoder, num_classes, dropout, initializer_range, lambda encoded, inputs: encoded["pooled_output"])
    super().__init__(inputs=inputs, outputs=logits, **kwargs)
    self._config = config
    self.encoder = encoder


@keras.utils.register_keras_serializable(package="zoo")
class TokenClassifier(EncoderHead):
  """Per-token classification (e.g. tagging) from the encoder's sequence output.

  `logits = dropout(sequence_output) W + b`, `[B, T, C]` float32 (BERT, Devlin et al.,
  2019, Sec. 5.3; Model Garden's `BertTokenClassifier`). Logits at padded positions are
  computed like the others: mask them in the loss (`sample_weight=input_mask`).

  Inputs: the encoder's dict of int32 `[B, T]` tensors. Output: `[B, T, C]` float32
  logits. The encoder's `sequence_output` must be full length (checked).

  Args:
    encoder: a zoo (or Model Garden) encoder with a full-length `sequence_output`.
    num_classes: C.
    dropout: dropout rate on the sequence output.
    initializer_range: stddev of the truncated-normal initializer of the output layer.

  Example:
    >>> encoder = TransformerEncoder(vocab_size=50, hidden_size=16, num_layers=1, num_heads=2,
    ...                              intermediate_size=32)
    >>> tagger = TokenClassifier(encoder, num_classes=5)
    >>> ids = tf.ones([2, 8], tf.int32)
    >>> tagger(dict(input_word_ids=ids, input_mask=ids, input_type_ids=0 * ids)).shape
    TensorShape([2, 8, 5])
  """

  def __init__(self, encoder, num_classes, dropout=0.1, initializer_range=0.02, **kwargs):
    if num_classes < 1:
      raise ValueError(f"num_classes must be >= 1, got {num_classes}")
    inputs, logits, config = _classifier_graph(   # [B, T, D] -> [B, T, C]
        encoder, num_classes, dropout, initializer_range,
        lambda encoded, inputs: full_length_sequence(encoded, inputs["input_word_ids"], "TokenClassifier"))
    super().__init__(inputs=inputs, outputs=logits, **kwargs)
    self._config = config
    self.encoder = encoder


@keras.utils.register_keras_serializable(package="zoo")
class SpanQA(EncoderHead):
  """Extractive question answering: start and end logits of the answer span.

  One dense layer `D -> 2` on the sequence output, split into `start_logits` and
  `end_logits` `[B, T]`, float32 (BERT on SQuAD, Devlin et al., 2019, Sec. 4.2; Model
  Garden's `BertSpanLabeler`, with named dict outputs instead of a list). As in BERT,
  padded positions are not masked here: a softmax over positions should mask them.

  Inputs: the encoder's dict of int32 `[B, T]` tensors. Outputs: a dict with
  `start_logits` and `end_logits`, float32 `[B, T]`. The encoder's `sequence_output`
  must be full length (checked).

  Args:
    encoder: a zoo (or Model Garden) encoder with a full-length `sequence_output`.
    initializer_range: stddev of the truncated-normal initializer of the output layer.

  Example:
    >>> encoder = TransformerEncoder(vocab_size=50, hidden_size=16, num_layers=1, num_heads=2,
    ...                              intermediate_size=32)
    >>> qa = SpanQA(encoder)
    >>> ids = tf.ones([2, 8], tf.int32)
    >>> outputs = qa(dict(input_word_ids=ids, input_mask=ids, input_type_ids=0 * ids))
    >>> outputs["start_logits"].shape, outputs["end_logits"].dtype
    (TensorShape([2, 8]), tf.float32)
  """

  def __init__(self, encoder, initializer_range=0.02, **kwargs):
    config = dict(initializer_range=initializer_range)

    # Layers.
    span_logits = keras.layers.Dense(2, kernel_initializer=truncated_normal(initializer_range),
                                     dtype="float32", name="span_logits")   # float32 logits

    # The functional graph.
    inputs = encoder_inputs_like(encoder)
    sequence_output = full_length_sequence(encoder(inputs), inputs["input_word_ids"], "SpanQA")
    logits = span_logits(sequence_output)   # [B, T, D] -> [B, T, 2]
    outputs = dict(start_logits=logits[:, :, 0], end_logits=logits[:, :, 1])
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)

    # The config.
    self._config = config
    self.encoder = encoder


class _Choices(WithoutAutograph, keras.layers.Layer):
  """`[B, N, T]` -> `[B·N, T]` (`flatten`), or scores `[B·N, 1]` -> `[B, N]` given the `[B, N, T]`
  inputs (`unflatten`). Not registered: `MultipleChoice` rebuilds it."""

  def __init__(self, unflatten=False, **kwargs):
    super().__init__(autocast=False, **kwargs)
    self.unflatten = unflatten

  def call(self, values: tf.Tensor, like: tf.Tensor | None = None) -> tf.Tensor:
    if self.unflatten:
      return tf.reshape(values, tf.shape(like)[:2])
    return tf.reshape(values, tf.concat([[-1], tf.shape(values)[2:]], 0))


@keras.utils.register_keras_serializable(package="zoo")
class MultipleChoice(EncoderHead):
  """Multiple choice: one score per option, from the pooled output of each option's text pair.

  Each of the N options of an example is encoded on its own (`[CLS] context [SEP]
  question option [SEP]`, `tpu.tasks.choice`), and one dense layer `D -> 1` shared by the
  options scores its pooled output: `scores = dropout(pooled_output) w + b`, `[B, N]`
  float32; a softmax over the options gives their probabilities (BERT on SWAG, Devlin
  et al., 2019, Sec. 4.4; the Funnel-Transformer paper's RACE; transformers'
  `...ForMultipleChoice`, whose `classifier` is this layer). N may differ from batch to
  batch; T is the encoder's.

  Inputs: the encoder's inputs with an options axis, int32 `[B, N, T]`. Output: `[B, N]`
  float32 scores.

  Args:
    encoder: a zoo (or Model Garden) encoder with `pooled_output`.
    dropout: dropout rate on the pooled output.
    initializer_range: stddev of the truncated-normal initializer of the scoring layer.

  Example:
    >>> encoder = TransformerEncoder(vocab_size=50, hidden_size=16, num_layers=1, num_heads=2,
    ...                              intermediate_size=32)
    >>> chooser = MultipleChoice(encoder)
    >>> ids = tf.ones([2, 4, 8], tf.int32)
    >>> chooser(dict(input_word_ids=ids, input_mask=ids, input_type_ids=0 * ids)).shape
    TensorShape([2, 4])
  """

  def __init__(self, encoder, dropout=0.1, initializer_range=0.02, **kwargs):
    config = dict(dropout=dropout, initializer_range=initializer_range)

    # Layers.
    dropout_layer = seeds.Dropout(dropout, name="dropout")
    scorer = keras.layers.Dense(1, kernel_initializer=truncated_normal(initializer_range), dtype="float32",
                                name="logits")   # float32 scores

    # The functional graph.
    inputs = {name: keras.Input(shape=(None, *tensor.shape[1:]), dtype=tensor.dtype, name=name)
              for name, tensor in encoder_inputs_like(encoder).items()}
    flat = {name: _Choices(name=f"flatten_{name}")(tensor) for name, tensor in inputs.items()}
    pooled_output = encoder(flat)["pooled_output"]                           # [B·N, D]
    scores = scorer(dropout_layer(pooled_output))                            # [B·N, 1]
    scores = _Choices(unflatten=True, name="scores")(scores, inputs["input_word_ids"])   # [B, N]
    super().__init__(inputs=inputs, outputs=scores, **kwargs)

    # The config.
    self._config = config
    self.encoder = encoder
    self.scorer = scorer

  @property
  def checkpoint_items(self) -> dict[str, tf.Module]:
    """The encoder, and the scoring layer (`choice_head`: what a converted `...ForMultipleChoice`
    checkpoint initialises besides the encoder)."""
    return dict(encoder=self.encoder, choice_head=self.scorer)

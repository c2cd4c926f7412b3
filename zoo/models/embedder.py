"""Text embeddings: one vector per text from a zoo encoder (a dual encoder's shared tower).

`TextEmbedder` pools the encoder's `sequence_output` into one vector per text, as
sentence-transformers' `Pooling` module does, then optionally scales it to unit length
(its `Normalize` module):

- `cls`: the first token's hidden state (no pooler dense layer: sentence-transformers'
  `pooling_mode_cls_token`);
- `mean`: the mean of the hidden states of the real tokens (`pooling_mode_mean_tokens`);
- `max`: their element-wise maximum (`pooling_mode_max_tokens`; padding is never picked).

"Real tokens" are those of the encoder's output mask (`EncoderModel.sequence_mask`): the
input mask, or for a Funnel encoder without a decoder the mask of its last block's pooled
sequence, so mean and max pooling work on its shorter output too.

Inputs: the encoder's inputs with a texts axis, int32 `[B, N, T]` (a query and its
documents, or one text: N = 1). Output: float32 `[B, N, D]`.

Example:
  >>> from zoo.models.transformer_encoder import TransformerEncoder
  >>> encoder = TransformerEncoder(vocab_size=50, hidden_size=16, num_layers=1, num_heads=2,
  ...                              intermediate_size=32, seq_length=8)
  >>> embedder = TextEmbedder(encoder, pooling="mean", normalize=True)
  >>> ids = tf.ones([2, 3, 8], tf.int32)
  >>> vectors = embedder(dict(input_word_ids=ids, input_mask=ids, input_type_ids=0 * ids))
  >>> vectors.shape, round(float(tf.norm(vectors[0, 0])), 4)
  (TensorShape([2, 3, 16]), 1.0)
"""

import tensorflow as tf
import tf_keras as keras

from zoo.layers.base import WithoutAutograph
from zoo.models.heads import EncoderHead
from zoo.models.heads import _Choices
from zoo.models.heads import encoder_inputs_like

POOLING_MODES = ("cls", "mean", "max")


def pool_texts(sequence: tf.Tensor, mask: tf.Tensor, mode: str, normalize: bool) -> tf.Tensor:
  """float32 `[B, D]` vectors of `sequence` `[B, T, D]` with real tokens `mask` `[B, T]` (see the module
  docstring); a text without a real token pools to zeros (mean, max)."""
  sequence = tf.cast(sequence, tf.float32)
  if mode == "cls":
    pooled = sequence[:, 0]
  else:
    real = tf.cast(tf.not_equal(mask, 0), tf.float32)[:, :, tf.newaxis]   # [B, T, 1]
    if mode == "mean":
      pooled = tf.reduce_sum(sequence * real, axis=1) / tf.maximum(tf.reduce_sum(real, axis=1), 1e-9)
    elif mode == "max":
      # sentence-transformers sets padding to -1e9 before the maximum; an all-padding text gives zeros here.
      pooled = tf.reduce_max(tf.where(real > 0, sequence, -1e9), axis=1)
      pooled = tf.where(tf.reduce_sum(real, axis=1) > 0, pooled, 0.0)
    else:
      raise ValueError(f"pooling must be one of {POOLING_MODES}, got {mode!r}")
  if normalize:
    # sentence-transformers' Normalize: x / max(|x|, 1e-12).
    pooled = pooled / tf.maximum(tf.norm(pooled, axis=-1, keepdims=True), 1e-12)
  return pooled


class _Pool(WithoutAutograph, keras.layers.Layer):
  """`pool_texts` as a layer of the functional graph (float32). Not registered: `TextEmbedder` rebuilds it."""

  def __init__(self, mode, normalize, **kwargs):
    super().__init__(autocast=False, dtype="float32", **kwargs)
    self.mode, self.normalize = mode, normalize

  def call(self, sequence: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    return pool_texts(sequence, mask, self.mode, self.normalize)


class _Unflatten(WithoutAutograph, keras.layers.Layer):
  """Vectors `[B·N, D]` -> `[B, N, D]` given the `[B, N, T]` inputs. Not registered."""

  def __init__(self, **kwargs):
    super().__init__(autocast=False, **kwargs)

  def call(self, values: tf.Tensor, like: tf.Tensor) -> tf.Tensor:
    return tf.reshape(values, tf.concat([tf.shape(like)[:2], tf.shape(values)[1:]], 0))


@keras.utils.register_keras_serializable(package="zoo")
class TextEmbedder(EncoderHead):
  """One vector per text: the encoder's output pooled and optionally L2-normalised (module docstring).

  Args:
    encoder: a zoo encoder (`sequence_mask` gives its output's real tokens; any other Model Garden
      encoder's `sequence_output` must be as long as its input).
    pooling: "cls", "mean" or "max".
    normalize: scale each vector to unit length.
  """

  def __init__(self, encoder, pooling="mean", normalize=True, **kwargs):
    if pooling not in POOLING_MODES:
      raise ValueError(f"pooling must be one of {POOLING_MODES}, got {pooling!r}")
    config = dict(pooling=pooling, normalize=bool(normalize))
    inputs = {name: keras.Input(shape=(None, *tensor.shape[1:]), dtype=tensor.dtype, name=name)
              for name, tensor in encoder_inputs_like(encoder).items()}
    flat = {name: _Choices(name=f"flatten_{name}")(tensor) for name, tensor in inputs.items()}
    outputs = encoder(flat)
    mask = flat["input_mask"]
    if hasattr(encoder, "sequence_mask"):
      mask = encoder.sequence_mask(mask)
    pool = _Pool(pooling, bool(normalize), name="text_pooling")
    vectors = pool(outputs["sequence_output"], mask)                                              # [B·N, D]
    vectors = _Unflatten(name="vectors")(vectors, inputs["input_word_ids"])                      # [B, N, D]
    super().__init__(inputs=inputs, outputs=vectors, **kwargs)
    self._config = config
    self.encoder = encoder
    self.pooling = pooling
    self.normalize = bool(normalize)

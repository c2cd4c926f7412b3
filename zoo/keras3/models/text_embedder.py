"""The zoo's keras-hub text embedder: one vector per text, pooled from the backbone's sequence output.

`ZooTextEmbedder` is keras-hub's `TextEmbedder` task (its `BertTextEmbedder`'s arguments:
`pooling_mode`, `normalize`) on a zoo backbone, and the Keras 3 twin of the tf_keras
`zoo.models.TextEmbedder` (the `embed` task's model and its export's `embed` signature): the
same vectors from the same weights and texts.

- `cls`: the first token's state of `sequence_output` (no pooler dense layer);
- `mean`: the mean of the states of the real tokens;
- `max`: their element-wise maximum (padding is never picked; a text without a real token
  pools to zeros);
- then, with `normalize`, `x / max(|x|, 1e-12)` (sentence-transformers' `Normalize`).

"Real tokens" are those of the encoder's output mask (`sequence_mask`): the padding mask,
or for a Funnel backbone without a decoder the mask of its last block's pooled sequence
(the encoder's `pooling` layer's `pool_mask`, once per pooled block), so mean and max read
its shorter output as the tf_keras edition does. The vectors are float32 under any dtype
policy. The preprocessors are keras-hub's `TextEmbedderPreprocessor` with the zoo's
tokenizers and a `padding_mask` (as BERT's).
"""

import keras
import keras_hub
from keras import ops

from zoo.keras3.models.encoder import PerLengthFunctions
from zoo.keras3.models.packing import PairTruncation
from zoo.keras3.models.task import TrainsWhatItReads
from zoo.keras3.models.task import apply_sequence_length

POOLING_MODES = ("cls", "mean", "max")


def check_pooling_mode(mode):
  """Raises a ValueError naming the pooling modes unless `mode` is one of them."""
  if mode not in POOLING_MODES:
    raise ValueError(f"pooling_mode must be one of {', '.join(POOLING_MODES)}, got {mode!r}")


def pool_texts(sequence, mask, mode, normalize):
  """float32 `[B, D]` vectors of `sequence` `[B, T, D]` with real tokens `mask` `[B, T]` (the module
  docstring): `zoo.models.embedder.pool_texts` in `keras.ops`."""
  check_pooling_mode(mode)
  sequence = ops.cast(sequence, "float32")
  if mode == "cls":
    pooled = sequence[:, 0]
  else:
    real = ops.expand_dims(ops.cast(ops.not_equal(mask, 0), "float32"), -1)   # [B, T, 1]
    count = ops.sum(real, axis=1)                                                # [B, 1]
    if mode == "mean":
      pooled = ops.sum(sequence * real, axis=1) / ops.maximum(count, 1e-9)
    else:
      pooled = ops.max(ops.where(real > 0, sequence, -1e9), axis=1)
      pooled = ops.where(count > 0, pooled, 0.0)
  if normalize:
    norm = ops.sqrt(ops.sum(ops.square(pooled), axis=-1, keepdims=True))
    pooled = pooled / ops.maximum(norm, 1e-12)
  return pooled


class TextPooling(keras.layers.Layer):
  """`pool_texts` as a layer of the task's graph: `(sequence_output [B, T', D], padding_mask [B, T])`
  -> float32 `[B, D]`.

  `output_mask`: the backbone encoder's `sequence_mask` (the padding mask -> its output's mask,
  run on the static length each call meets). Not registered: the task rebuilds it from its own
  config (as the tf_keras edition's `_Pool`).
  """

  def __init__(self, mode, normalize, output_mask=None, **kwargs):
    super().__init__(autocast=False, dtype="float32", **kwargs)
    check_pooling_mode(mode)
    self.mode, self.normalize = mode, bool(normalize)
    object.__setattr__(self, "_output_mask", output_mask)   # a method of the encoder: not tracked

  def call(self, sequence_output, padding_mask):
    mask = ops.cast(padding_mask, "int32")
    if self.mode != "cls" and self._output_mask is not None:
      mask = self._output_mask(mask)
    return pool_texts(sequence_output, mask, self.mode, self.normalize)

  def compute_output_shape(self, sequence_output_shape, padding_mask_shape):
    return (sequence_output_shape[0], sequence_output_shape[-1])


class ZooTextEmbedderPreprocessor(PairTruncation, keras_hub.models.TextEmbedderPreprocessor):
  """keras-hub's `TextEmbedderPreprocessor` (texts, or tuples of segments, packed with [cls] and
  [sep] to `sequence_length`) with BERT's `padding_mask`: the inputs of the zoo's backbones."""

  def _format_output(self, token_ids, segment_ids):
    return dict(token_ids=token_ids, segment_ids=segment_ids,
                padding_mask=token_ids != self.tokenizer.pad_token_id)


class ZooTextEmbedder(TrainsWhatItReads, PerLengthFunctions, keras_hub.models.TextEmbedder):
  """A keras-hub text embedder on a zoo backbone: raw texts in, float32 vectors `[B, D]` out.

  Args:
    backbone: a zoo backbone (`FunnelBackbone`, `TransformerBackbone`).
    preprocessor: its family's `...TextEmbedderPreprocessor`, or None for token-id inputs.
    pooling_mode: "cls", "mean" or "max" (keras-hub's name; the module docstring says what each
      reads). Default "mean".
    normalize: scale each vector to unit length. Default True.
    pooling: the zoo's name of `pooling_mode` (an `embed` run's config field): give one of them.
    sequence_length, seq_length: the preprocessor's length (`apply_sequence_length`).

  The backbone's pooler dense layer is not trained (no pooling mode reads it:
  `zoo.keras3.models.task.TrainsWhatItReads`).
  """

  unused_layers = ("pooler",)

  def __init__(self, backbone, preprocessor=None, pooling_mode=None, normalize=True, pooling=None,
               sequence_length=None, seq_length=None, **kwargs):
    if pooling_mode is not None and pooling is not None and pooling_mode != pooling:
      raise ValueError(f"pooling_mode={pooling_mode!r} and pooling={pooling!r}: give one (pooling is the "
                       "zoo's name of keras-hub's pooling_mode)")
    mode = pooling_mode or pooling or "mean"
    check_pooling_mode(mode)
    self.backbone = backbone
    self.preprocessor = preprocessor
    self.pooling_layer = TextPooling(mode, normalize, output_mask=backbone.encoder.sequence_mask,
                                     name="text_pooling")
    inputs = backbone.input
    vectors = self.pooling_layer(backbone(inputs)["sequence_output"], inputs["padding_mask"])
    super().__init__(inputs=inputs, outputs=vectors, **kwargs)
    self.pooling_mode = mode
    self.normalize = bool(normalize)
    apply_sequence_length(self, sequence_length, seq_length)

  def similarity(self, query_embeddings, document_embeddings):
    """`[Q, N]` dot products of query and document vectors (cosines when normalized), as
    keras-hub's `BertTextEmbedder.similarity`."""
    return ops.matmul(ops.convert_to_tensor(query_embeddings), ops.transpose(document_embeddings))

  def get_config(self):
    config = super().get_config()
    config.update(pooling_mode=self.pooling_mode, normalize=self.normalize)
    return config

"""Funnel-Transformer encoder, with the optional decoder for token-level tasks (tf_keras).

Dai et al., 2020, "Funnel-Transformer: Filtering out Sequential Redundancy for
Efficient Language Processing" (arXiv:2006.03236), Sec. 2.

The encoder's arguments, defaults and checks are `zoo.configs.FunnelConfig`; its forward wiring is
`zoo.graphs.funnel_graph`, written once for this edition and the Keras 3 one
(`zoo.keras3.FunnelEncoder`); this module names the tf_keras layers it is made of
(`FunnelEncoder.layer_classes`).

Axes: B batch, T full sequence length, T' pooled length, D model width.
"""

import tensorflow as tf
import tf_keras as keras

from zoo.configs import FunnelConfig
from zoo.graphs.funnel_graph import funnel_graph
from zoo.layers.embeddings import ClsSegmentIds
from zoo.layers.embeddings import EncoderEmbeddings
from zoo.layers.funnel_pooling import FunnelPooling
from zoo.layers.funnel_pooling import FunnelUpsampling
from zoo.layers.transformer_block import TransformerBlock
from zoo.models.encoder import EncoderModel


@keras.utils.register_keras_serializable(package="zoo")
class FunnelEncoder(EncoderModel):
  """Funnel-Transformer: blocks of relative-attention layers with pooling in between.

  Between blocks the sequence is pooled with stride 2 (`FunnelPooling`); with
  `pool_q_only` the first layer of a pooled block takes pooled queries and attends to
  the unpooled keys (Sec. 2.2). Layers may be shared across repeats: blocks `(6, 3, 3)`
  with repeats `(1, 2, 2)` is the paper's B6-3x2-3x2; each layer runs its repeats back
  to back. With `num_decoder_layers > 0`
  the last block is upsampled back to full length, the output of block 0 is added,
  and full-length decoder layers follow (Sec. 2.3), for token-level tasks.

  Inputs are Model Garden's dict of int32 `[B, seq_length]` tensors; outputs a dict:
  `sequence_output` (decoder output `[B, T, D]` with a decoder, else the last block's
  `[B, T', D]`), `encoder_sequence_output` (the last block's), `pooled_output` (tanh
  dense on [cls]), `encoder_outputs` (every encoder layer application), and with
  `output_attention_probs`, `attention_probs`.

  Arguments: a `FunnelConfig` (`zoo/configs/funnel.py`: every argument, its default and checks, and
  the padding semantics), or its fields as keyword arguments.

  Example:
    >>> funnel = FunnelEncoder(vocab_size=100, hidden_size=32, block_sizes=(1, 1, 1), num_heads=4,
    ...                        intermediate_size=64, num_decoder_layers=1, seq_length=16)
    >>> ids = tf.ones([2, 16], tf.int32)
    >>> outputs = funnel(dict(input_word_ids=ids, input_mask=ids, input_type_ids=0 * ids))
    >>> outputs["sequence_output"].shape, outputs["encoder_sequence_output"].shape
    (TensorShape([2, 16, 32]), TensorShape([2, 4, 32]))
  """

  config: FunnelConfig
  config_class = FunnelConfig
  graph = staticmethod(funnel_graph)

  @staticmethod
  def layer_classes() -> dict[str, type]:
    """The tf_keras layers a Funnel encoder is made of (`zoo.graphs.kit.EncoderKit` fields)."""
    return dict(embeddings=EncoderEmbeddings, block=TransformerBlock, pooling=FunnelPooling,
                upsampling=FunnelUpsampling, cls_segment_ids=ClsSegmentIds)

  def sequence_mask(self, input_mask: tf.Tensor) -> tf.Tensor:
    """The input mask, or without a decoder the mask of the last block's pooled sequence (the pooling
    layer's `pool_mask` once per pooled block)."""
    if self.config.full_length_output:
      return input_mask
    for _ in self.config.block_sizes[1:]:
      input_mask = self.get_layer("pooling").pool_mask(input_mask)
    return input_mask

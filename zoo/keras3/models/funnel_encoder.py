"""Funnel-Transformer encoder in Keras 3, with the optional decoder (`zoo.models.FunnelEncoder`'s twin).

Its arguments, defaults and checks are `zoo.configs.FunnelConfig`; its forward wiring is
`zoo.graphs.funnel_graph`, written once for both editions; this module names the Keras 3 layers it is
made of.
"""

import keras

from zoo.configs import FunnelConfig
from zoo.graphs.funnel_graph import funnel_graph
from zoo.keras3.layers.embeddings import ClsSegmentIds
from zoo.keras3.layers.embeddings import EncoderEmbeddings
from zoo.keras3.layers.funnel_pooling import FunnelPooling
from zoo.keras3.layers.funnel_pooling import FunnelUpsampling
from zoo.keras3.layers.transformer_block import TransformerBlock
from zoo.keras3.models.encoder import EncoderModel


@keras.saving.register_keras_serializable(package="zoo")
class FunnelEncoder(EncoderModel):
  """Funnel-Transformer: blocks of relative-attention layers with pooling in between.

  `zoo.models.FunnelEncoder` for Keras 3: a `FunnelConfig` (blocks and repeats, pooling type and
  semantics, pool-query-only, `separate_cls`, `truncate_seq`, position rules, the decoder, residual
  attention across blocks; or its fields as keyword arguments), plus this edition's `dtype` and
  `word_embeddings` (`EncoderModel`).
  """

  config: FunnelConfig
  config_class = FunnelConfig
  graph = staticmethod(funnel_graph)

  @staticmethod
  def layer_classes():
    """The Keras 3 layers a Funnel encoder is made of (`zoo.graphs.kit.EncoderKit` fields)."""
    return dict(embeddings=EncoderEmbeddings, block=TransformerBlock, pooling=FunnelPooling,
                upsampling=FunnelUpsampling, cls_segment_ids=ClsSegmentIds)

  def sequence_mask(self, input_mask):
    """The input mask, or without a decoder the mask of the last block's pooled sequence (the pooling
    layer's `pool_mask` once per pooled block)."""
    if self.config.full_length_output:
      return input_mask
    for _ in self.config.block_sizes[1:]:
      input_mask = self.get_layer("pooling").pool_mask(input_mask)
    return input_mask

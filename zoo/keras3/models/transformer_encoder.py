"""BERT-style Transformer encoder in Keras 3: Post-LN, Pre-LN, RealFormer (`zoo.models.TransformerEncoder`'s
twin).

Its arguments, defaults and checks are `zoo.configs.TransformerConfig`; its forward wiring is
`zoo.graphs.transformer_graph`, written once for both editions; this module names the Keras 3 layers it
is made of.
"""

import keras

from zoo.configs import TransformerConfig
from zoo.graphs.transformer_graph import transformer_graph
from zoo.keras3.layers.embeddings import ClsSegmentIds
from zoo.keras3.layers.embeddings import EncoderEmbeddings
from zoo.keras3.layers.transformer_block import TransformerBlock
from zoo.keras3.models.encoder import EncoderModel


@keras.saving.register_keras_serializable(package="zoo")
class TransformerEncoder(EncoderModel):
  """A stack of `TransformerBlock`s over token embeddings: Post-LN, Pre-LN, RealFormer.

  `zoo.models.TransformerEncoder` for Keras 3: a `TransformerConfig` (or its fields as keyword
  arguments), plus this edition's `dtype` and `word_embeddings` (`EncoderModel`).
  """

  config: TransformerConfig
  config_class = TransformerConfig
  graph = staticmethod(transformer_graph)

  @staticmethod
  def layer_classes():
    """The Keras 3 layers a Transformer encoder is made of (`zoo.graphs.kit.EncoderKit` fields)."""
    return dict(embeddings=EncoderEmbeddings, block=TransformerBlock, cls_segment_ids=ClsSegmentIds)

"""BERT-style Transformer encoder: Post-LN, Pre-LN and RealFormer (tf_keras).

The encoder's arguments, defaults and checks are `zoo.configs.TransformerConfig`; its forward wiring is
`zoo.graphs.transformer_graph`, written once for this edition and the Keras 3 one
(`zoo.keras3.TransformerEncoder`); this module names the tf_keras layers it is made of
(`TransformerEncoder.layer_classes`).

Axes: B batch, T sequence length, D model width, N heads.
"""

import tf_keras as keras

from zoo.configs import TransformerConfig
from zoo.graphs.transformer_graph import transformer_graph
from zoo.layers.embeddings import ClsSegmentIds
from zoo.layers.embeddings import EncoderEmbeddings
from zoo.layers.transformer_block import TransformerBlock
from zoo.models.encoder import EncoderModel


@keras.utils.register_keras_serializable(package="zoo")
class TransformerEncoder(EncoderModel):
  """A stack of `TransformerBlock`s over token embeddings, BERT's encoder interface.

  - Post-LN (BERT, Devlin et al., 2019): the default.
  - Pre-LN (Xiong et al., 2020): `norm_first=True`; a final layer norm is added.
  - RealFormer (Liu et al., 2021): `residual_attention=True`, with `running_mean=True`
    for the paper's deep (36-layer) models.
  - Absolute positions (learned table) or Transformer-XL relative attention
    (`position_encoding="factorized"` or `"shift"`) with the relative segment term,
    as in the Funnel paper's Transformer baselines; [cls] gets segment id 2 there.

  Inputs are Model Garden's dict of int32 `[B, T]` tensors (`input_word_ids`,
  `input_mask`, `input_type_ids`); outputs are a dict with `sequence_output`
  `[B, T, D]`, `pooled_output` `[B, D]` (tanh dense on [cls]), `encoder_outputs`
  (every block's output; for Pre-LN before the final layer norm) and, with
  `output_attention_probs`, `attention_probs` (each layer's float32 `[B, N, T, T]`).
  So it can serve as the `network` of Model Garden's `BertClassifier` or
  `BertPretrainerV2`.

  Arguments: a `TransformerConfig` (`zoo/configs/transformer.py`: every argument, its default and
  checks), or its fields as keyword arguments.

  Example:
    >>> encoder = TransformerEncoder(vocab_size=100, hidden_size=32, num_layers=2, num_heads=4,
    ...                              intermediate_size=64, residual_attention=True)
    >>> ids = tf.ones([2, 8], tf.int32)
    >>> outputs = encoder(dict(input_word_ids=ids, input_mask=ids, input_type_ids=0 * ids))
    >>> outputs["sequence_output"].shape, outputs["pooled_output"].shape
    (TensorShape([2, 8, 32]), TensorShape([2, 32]))
  """

  config: TransformerConfig
  config_class = TransformerConfig
  graph = staticmethod(transformer_graph)

  @staticmethod
  def layer_classes() -> dict[str, type]:
    """The tf_keras layers a Transformer encoder is made of (`zoo.graphs.kit.EncoderKit` fields)."""
    return dict(embeddings=EncoderEmbeddings, block=TransformerBlock, cls_segment_ids=ClsSegmentIds)

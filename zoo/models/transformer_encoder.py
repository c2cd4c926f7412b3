"""BERT-style Transformer encoder: Post-LN, Pre-LN and RealFormer (tf_keras).

The encoder's constructor (its arguments and their checks) and its forward wiring are
`zoo/specs/transformer_encoder.py` (`TransformerEncoderSpec`, `transformer_graph`), written
once for this edition and the Keras 3 one (`zoo.keras3.TransformerEncoder`); this module
names the tf_keras layers it is made of (`TransformerEncoder.layer_classes`).

Axes: B batch, T sequence length, D model width, N heads.
"""

import tf_keras as keras

from zoo.layers import EncoderEmbeddings
from zoo.layers import TransformerBlock
from zoo.models.encoder_inputs import ClsSegmentIds
from zoo.models.encoder_inputs import EncoderModel
from zoo.specs.transformer_encoder import TransformerEncoderSpec


@keras.utils.register_keras_serializable(package="zoo")
class TransformerEncoder(TransformerEncoderSpec, EncoderModel):
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

  Args:
    vocab_size: number of word ids.
    hidden_size, num_layers, num_heads, intermediate_size: model width D, depth,
      heads and feed-forward width.
    activation: feed-forward activation (see `zoo.layers.activations.ACTIVATIONS`).
    dropout, attention_dropout: hidden and attention-probability dropout rates.
    max_sequence_length: size of the absolute position table.
    type_vocab_size: number of token types (absolute positions only).
    embedding_width: embedding width E, projected to D when different (default D).
    norm_first: Pre-LN.
    residual_attention, running_mean: RealFormer.
    position_encoding: "absolute", "factorized" or "shift"
      (`zoo.choices.POSITION_ENCODINGS`).
    layer_norm_epsilon: epsilon of every layer norm.
    initializer_range: stddev of the truncated-normal initializer.
    seq_length: static sequence length of the inputs (None for any; "shift" needs it).
    output_attention_probs: also return each layer's attention probabilities.
    layer_sharing: cross-layer sharing (ALBERT, `zoo.choices.LAYER_SHARING`): "none", "all" (the
      first layer at every depth), "attention" or "ffn" (the first layer's attention or
      feed-forward net in every layer).
    attention_window: block-local attention: each query attends to the keys at most this many
      positions away, computed by blocks without a `[T, T]` tensor (`zoo.windows`, DESIGN.md
      Section 9); None (the default) for full attention. Needs `seq_length`. Each layer's
      `attention_probs` then is a pair: the global rows and the blocks.
    global_tokens: with `attention_window`, the leading tokens ([cls] at least) that attend to and
      are attended by every position.

  Example:
    >>> encoder = TransformerEncoder(vocab_size=100, hidden_size=32, num_layers=2, num_heads=4,
    ...                              intermediate_size=64, residual_attention=True)
    >>> ids = tf.ones([2, 8], tf.int32)
    >>> outputs = encoder(dict(input_word_ids=ids, input_mask=ids, input_type_ids=0 * ids))
    >>> outputs["sequence_output"].shape, outputs["pooled_output"].shape
    (TensorShape([2, 8, 32]), TensorShape([2, 32]))
  """

  @staticmethod
  def layer_classes() -> dict[str, type]:
    """The tf_keras layers a Transformer encoder is made of (`zoo.specs.encoder.EncoderKit` fields)."""
    return dict(embeddings=EncoderEmbeddings, block=TransformerBlock, cls_segment_ids=ClsSegmentIds)

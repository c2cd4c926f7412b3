"""Funnel-Transformer encoder, with the optional decoder for token-level tasks (tf_keras).

Dai et al., 2020, "Funnel-Transformer: Filtering out Sequential Redundancy for
Efficient Language Processing" (arXiv:2006.03236), Sec. 2.

The encoder's constructor (its arguments and their checks) and its forward wiring are
`zoo/specs/funnel_encoder.py` (`FunnelEncoderSpec`, `funnel_graph`), written once for this
edition and the Keras 3 one (`zoo.keras3.FunnelEncoder`); this module names the tf_keras
layers it is made of (`FunnelEncoder.layer_classes`).

Axes: B batch, T full sequence length, T' pooled length, D model width.
"""

import tf_keras as keras

from zoo.layers import EncoderEmbeddings
from zoo.layers import FunnelPooling
from zoo.layers import FunnelUpsampling
from zoo.layers import TransformerBlock
from zoo.models.encoder_inputs import ClsSegmentIds
from zoo.models.encoder_inputs import EncoderModel
from zoo.specs.funnel_encoder import FunnelEncoderSpec


@keras.utils.register_keras_serializable(package="zoo")
class FunnelEncoder(FunnelEncoderSpec, EncoderModel):
  """Funnel-Transformer: blocks of relative-attention layers with pooling in between.

  Between blocks the sequence is pooled with stride 2 (`FunnelPooling`); with
  `pool_q_only` the first layer of a pooled block takes pooled queries and attends to
  the unpooled keys (Sec. 2.2). Layers may be shared across repeats: blocks `(6, 3, 3)`
  with repeats `(1, 2, 2)` is the paper's B6-3x2-3x2; each layer runs its repeats back
  to back. With `num_decoder_layers > 0`
  the last block is upsampled back to full length, the output of block 0 is added,
  and full-length decoder layers follow (Sec. 2.3), for token-level tasks.

  Relative attention follows appendix A.2 (factorized by default), with the relative
  segment term where [cls] (the first token, given segment id 2 here whatever its
  input type id) belongs to every segment. Optional RealFormer residual attention
  runs through the encoder: at a block boundary the carry is pooled with the hidden
  states (`carry_at_pooling="pool"`) or restarted (`"reset"`).

  Padding (`pooling_semantics`, `zoo.choices`): with the zoo's (the default) a pooled
  token is real when any token of its window is, and mean and max pooling read only the
  real tokens, so outputs at real positions do not depend on padding (but for a text that
  nearly fills one length and not another, with `truncate_seq`: DESIGN.md, "Masks"). With Hugging
  Face's ("huggingface": its port, its Funnel checkpoints, the presets) a pooled token is
  real only when every token of its window is, and pooling runs over the whole window.
  With the authors' ("funnel_authors": their TensorFlow and PyTorch code, the paper's
  checkpoints as `zoo.convert funnel-tf` converts them) a pooled token is real when any
  token of its window is, and pooling runs over the whole window. The residual-attention
  carry is pooled the same way.

  Inputs are Model Garden's dict of int32 `[B, seq_length]` tensors; outputs a dict:
  `sequence_output` (decoder output `[B, T, D]` with a decoder, else the last block's
  `[B, T', D]`), `encoder_sequence_output` (the last block's), `pooled_output` (tanh
  dense on [cls]), `encoder_outputs` (every encoder layer application), and with
  `output_attention_probs`, `attention_probs`.

  Args:
    vocab_size: number of word ids.
    hidden_size: model width D.
    block_sizes: layers per block.
    block_repeats: how often each block's layers run (weights shared); default 1s.
    num_heads, head_size: attention heads and their width (default D / heads).
    intermediate_size, activation: feed-forward width and activation.
    dropout, attention_dropout, activation_dropout: dropout rates.
    embedding_width: embedding width, projected to D when different (default D).
    pooling_type: "mean" or "max" (`zoo.choices.POOLING_TYPES`).
    pooling_semantics: what a pooling window does with padding, "zoo", "huggingface" or
      "funnel_authors" (`zoo.choices.POOLING_SEMANTICS`; `zoo.layers.FunnelPooling`).
      A recorded config's "authors" (the name Hugging Face's semantics had before) loads as
      "huggingface"; passed here it is refused as ambiguous.
    pool_q_only: pool only the queries of a pooled block's first layer.
    separate_cls: keep [cls] out of the pooling (and out of the relative terms).
    truncate_seq: drop the last token before pooling, so lengths halve exactly.
    position_encoding: "factorized" or "shift"
      (`zoo.choices.RELATIVE_POSITION_ENCODINGS`).
    position_rules: where the relative terms place token 0 and pooled tokens without
      `separate_cls` (with it both agree; `zoo.choices.POSITION_RULES`): "window_start" (a
      pooled token at its window's first token; Hugging Face, the authors' PyTorch code) or
      "authors_tf" (the authors' TensorFlow code: token 0's position and segment terms are
      zeroed, and the shift form places block b's pooled queries at 1 - 2^b + 2^b·i).
    use_segment_bias: the relative segment term.
    num_decoder_layers: full-length layers after upsampling; 0 for no decoder.
    decoder_residual_layer: 0-based index of the encoder layer application (counting
      repeats) whose output is added before the decoder; default the last of block 0.
    residual_attention, running_mean: RealFormer residual attention in the encoder.
    carry_at_pooling: "pool" or "reset" the residual carry at block boundaries.
    layer_norm_epsilon: epsilon of every layer norm.
    initializer_range: stddev of the truncated-normal initializer.
    seq_length: static input length.
    output_attention_probs: also return each layer's attention probabilities.
    layer_sharing: cross-layer sharing (ALBERT, `zoo.choices.LAYER_SHARING`): "none", "all" (the
      first layer at every depth), "attention" or "ffn" (the first layer's attention or
      feed-forward net in every layer) (the decoder's
      layers never are).
    attention_window: block-local attention in every layer, decoder included (`zoo.windows`,
      DESIGN.md Section 9): W tokens on each side of a query, counted in the block's own
      sequence (so a window widens with every pooling); a pool-query-only layer counts W of its
      unpooled keys. None (the default) for full attention. With `residual_attention` the carry
      cannot be pooled: it needs `carry_at_pooling="reset"` and `pool_q_only=False`.
    global_tokens: with `attention_window`, the leading tokens of every layer's sequence ([cls]
      at least) that attend to and are attended by every position.

  Example:
    >>> funnel = FunnelEncoder(vocab_size=100, hidden_size=32, block_sizes=(1, 1, 1), num_heads=4,
    ...                        intermediate_size=64, num_decoder_layers=1, seq_length=16)
    >>> ids = tf.ones([2, 16], tf.int32)
    >>> outputs = funnel(dict(input_word_ids=ids, input_mask=ids, input_type_ids=0 * ids))
    >>> outputs["sequence_output"].shape, outputs["encoder_sequence_output"].shape
    (TensorShape([2, 16, 32]), TensorShape([2, 4, 32]))
  """

  @staticmethod
  def layer_classes() -> dict[str, type]:
    """The tf_keras layers a Funnel encoder is made of (`zoo.specs.encoder.EncoderKit` fields)."""
    return dict(embeddings=EncoderEmbeddings, block=TransformerBlock, pooling=FunnelPooling,
                upsampling=FunnelUpsampling, cls_segment_ids=ClsSegmentIds)

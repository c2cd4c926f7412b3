"""Funnel-Transformer encoder, with the optional decoder for token-level tasks.

Dai et al., 2020, "Funnel-Transformer: Filtering out Sequential Redundancy for
Efficient Language Processing" (arXiv:2006.03236), Sec. 2.

Axes: B batch, T full sequence length, T' pooled length, D model width.
"""

import numpy as np
import tf_keras as keras

from zoo.grids import block_lengths
from zoo.layers import EncoderEmbeddings
from zoo.layers import FunnelPooling
from zoo.layers import FunnelUpsampling
from zoo.layers import TransformerBlock
from zoo.layers import pool_positions
from zoo.layers.constants import FACTORIZED
from zoo.layers.constants import POOLING_SEMANTICS
from zoo.layers.constants import POOLING_TYPES
from zoo.layers.constants import RELATIVE_POSITION_ENCODINGS
from zoo.layers.constants import ZOO_POOLING
from zoo.layers.constants import check_choice
from zoo.models.encoder_inputs import ClsSegmentIds
from zoo.models.encoder_inputs import EncoderModel
from zoo.models.encoder_inputs import encoder_inputs

CARRY_AT_POOLING = ("pool", "reset")


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

  Relative attention follows appendix A.2 (factorized by default), with the relative
  segment term where [cls] (the first token, given segment id 2 here whatever its
  input type id) belongs to every segment. Optional RealFormer residual attention
  runs through the encoder: at a block boundary the carry is pooled with the hidden
  states (`carry_at_pooling="pool"`) or restarted (`"reset"`).

  Padding (`pooling_semantics`): with the zoo's (the default) a pooled token is real
  when any token of its window is, and mean and max pooling read only the real
  tokens, so outputs at real positions do not depend on padding. With the authors'
  (what published checkpoints were trained with, and what `zoo.convert` writes) a
  pooled token is real only when every token of its window is, and pooling runs over
  the whole window; the residual-attention carry is pooled the same way.

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
    pooling_type: "mean" or "max" (`zoo.layers.constants.POOLING_TYPES`).
    pooling_semantics: what a pooling window does with padding, "zoo" or "authors"
      (`zoo.layers.constants.POOLING_SEMANTICS`; `zoo.layers.FunnelPooling`).
    pool_q_only: pool only the queries of a pooled block's first layer.
    separate_cls: keep [cls] out of the pooling (and out of the relative terms).
    truncate_seq: drop the last token before pooling, so lengths halve exactly.
    position_encoding: "factorized" or "shift"
      (`zoo.layers.constants.RELATIVE_POSITION_ENCODINGS`).
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

  Example:
    >>> funnel = FunnelEncoder(vocab_size=100, hidden_size=32, block_sizes=(1, 1, 1), num_heads=4,
    ...                        intermediate_size=64, num_decoder_layers=1, seq_length=16)
    >>> ids = tf.ones([2, 16], tf.int32)
    >>> outputs = funnel(dict(input_word_ids=ids, input_mask=ids, input_type_ids=0 * ids))
    >>> outputs["sequence_output"].shape, outputs["encoder_sequence_output"].shape
    (TensorShape([2, 16, 32]), TensorShape([2, 4, 32]))
  """

  def __init__(self,
               vocab_size,
               hidden_size=768,
               block_sizes=(6, 6, 6),
               block_repeats=None,
               num_heads=12,
               head_size=None,
               intermediate_size=3072,
               activation="gelu_approximate",
               dropout=0.1,
               attention_dropout=0.1,
               activation_dropout=0.0,
               embedding_width=None,
               pooling_type="mean",
               pooling_semantics=ZOO_POOLING,
               pool_q_only=True,
               separate_cls=True,
               truncate_seq=True,
               position_encoding=FACTORIZED,
               use_segment_bias=True,
               num_decoder_layers=0,
               decoder_residual_layer=None,
               residual_attention=False,
               running_mean=False,
               carry_at_pooling="pool",
               layer_norm_epsilon=1e-9,
               initializer_range=0.1,
               seq_length=512,
               output_attention_probs=False,
               **kwargs):
    block_sizes = tuple(block_sizes)
    block_repeats = tuple(block_repeats) if block_repeats else (1,) * len(block_sizes)
    config = dict(
        vocab_size=vocab_size, hidden_size=hidden_size, block_sizes=block_sizes,
        block_repeats=block_repeats, num_heads=num_heads, head_size=head_size,
        intermediate_size=intermediate_size, activation=activation, dropout=dropout,
        attention_dropout=attention_dropout, activation_dropout=activation_dropout,
        embedding_width=embedding_width, pooling_type=pooling_type, pooling_semantics=pooling_semantics,
        pool_q_only=pool_q_only,
        separate_cls=separate_cls, truncate_seq=truncate_seq, position_encoding=position_encoding,
        use_segment_bias=use_segment_bias, num_decoder_layers=num_decoder_layers,
        decoder_residual_layer=decoder_residual_layer, residual_attention=residual_attention,
        running_mean=running_mean, carry_at_pooling=carry_at_pooling,
        layer_norm_epsilon=layer_norm_epsilon, initializer_range=initializer_range,
        seq_length=seq_length, output_attention_probs=output_attention_probs)
    self._check_config(config)
    head_size = head_size or hidden_size // num_heads
    initializer = keras.initializers.TruncatedNormal(stddev=initializer_range)
    num_applications = sum(s * r for s, r in zip(block_sizes, block_repeats, strict=True))
    if decoder_residual_layer is None:
      decoder_residual_layer = block_sizes[0] * block_repeats[0] - 1

    # Layers.
    def transformer_block(name, residual):
      return TransformerBlock(
          num_heads, head_size, intermediate_size, activation=activation, dropout=dropout,
          attention_dropout=attention_dropout, activation_dropout=activation_dropout,
          layer_norm_epsilon=layer_norm_epsilon, position_encoding=position_encoding,
          use_segment_bias=use_segment_bias, separate_cls=separate_cls,
          residual_attention=residual, running_mean=running_mean and residual,
          kernel_initializer=initializer, name=name)

    embeddings = EncoderEmbeddings(
        vocab_size, embedding_width or hidden_size, hidden_size, dropout=dropout,
        layer_norm_epsilon=layer_norm_epsilon, initializer=initializer, name="embeddings")
    blocks = [[transformer_block(f"block_{b}_layer_{i}", residual_attention) for i in range(size)]
              for b, size in enumerate(block_sizes)]
    pooling = FunnelPooling(pooling_type, separate_cls, truncate_seq, semantics=pooling_semantics,
                            name="pooling")
    decoder = [transformer_block(f"decoder_layer_{i}", False) for i in range(num_decoder_layers)]
    pooler = keras.layers.Dense(hidden_size, activation="tanh", kernel_initializer=initializer,
                                name="pooler")

    # The functional graph.
    inputs = encoder_inputs(seq_length)
    full_mask = mask = inputs["input_mask"]
    segments = None
    if use_segment_bias:
      segments = ClsSegmentIds(name="cls_segment_ids")(inputs["input_type_ids"])
    full_segments = segments
    full_positions = positions = np.arange(seq_length, dtype=np.float64)
    hidden = embeddings(inputs["input_word_ids"])
    carry, depth, layer_outputs, attention_probs = None, 0, [], []

    def run(layer, query, key_value=None, **kwargs):
      """One layer application; returns its output and updates the carry."""
      nonlocal carry, depth
      result = layer(query, key_value, attention_carry=carry if layer.residual_attention else None,
                     layer_index=depth, **kwargs)
      if layer.residual_attention:
        carry, depth = result.carry, depth + 1
      attention_probs.append(result.probs)
      return result.output

    # Each layer runs its repeats back to back (L0 L0 L1 L1), as in the authors' code.
    for b, block in enumerate(blocks):
      for i, layer in enumerate(block):
        for r in range(block_repeats[b]):
          same_grid = dict(query_positions=positions.tolist(), key_positions=positions.tolist(),
                           query_segment_ids=segments, key_segment_ids=segments)
          if not (b > 0 and r == 0 and i == 0):
            hidden = run(layer, hidden, attention_mask=mask, **same_grid)
            layer_outputs.append(hidden)
            continue
          # First layer of a pooled block: pool hidden states, mask, ids, positions, carry.
          if carry_at_pooling == "reset":
            carry, depth = None, 0
          pooled = pooling(hidden, input_mask=mask)                      # [B, T, D] -> [B, T', D]
          pooled_mask = pooling.pool_mask(mask)
          pooled_segments = None if segments is None else pooling.pool_ids(segments)
          pooled_positions = pool_positions(positions, separate_cls, truncate_seq)
          if carry is not None:                                          # [B, N, T, T] -> [B, N, T', T]
            carry = pooling(carry, input_mask=mask, axis=2)
          if pool_q_only:   # pooled queries attend to the unpooled keys
            hidden_out = run(layer, pooled, hidden, attention_mask=mask,
                             **dict(same_grid, query_positions=pooled_positions.tolist(),
                                    query_segment_ids=pooled_segments))
            if carry is not None:                                        # [B, N, T', T] -> [B, N, T', T']
              carry = pooling(carry, input_mask=mask, axis=3)
          else:
            if carry is not None:
              carry = pooling(carry, input_mask=mask, axis=3)
            hidden_out = run(layer, pooled, attention_mask=pooled_mask,
                             query_positions=pooled_positions.tolist(),
                             key_positions=pooled_positions.tolist(),
                             query_segment_ids=pooled_segments, key_segment_ids=pooled_segments)
          hidden, mask, segments, positions = hidden_out, pooled_mask, pooled_segments, pooled_positions
          layer_outputs.append(hidden)
    encoder_output = hidden

    sequence_output = encoder_output
    if decoder:
      upsampled = FunnelUpsampling(2 ** (len(block_sizes) - 1), separate_cls, truncate_seq,
                                   name="upsampling")(encoder_output, target_length=seq_length)
      hidden = upsampled + layer_outputs[decoder_residual_layer]
      for layer in decoder:
        hidden = run(layer, hidden, attention_mask=full_mask, query_positions=full_positions.tolist(),
                     key_positions=full_positions.tolist(), query_segment_ids=full_segments,
                     key_segment_ids=full_segments)
      sequence_output = hidden

    outputs = dict(sequence_output=sequence_output, encoder_sequence_output=encoder_output,
                   pooled_output=pooler(encoder_output[:, 0]), encoder_outputs=layer_outputs)
    if output_attention_probs:
      outputs["attention_probs"] = attention_probs
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)
    assert len(layer_outputs) == num_applications

    # The config.
    self._config = config
    self._embeddings = embeddings

  @staticmethod
  def _check_config(config):
    check_choice("pooling_type", config["pooling_type"], POOLING_TYPES)
    check_choice("pooling_semantics", config["pooling_semantics"], POOLING_SEMANTICS)
    check_choice("carry_at_pooling", config["carry_at_pooling"], CARRY_AT_POOLING)
    check_choice("position_encoding", config["position_encoding"], RELATIVE_POSITION_ENCODINGS)
    if len(config["block_repeats"]) != len(config["block_sizes"]):
      raise ValueError(f"block_repeats {config['block_repeats']} must have one entry per block "
                       f"of block_sizes {config['block_sizes']}")
    if not config["seq_length"]:
      raise ValueError("FunnelEncoder needs a static seq_length")
    lengths = block_lengths(config["seq_length"], len(config["block_sizes"]), config["separate_cls"],
                            config["truncate_seq"])
    if lengths[-1] < 2:
      raise ValueError(f"seq_length {config['seq_length']} is too short for "
                       f"{len(config['block_sizes'])} blocks (lengths {lengths})")
    applications = sum(s * r for s, r in zip(config["block_sizes"], config["block_repeats"], strict=True))
    index = config["decoder_residual_layer"]
    if index is not None and not 0 <= index < applications:
      raise ValueError(f"decoder_residual_layer must be in [0, {applications}), got {index}")

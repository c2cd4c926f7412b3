"""The Funnel-Transformer encoder's forward wiring (Dai et al., 2020), written once: embeddings, blocks of
relative-attention layers with pooling between them, the residual attention carry across blocks, the
decoder back to full length. `funnel_graph` wires the layers of a `FunnelConfig`, which
`zoo.models.FunnelEncoder` (tf_keras) and `zoo.keras3.FunnelEncoder` build with their own layer classes
(an `EncoderKit`). DESIGN.md, Sections 2 to 5, gives the maths.
"""

import typing
from typing import Any

import numpy as np

from zoo.choices import AUTHORS_TF_POSITIONS
from zoo.choices import SHIFT
from zoo.configs import FunnelConfig
from zoo.graphs.kit import EncoderKit
from zoo.graphs.kit import layer_stack
from zoo.grids import authors_tf_positions
from zoo.grids import pool_positions


class FunnelLayers(typing.NamedTuple):
  """The layers of a Funnel encoder (made once per kit: `EncoderKit.make` keeps them by name)."""

  embeddings: typing.Any
  blocks: list            # per block, its layers (shared ones repeated, as `layer_stack` gives them)
  pooling: typing.Any
  decoder: list
  pooler: typing.Any


def funnel_layers(c: FunnelConfig, kit: EncoderKit) -> FunnelLayers:
  """The `FunnelLayers` of `c` in `kit`'s edition."""
  initializer = kit.keras.initializers.TruncatedNormal(stddev=c.initializer_range)

  def transformer_block(name, residual, **shared):
    return kit.make(
        kit.block, c.num_heads, c.attention_head_size, c.intermediate_size, activation=c.activation,
        dropout=c.dropout,
        attention_dropout=c.attention_dropout, activation_dropout=c.activation_dropout,
        layer_norm_epsilon=c.layer_norm_epsilon, position_encoding=c.position_encoding,
        use_segment_bias=c.use_segment_bias, separate_cls=c.cls_terms_zeroed,
        residual_attention=residual, running_mean=c.running_mean and residual,
        kernel_initializer=initializer, attention_window=c.attention_window, global_tokens=c.global_tokens,
        name=name, **shared, **kit.options)

  embeddings = kit.make(
      kit.embeddings, c.vocab_size, c.embedding_width or c.hidden_size, c.hidden_size, dropout=c.dropout,
      layer_norm_epsilon=c.layer_norm_epsilon, initializer=initializer, name="embeddings", **kit.options,
      **kit.embedding_options)
  # The encoder's layers, block by block (the decoder's are never shared).
  names = [f"block_{b}_layer_{i}" for b, size in enumerate(c.block_sizes) for i in range(size)]
  stack = iter(layer_stack(lambda name, **shared: transformer_block(name, c.residual_attention, **shared),
                           names, c.layer_sharing))
  blocks = [[next(stack) for _ in range(size)] for size in c.block_sizes]
  pooling = kit.make(kit.pooling, c.pooling_type, c.separate_cls, c.truncate_seq,
                     semantics=c.pooling_semantics, name="pooling", **kit.options)
  decoder = [transformer_block(f"decoder_layer_{i}", False) for i in range(c.num_decoder_layers)]
  pooler = kit.make(kit.keras.layers.Dense, c.hidden_size, activation="tanh", kernel_initializer=initializer,
                    name="pooler", **kit.options)
  return FunnelLayers(embeddings, blocks, pooling, decoder, pooler)


class Sequence(typing.NamedTuple):
  """A sequence at one block's length: hidden states `[B, T, D]`, mask `[B, T]`, segment ids `[B, T]`
  (None without the segment bias) and positions (a numpy vector: static)."""

  hidden: typing.Any
  mask: typing.Any
  segments: typing.Any
  positions: np.ndarray

  def grid(self):
    """The attention arguments of a layer whose queries and keys are this sequence."""
    return dict(query_positions=self.positions.tolist(), key_positions=self.positions.tolist(),
                query_segment_ids=self.segments, key_segment_ids=self.segments)


class LayerRunner:
  """Applies layers in order, carrying RealFormer's residual attention across them: each residual
  layer takes the carry and its depth and hands on its own; `probs` collects every layer's attention
  probabilities."""

  def __init__(self):
    self.carry, self.depth, self.probs = None, 0, []

  def reset(self):
    self.carry, self.depth = None, 0

  def __call__(self, layer, query, key_value=None, **kwargs):
    result = layer(query, key_value, attention_carry=self.carry if layer.residual_attention else None,
                   layer_index=self.depth, **kwargs)
    if layer.residual_attention:
      self.carry, self.depth = result.carry, self.depth + 1
    self.probs.append(result.probs)
    return result.output


def pooled_block_start(c: FunnelConfig, layer: Any, sequence: Sequence, pooling: Any, run: LayerRunner,
                       block: int) -> Sequence:
  """The first layer application of pooled block `block`: pools the hidden states, mask, segment ids,
  positions and the carry, then runs `layer` (pooled queries on the unpooled keys with
  `pool_q_only`); returns the pooled `Sequence` with the layer's output."""
  if c.carry_at_pooling == "reset":
    run.reset()
  mask = sequence.mask
  pooled = pooling(sequence.hidden, input_mask=mask)                       # [B, T, D] -> [B, T', D]
  pooled_mask = pooling.pool_mask(mask)
  pooled_segments = None if sequence.segments is None else pooling.pool_ids(sequence.segments)
  pooled_positions = pool_positions(sequence.positions, c.separate_cls, c.truncate_seq)
  if c.position_rules == AUTHORS_TF_POSITIONS and c.position_encoding == SHIFT:
    pooled_positions = authors_tf_positions(pooled_positions.shape[0], block)
  after = Sequence(None, pooled_mask, pooled_segments, pooled_positions)
  if run.carry is not None:                                                # [B, N, T, T] -> [B, N, T', T]
    run.carry = pooling(run.carry, input_mask=mask, axis=2)
  if c.pool_q_only:   # pooled queries attend to the unpooled keys
    output = run(layer, pooled, sequence.hidden, attention_mask=mask,
                 **dict(sequence.grid(), query_positions=pooled_positions.tolist(),
                        query_segment_ids=pooled_segments))
    if run.carry is not None:                                              # [B, N, T', T] -> [B, N, T', T']
      run.carry = pooling(run.carry, input_mask=mask, axis=3)
  else:
    if run.carry is not None:
      run.carry = pooling(run.carry, input_mask=mask, axis=3)
    output = run(layer, pooled, attention_mask=pooled_mask, **after.grid())
  return after._replace(hidden=output)


def encoder_blocks(c: FunnelConfig, layers: FunnelLayers, sequence: Sequence, run: LayerRunner
                   ) -> tuple[Sequence, list]:
  """The encoder's blocks on the full-length `sequence`: `(the last block's Sequence, every layer
  application's output)`. Each layer runs its repeats back to back (L0 L0 L1 L1), as in the
  authors' code; a block after the first starts by pooling."""
  outputs = []
  for b, block in enumerate(layers.blocks):
    for i, layer in enumerate(block):
      for r in range(c.repeats[b]):
        if b > 0 and r == 0 and i == 0:
          sequence = pooled_block_start(c, layer, sequence, layers.pooling, run, b)
        else:
          sequence = sequence._replace(
              hidden=run(layer, sequence.hidden, attention_mask=sequence.mask, **sequence.grid()))
        outputs.append(sequence.hidden)
  assert len(outputs) == c.layer_applications
  return sequence, outputs


def decoder_output(c: FunnelConfig, kit: EncoderKit, layers: FunnelLayers, encoder_output: Any,
                   layer_outputs: list, full: Sequence, run: LayerRunner) -> Any:
  """The decoder: the last block's output upsampled to the full length, plus the output of layer
  application `decoder_residual_layer` (default: block 0's last), through the decoder layers."""
  upsampling = kit.make(kit.upsampling, c.upsampling_stride, c.separate_cls, c.truncate_seq,
                        name="upsampling", **kit.options)
  hidden = upsampling(encoder_output, target_length=c.seq_length) + layer_outputs[c.decoder_residual_index]
  for layer in layers.decoder:
    hidden = run(layer, hidden, attention_mask=full.mask, **full.grid())
  return hidden


def funnel_graph(c: FunnelConfig, kit: EncoderKit, inputs: dict) -> tuple[dict, object]:
  """`FunnelEncoder`'s layers and graph in `kit`'s edition on `inputs` (the encoder's named `[B, T]` inputs):
  `(outputs, embeddings)`."""
  layers = funnel_layers(c, kit)
  segments = None
  if c.use_segment_bias:
    segments = kit.make(kit.cls_segment_ids, name="cls_segment_ids", **kit.options)(inputs["input_type_ids"])
  full = Sequence(layers.embeddings(inputs["input_word_ids"]), inputs["input_mask"], segments,
                  np.arange(c.seq_length, dtype=np.float64))
  run = LayerRunner()
  last, layer_outputs = encoder_blocks(c, layers, full, run)
  encoder_output = last.hidden
  sequence_output = encoder_output
  if layers.decoder:
    sequence_output = decoder_output(c, kit, layers, encoder_output, layer_outputs, full, run)
  outputs = dict(sequence_output=sequence_output, encoder_sequence_output=encoder_output,
                 pooled_output=layers.pooler(encoder_output[:, 0]), encoder_outputs=layer_outputs)
  if c.output_attention_probs:
    outputs["attention_probs"] = run.probs
  return outputs, layers.embeddings

"""The Funnel-Transformer encoder (Dai et al., 2020), edition-neutral: its constructor's arguments
and checks (`FunnelEncoderSpec`, `check_funnel_config`) and its forward wiring (`funnel_graph`:
embeddings, blocks of relative-attention layers with pooling between them, the residual
attention carry across blocks, the decoder back to full length), which
`zoo.models.FunnelEncoder` (tf_keras) and `zoo.keras3.FunnelEncoder` build with their own layer
classes. DESIGN.md, Sections 2 to 5, gives the maths.
"""

import types
import typing

import numpy as np

from zoo.choices import AUTHORS_TF_POSITIONS
from zoo.choices import CARRY_AT_POOLING
from zoo.choices import FACTORIZED
from zoo.choices import LAYER_SHARING
from zoo.choices import POOLING_TYPES
from zoo.choices import POSITION_RULES
from zoo.choices import RELATIVE_POSITION_ENCODINGS
from zoo.choices import SHIFT
from zoo.choices import WINDOW_START_POSITIONS
from zoo.choices import ZOO_POOLING
from zoo.choices import check_choice
from zoo.choices import check_pooling_semantics
from zoo.grids import authors_tf_positions
from zoo.grids import block_lengths
from zoo.grids import pool_positions
from zoo.length_buckets import funnel_capacity
from zoo.specs.attention import check_local_attention
from zoo.specs.encoder import EncoderSpec
from zoo.specs.encoder import constructor_arguments
from zoo.specs.encoder import layer_stack
from zoo.specs.encoder_inputs import encoder_inputs


class FunnelEncoderSpec(EncoderSpec):
  """`FunnelEncoder`'s arguments, checks and functional graph (see the tf_keras encoder's docstring)."""

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
               position_rules=WINDOW_START_POSITIONS,
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
               layer_sharing="none",
               attention_window=None,
               global_tokens=1,
               **kwargs):
    block_sizes = tuple(block_sizes)
    block_repeats = tuple(block_repeats) if block_repeats else (1,) * len(block_sizes)
    config = constructor_arguments(locals())
    check_funnel_config(config)
    self._build(config, kwargs, funnel_graph)

  @staticmethod
  def config_length_problem(config, length):
    blocks = len(config["block_sizes"])
    shortest = shortest_funnel_length(blocks, config["separate_cls"], config["truncate_seq"])
    if length < shortest:
      lengths = block_lengths(length, blocks, config["separate_cls"], config["truncate_seq"])
      return (f"{length} tokens are too few for {blocks} blocks (lengths {lengths}): the "
              f"encoder takes {shortest} tokens or more (relative positions: no maximum)")
    return None

  @staticmethod
  def config_padding_dependence(config):
    semantics = config["pooling_semantics"]
    if semantics == ZOO_POOLING:
      return None
    return (f"pooling_semantics={semantics!r} pools padding into the windows that hold the last real tokens "
            "(mean and max run over whole windows), so a length holds only the texts whose windows it holds "
            f"whole, fewer than under pooling_semantics={ZOO_POOLING!r}, which reads only real tokens")

  def sequence_mask(self, input_mask):
    """The input mask, or without a decoder the mask of the last block's pooled sequence (the pooling
    layer's `pool_mask` once per pooled block)."""
    if self._config["num_decoder_layers"]:
      return input_mask
    for _ in self._config["block_sizes"][1:]:
      input_mask = self.get_layer("pooling").pool_mask(input_mask)
    return input_mask

  @staticmethod
  def config_bucket_capacity(config, length):
    return funnel_capacity(length, config["seq_length"], num_blocks=len(config["block_sizes"]),
                           separate_cls=config["separate_cls"], truncate_seq=config["truncate_seq"],
                           decoder=bool(config["num_decoder_layers"]), semantics=config["pooling_semantics"])


def shortest_funnel_length(num_blocks, separate_cls=True, truncate_seq=True):
  """The fewest tokens a Funnel encoder of `num_blocks` blocks runs on: its last block keeps 2."""
  length = 2
  while block_lengths(length, num_blocks, separate_cls, truncate_seq)[-1] < 2:
    length += 1
  return length


def check_funnel_config(config):
  """The `FunnelEncoder` argument checks."""
  check_choice("pooling_type", config["pooling_type"], POOLING_TYPES)
  check_pooling_semantics("pooling_semantics", config["pooling_semantics"])
  check_choice("position_rules", config["position_rules"], POSITION_RULES)
  check_choice("carry_at_pooling", config["carry_at_pooling"], CARRY_AT_POOLING)
  check_choice("position_encoding", config["position_encoding"], RELATIVE_POSITION_ENCODINGS)
  check_choice("layer_sharing", config["layer_sharing"], LAYER_SHARING)
  if len(config["block_repeats"]) != len(config["block_sizes"]):
    raise ValueError(f"block_repeats {config['block_repeats']} must have one entry per block "
                     f"of block_sizes {config['block_sizes']}")
  if not config["seq_length"]:
    raise ValueError("FunnelEncoder needs a static seq_length")
  lengths = block_lengths(config["seq_length"], len(config["block_sizes"]), config["separate_cls"],
                          config["truncate_seq"])
  if lengths[-1] < 2:
    shortest = shortest_funnel_length(len(config["block_sizes"]), config["separate_cls"],
                                      config["truncate_seq"])
    raise ValueError(f"seq_length {config['seq_length']} is too short for "
                     f"{len(config['block_sizes'])} blocks (lengths {lengths}): at least {shortest}")
  applications = sum(s * r for s, r in zip(config["block_sizes"], config["block_repeats"], strict=True))
  check_local_attention(config["attention_window"], config["global_tokens"])
  pooled = len(config["block_sizes"]) > 1
  if config["attention_window"] is not None and config["residual_attention"] and pooled:
    if config["carry_at_pooling"] == "pool":
      raise ValueError(
          "local attention (attention_window) with residual_attention cannot pool the carry "
          "(carry_at_pooling='pool'): a pooled block's window spans pairs of the block below that no window "
          "scored, so the pooled carry would not be the full one; use carry_at_pooling='reset' (and "
          "pool_q_only=False)")
    if config["pool_q_only"]:
      raise ValueError(
          "local attention (attention_window) with residual_attention and pool_q_only: the pool-query-only "
          "layer's carry (pooled queries, unpooled keys) would have to be pooled to the next layer's keys, "
          "which spans pairs its windows never scored; use pool_q_only=False with carry_at_pooling='reset'")
  index = config["decoder_residual_layer"]
  if index is not None and not 0 <= index < applications:
    raise ValueError(f"decoder_residual_layer must be in [0, {applications}), got {index}")


class FunnelLayers(typing.NamedTuple):
  """The layers of a Funnel encoder (made once per kit: `EncoderKit.make` keeps them by name)."""

  embeddings: typing.Any
  blocks: list            # per block, its layers (shared ones repeated, as `layer_stack` gives them)
  pooling: typing.Any
  decoder: list
  pooler: typing.Any


def funnel_layers(c, kit):
  """The `FunnelLayers` of config `c` (a namespace of the constructor's arguments) in `kit`'s edition."""
  head_size = c.head_size or c.hidden_size // c.num_heads
  initializer = kit.keras.initializers.TruncatedNormal(stddev=c.initializer_range)
  # The attention layers zero the relative terms of token 0's pairs with separate_cls, and always
  # under the authors' TensorFlow rules.
  cls_terms_zeroed = c.separate_cls or c.position_rules == AUTHORS_TF_POSITIONS

  def transformer_block(name, residual, **shared):
    return kit.make(
        kit.block, c.num_heads, head_size, c.intermediate_size, activation=c.activation, dropout=c.dropout,
        attention_dropout=c.attention_dropout, activation_dropout=c.activation_dropout,
        layer_norm_epsilon=c.layer_norm_epsilon, position_encoding=c.position_encoding,
        use_segment_bias=c.use_segment_bias, separate_cls=cls_terms_zeroed,
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


def pooled_block_start(c, layer, sequence, pooling, run, block):
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


def encoder_blocks(c, layers, sequence, run):
  """The encoder's blocks on the full-length `sequence`: `(the last block's Sequence, every layer
  application's output)`. Each layer runs its repeats back to back (L0 L0 L1 L1), as in the
  authors' code; a block after the first starts by pooling."""
  outputs = []
  for b, block in enumerate(layers.blocks):
    for i, layer in enumerate(block):
      for r in range(c.block_repeats[b]):
        if b > 0 and r == 0 and i == 0:
          sequence = pooled_block_start(c, layer, sequence, layers.pooling, run, b)
        else:
          sequence = sequence._replace(
              hidden=run(layer, sequence.hidden, attention_mask=sequence.mask, **sequence.grid()))
        outputs.append(sequence.hidden)
  assert len(outputs) == sum(s * r for s, r in zip(c.block_sizes, c.block_repeats, strict=True))
  return sequence, outputs


def decoder_output(c, kit, layers, encoder_output, layer_outputs, full, run):
  """The decoder: the last block's output upsampled to the full length, plus the output of layer
  application `decoder_residual_layer` (default: block 0's last), through the decoder layers."""
  residual = c.decoder_residual_layer
  if residual is None:
    residual = c.block_sizes[0] * c.block_repeats[0] - 1
  upsampling = kit.make(kit.upsampling, 2 ** (len(c.block_sizes) - 1), c.separate_cls, c.truncate_seq,
                        name="upsampling", **kit.options)
  hidden = upsampling(encoder_output, target_length=c.seq_length) + layer_outputs[residual]
  for layer in layers.decoder:
    hidden = run(layer, hidden, attention_mask=full.mask, **full.grid())
  return hidden


def funnel_graph(config, kit, inputs=None):
  """`FunnelEncoder`'s layers and graph in `kit`'s edition: `(inputs, outputs, embeddings)`.

  `inputs`: the tensors to run the graph on (default new `keras.Input`s of `seq_length`).
  """
  c = types.SimpleNamespace(**config)
  layers = funnel_layers(c, kit)
  inputs = inputs if inputs is not None else encoder_inputs(kit.keras, c.seq_length)
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
  return inputs, outputs, layers.embeddings

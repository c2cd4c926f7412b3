"""The Transformer and Funnel-Transformer encoders in Keras 3.

The Keras 3 twins of `zoo.models.TransformerEncoder` and `zoo.models.FunnelEncoder`:
functional models with the same constructor arguments (and so the same config fields),
the same inputs (`input_word_ids`, `input_mask`, `input_type_ids`, int32 `[B, T]`) and
outputs (`sequence_output`, `pooled_output`, `encoder_outputs`, the Funnel's
`encoder_sequence_output`, `attention_probs` on request), and the same layer and weight
names, so weights move between the editions by name (`zoo.named_weights`).
"""

import keras
import numpy as np
from keras import ops

from zoo.choices import ABSOLUTE
from zoo.choices import CARRY_AT_POOLING
from zoo.choices import FACTORIZED
from zoo.choices import POOLING_SEMANTICS
from zoo.choices import POOLING_TYPES
from zoo.choices import RELATIVE_POSITION_ENCODINGS
from zoo.choices import SHIFT
from zoo.choices import ZOO_POOLING
from zoo.choices import check_choice
from zoo.grids import block_lengths
from zoo.grids import pool_positions
from zoo.keras3.embeddings import ClsSegmentIds
from zoo.keras3.embeddings import EncoderEmbeddings
from zoo.keras3.funnel_pooling import FunnelPooling
from zoo.keras3.funnel_pooling import FunnelUpsampling
from zoo.keras3.transformer_block import TransformerBlock

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def encoder_inputs(seq_length=None):
  """Named int32 `[B, T]` Keras inputs, as Model Garden's encoders take them."""
  return {name: keras.Input(shape=(seq_length,), dtype="int32", name=name) for name in INPUT_NAMES}


def _cast_like(x, reference):
  return ops.cast(x, reference.dtype)


def dtype_policy(dtype=None):
  """The dtype policy of an encoder and of every layer in it: `dtype` (a name such as
  "mixed_bfloat16", or a policy), or the global policy when None. The float32 islands
  (layer norms, attention scores and probabilities, the carry) stay float32 under any of them."""
  return keras.dtype_policies.get(dtype) if dtype is not None else keras.config.dtype_policy()


class EncoderModel(keras.Model):
  """What both encoders share: a functional model rebuilt from its constructor arguments."""

  def get_embedding_table(self):
    return self._embeddings.word_embeddings.embeddings

  def get_embedding_layer(self):
    return self._embeddings.word_embeddings

  def get_config(self):
    return dict(self._config, name=self.name, dtype=self.dtype_policy.name)

  @classmethod
  def from_config(cls, config, custom_objects=None):
    config = {key: value for key, value in config.items() if key != "trainable"}
    if isinstance(config.get("dtype"), dict):   # a serialized policy
      config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
    return cls(**config)


@keras.saving.register_keras_serializable(package="zoo")
class TransformerEncoder(EncoderModel):
  """A stack of `TransformerBlock`s over token embeddings: Post-LN, Pre-LN, RealFormer.

  `zoo.models.TransformerEncoder` for Keras 3; see its docstring for the arguments.
  """

  def __init__(self,
               vocab_size,
               hidden_size=768,
               num_layers=12,
               num_heads=12,
               intermediate_size=3072,
               activation="gelu",
               dropout=0.1,
               attention_dropout=0.1,
               max_sequence_length=512,
               type_vocab_size=2,
               embedding_width=None,
               norm_first=False,
               residual_attention=False,
               running_mean=False,
               position_encoding=ABSOLUTE,
               layer_norm_epsilon=1e-12,
               initializer_range=0.02,
               seq_length=None,
               output_attention_probs=False,
               dtype=None,
               **kwargs):
    policy = dtype_policy(dtype)
    config = dict(
        vocab_size=vocab_size, hidden_size=hidden_size, num_layers=num_layers, num_heads=num_heads,
        intermediate_size=intermediate_size, activation=activation, dropout=dropout,
        attention_dropout=attention_dropout, max_sequence_length=max_sequence_length,
        type_vocab_size=type_vocab_size, embedding_width=embedding_width, norm_first=norm_first,
        residual_attention=residual_attention, running_mean=running_mean,
        position_encoding=position_encoding, layer_norm_epsilon=layer_norm_epsilon,
        initializer_range=initializer_range, seq_length=seq_length,
        output_attention_probs=output_attention_probs)
    if hidden_size % num_heads:
      raise ValueError(f"hidden_size ({hidden_size}) must be a multiple of num_heads ({num_heads})")
    if position_encoding == SHIFT and seq_length is None:
      raise ValueError("position_encoding='shift' needs a static seq_length")
    relative = position_encoding != ABSOLUTE
    initializer = keras.initializers.TruncatedNormal(stddev=initializer_range)

    embeddings = EncoderEmbeddings(
        vocab_size, embedding_width or hidden_size, hidden_size,
        max_sequence_length=None if relative else max_sequence_length,
        type_vocab_size=0 if relative else type_vocab_size, dropout=dropout,
        layer_norm_epsilon=layer_norm_epsilon, initializer=initializer, dtype=policy, name="embeddings")
    blocks = [
        TransformerBlock(
            num_heads, hidden_size // num_heads, intermediate_size, activation=activation,
            dropout=dropout, attention_dropout=attention_dropout, norm_first=norm_first,
            layer_norm_epsilon=layer_norm_epsilon, position_encoding=position_encoding,
            use_segment_bias=relative, residual_attention=residual_attention,
            running_mean=running_mean, kernel_initializer=initializer, dtype=policy, name=f"layer_{i}")
        for i in range(num_layers)
    ]
    final_norm = keras.layers.LayerNormalization(
        epsilon=layer_norm_epsilon, dtype="float32", name="final_norm") if norm_first else None
    pooler = keras.layers.Dense(hidden_size, activation="tanh", kernel_initializer=initializer,
                                dtype=policy, name="pooler")

    inputs = encoder_inputs(seq_length)
    mask = inputs["input_mask"]
    hidden = embeddings(inputs["input_word_ids"], None if relative else inputs["input_type_ids"])
    block_kwargs = {}
    if relative:
      segments = ClsSegmentIds(dtype=policy, name="cls_segment_ids")
      block_kwargs["query_segment_ids"] = segments(inputs["input_type_ids"])
    if seq_length is not None and position_encoding == SHIFT:
      positions = list(range(seq_length))
      block_kwargs.update(query_positions=positions, key_positions=positions)
    carry, layer_outputs, attention_probs = None, [], []
    for index, block in enumerate(blocks):
      result = block(hidden, attention_mask=mask, attention_carry=carry, layer_index=index, **block_kwargs)
      hidden = result.output
      carry = result.carry if residual_attention else None
      attention_probs.append(result.probs)
      layer_outputs.append(hidden)
    if final_norm is not None:   # encoder_outputs keep the blocks' raw outputs
      hidden = _cast_like(final_norm(hidden), hidden)
    outputs = dict(sequence_output=hidden, pooled_output=pooler(hidden[:, 0]), encoder_outputs=layer_outputs)
    if output_attention_probs:
      outputs["attention_probs"] = attention_probs
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)
    self.dtype_policy = policy   # a functional model takes no dtype: its layers' policy
    self._config = config
    self._embeddings = embeddings


@keras.saving.register_keras_serializable(package="zoo")
class FunnelEncoder(EncoderModel):
  """Funnel-Transformer: blocks of relative-attention layers with pooling in between.

  `zoo.models.FunnelEncoder` for Keras 3; see its docstring for the arguments (blocks
  and repeats, pooling type and semantics, pool-query-only, `separate_cls`,
  `truncate_seq`, the decoder, residual attention across blocks).
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
               dtype=None,
               **kwargs):
    policy = dtype_policy(dtype)
    block_sizes = tuple(block_sizes)
    block_repeats = tuple(block_repeats) if block_repeats else (1,) * len(block_sizes)
    config = dict(
        vocab_size=vocab_size, hidden_size=hidden_size, block_sizes=block_sizes,
        block_repeats=block_repeats, num_heads=num_heads, head_size=head_size,
        intermediate_size=intermediate_size, activation=activation, dropout=dropout,
        attention_dropout=attention_dropout, activation_dropout=activation_dropout,
        embedding_width=embedding_width, pooling_type=pooling_type, pooling_semantics=pooling_semantics,
        pool_q_only=pool_q_only, separate_cls=separate_cls, truncate_seq=truncate_seq,
        position_encoding=position_encoding, use_segment_bias=use_segment_bias,
        num_decoder_layers=num_decoder_layers, decoder_residual_layer=decoder_residual_layer,
        residual_attention=residual_attention, running_mean=running_mean,
        carry_at_pooling=carry_at_pooling, layer_norm_epsilon=layer_norm_epsilon,
        initializer_range=initializer_range, seq_length=seq_length,
        output_attention_probs=output_attention_probs)
    check_funnel_config(config)
    head_size = head_size or hidden_size // num_heads
    initializer = keras.initializers.TruncatedNormal(stddev=initializer_range)
    if decoder_residual_layer is None:
      decoder_residual_layer = block_sizes[0] * block_repeats[0] - 1

    def transformer_block(name, residual):
      return TransformerBlock(
          num_heads, head_size, intermediate_size, activation=activation, dropout=dropout,
          attention_dropout=attention_dropout, activation_dropout=activation_dropout,
          layer_norm_epsilon=layer_norm_epsilon, position_encoding=position_encoding,
          use_segment_bias=use_segment_bias, separate_cls=separate_cls,
          residual_attention=residual, running_mean=running_mean and residual,
          kernel_initializer=initializer, dtype=policy, name=name)

    embeddings = EncoderEmbeddings(
        vocab_size, embedding_width or hidden_size, hidden_size, dropout=dropout,
        layer_norm_epsilon=layer_norm_epsilon, initializer=initializer, dtype=policy, name="embeddings")
    blocks = [[transformer_block(f"block_{b}_layer_{i}", residual_attention) for i in range(size)]
              for b, size in enumerate(block_sizes)]
    pooling = FunnelPooling(pooling_type, separate_cls, truncate_seq, semantics=pooling_semantics,
                            dtype=policy, name="pooling")
    decoder = [transformer_block(f"decoder_layer_{i}", False) for i in range(num_decoder_layers)]
    pooler = keras.layers.Dense(hidden_size, activation="tanh", kernel_initializer=initializer,
                                dtype=policy, name="pooler")

    inputs = encoder_inputs(seq_length)
    full_mask = mask = inputs["input_mask"]
    segments = None
    if use_segment_bias:
      segments = ClsSegmentIds(dtype=policy, name="cls_segment_ids")(inputs["input_type_ids"])
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
                                   dtype=policy, name="upsampling")(encoder_output, target_length=seq_length)
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
    self.dtype_policy = policy   # a functional model takes no dtype: its layers' policy
    self._config = config
    self._embeddings = embeddings


def check_funnel_config(config):
  """The `FunnelEncoder` argument checks (the same as the tf_keras encoder's)."""
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

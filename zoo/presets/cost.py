"""Parameter and FLOP counts of an encoder configuration, from its config alone.

FLOPs count the multiply-adds of matmuls and einsums (2 FLOPs each) of one forward
pass of one sequence; the factorized relative attention is counted as implemented
(one contraction over the model width per head).
"""

from collections.abc import Mapping
from typing import Any

import numpy as np

from zoo.grids import block_lengths
from zoo.windows import local_geometry


def _head_width(config: Mapping[str, Any]) -> int:
  heads = config["num_heads"]
  return heads * (config.get("head_size") or config["hidden_size"] // heads)


def _layer_parts(config: Mapping[str, Any], relative: bool) -> tuple[int, int, int]:
  """`(attention, feed-forward, layer norms)` parameters of one layer."""
  width, inner, heads_width = config["hidden_size"], config["intermediate_size"], _head_width(config)
  attention = 4 * width * heads_width + 3 * heads_width + width
  if relative:   # content, position and segment biases, W_r, segment embedding
    attention += 3 * heads_width + width * heads_width + 2 * heads_width
  feed_forward = 2 * width * inner + inner + width
  return attention, feed_forward, 4 * width   # two layer norms


def _stack_parameters(config: Mapping[str, Any], layers: int, relative: bool) -> int:
  """Parameters of `layers` encoder layers under the config's `layer_sharing` (ALBERT's Sec. 3.1)."""
  attention, feed_forward, norms = _layer_parts(config, relative)
  sharing = config.get("layer_sharing", "none")
  if sharing == "all":
    return attention + feed_forward + norms
  if sharing == "attention":
    return attention + layers * (feed_forward + norms)
  if sharing == "ffn":
    return feed_forward + layers * (attention + norms)
  return layers * (attention + feed_forward + norms)


def _embedding_parameters(config: Mapping[str, Any], absolute: bool) -> int:
  width = config["hidden_size"]
  embedding = config.get("embedding_width") or width
  count = config["vocab_size"] * embedding + 2 * embedding
  if absolute:
    count += (config.get("max_sequence_length", 512) + config.get("type_vocab_size", 2)) * embedding
  if embedding != width:
    count += embedding * width + width
  return count


def parameter_count(family: str, config: Mapping[str, Any]) -> int:
  """Trainable parameters of the encoder, pooler included."""
  width = config["hidden_size"]
  pooler = width * width + width
  if family == "transformer":
    absolute = config.get("position_encoding", "absolute") == "absolute"
    layers = _stack_parameters(config, config["num_layers"], relative=not absolute)
    final_norm = 2 * width if config.get("norm_first") else 0
    return _embedding_parameters(config, absolute) + layers + final_norm + pooler
  encoder = _stack_parameters(config, sum(config["block_sizes"]), relative=True)
  decoder = config.get("num_decoder_layers", 0) * sum(_layer_parts(config, relative=True))
  return _embedding_parameters(config, absolute=False) + encoder + decoder + pooler


def scored_pairs(config: Mapping[str, Any], queries: int, keys: int) -> int:
  """The (query, key) pairs one attention layer scores: `queries · keys`, or with local attention
  (`attention_window`) the blocks' windows and global keys plus the global rows (`zoo.windows`)."""
  window = config.get("attention_window")
  if window is None:
    return queries * keys
  ratio = 2 if keys > queries + 1 else 1   # a pool-query-only layer: queries at twice the keys' spacing
  geometry = local_geometry(window, config.get("global_tokens", 1), np.arange(queries) * ratio,
                            np.arange(keys))
  return (geometry.num_blocks * geometry.query_block * (geometry.global_tokens + 3 * geometry.key_block)
          + geometry.global_tokens * keys)


def _layer_flops(config: Mapping[str, Any], queries: int, keys: int, relative: bool) -> int:
  width, inner, heads_width = config["hidden_size"], config["intermediate_size"], _head_width(config)
  heads = config["num_heads"]
  pairs = scored_pairs(config, queries, keys)
  flops = 2 * queries * width * heads_width * 2        # query and output projections
  flops += 2 * keys * width * heads_width * 2          # key and value projections
  flops += 2 * pairs * heads_width * 2                 # scores and context
  flops += 2 * queries * width * inner * 2             # feed-forward
  if relative:
    flops += 2 * queries * heads_width * width         # q̃ = (q̂ + u) W_rᵀ
    flops += 2 * heads * pairs * width                 # q̃ against the sinusoids
  return flops


def flops(family: str, config: Mapping[str, Any], seq_length: int) -> int:
  """Forward FLOPs of one sequence of `seq_length` tokens (no embeddings, no heads)."""
  if family == "transformer":
    relative = config.get("position_encoding", "absolute") != "absolute"
    return config["num_layers"] * _layer_flops(config, seq_length, seq_length, relative)
  separate_cls = config.get("separate_cls", True)
  lengths = block_lengths(seq_length, len(config["block_sizes"]), separate_cls,
                          config.get("truncate_seq", True))
  repeats = config.get("block_repeats") or (1,) * len(lengths)
  total = 0
  for block, (size, repeat) in enumerate(zip(config["block_sizes"], repeats, strict=True)):
    for application in range(size * repeat):
      pooled_start = block > 0 and application == 0
      keys = lengths[block - 1] if pooled_start and config.get("pool_q_only", True) else lengths[block]
      total += _layer_flops(config, lengths[block], keys, relative=True)
  total += config.get("num_decoder_layers", 0) * _layer_flops(config, seq_length, seq_length, True)
  return total

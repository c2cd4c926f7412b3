"""Multi-head attention with an optional residual-attention carry (RealFormer).

Axes: B batch, T query length, S key length, N heads, H head width, D model width.

Residual attention (RealFormer, Sec. 3): with `S_l` the full pre-softmax score of
layer `l` (scaled, before any mask), the layer computes

    C_l      = S_l + C_{l-1}                     (C_{-1} = 0)
    logits_l = C_l / (l + 1) if running_mean else C_l
    probs_l  = softmax(logits_l + mask_bias)

and passes `C_l` up undivided, unmasked and in float32. Gradients flow through it.

Every attention layer and `TransformerBlock` returns an `AttentionResult`, the same
three named fields whatever the flags.
"""

import math
import warnings
from typing import Any
from typing import TypeAlias

import numpy as np
import tensorflow as tf
import tf_keras as keras
from official.modeling.tf_utils import clone_initializer

from zoo.choices import FACTORIZED
from zoo.configs.encoder import check_local_attention
from zoo.graphs.kit import AttentionResult
from zoo.grids import static_vector
from zoo.layers import seeds
from zoo.layers.base import ZooLayer
from zoo.windows import LocalGeometry
from zoo.windows import local_geometry

# Added to the float32 logits of masked positions. Softmax runs in float32, so a
# fully masked row becomes a uniform distribution, never NaN or Inf.
MASK_BIAS = -1e9
# Attention dropout draws 16 random bits per probability (two per 32-bit draw).
DROPOUT_LEVELS = 2**16
# A residual-attention carry: float32 `[B, N, T, S]`, or with local attention the pair of the global
# rows and the blocks.
Carry: TypeAlias = tf.Tensor | tuple[tf.Tensor, tf.Tensor]


def attention_mask_bias(attention_mask: tf.Tensor) -> tf.Tensor:
  """`[B, S]` or `[B, T, S]` mask (1 = attend) -> float32 bias `[B, 1, 1|T, S]`."""
  mask = tf.cast(attention_mask, tf.float32)
  if mask.shape.rank == 2:
    mask = mask[:, None, None, :]
  elif mask.shape.rank == 3:
    mask = mask[:, None, :, :]
  else:
    raise ValueError(
        f"attention_mask must be [batch, keys] or [batch, queries, keys], got rank {mask.shape.rank}")
  return (1.0 - mask) * MASK_BIAS


def drop_attention_probs(probs: tf.Tensor, rate: float) -> tf.Tensor:
  """Inverted dropout of attention probabilities with 16 random bits per entry.

  Keeps each entry with probability `1 - k / 65536`, `k = round(rate · 65536)`, and
  scales kept entries by the inverse of that, so the expectation is unchanged (the
  drop rate differs from `rate` by less than 1e-5). Random bits are the costly part
  of dropout on a `[B, N, T, S]` tensor; one 32-bit draw serves two entries, which
  takes about 40% less time than Keras' float dropout on a CPU (forward and backward),
  and the mask kept for the backward pass is boolean. The seed is `zoo.layers.seeds.next_seed()`: a
  function of the train step's seed inside `step_seeds`, else a fresh one.
  """
  threshold = round(rate * DROPOUT_LEVELS)
  if threshold == 0:
    return probs
  size = tf.size(probs)
  seed = seeds.next_seed()
  words = tf.random.stateless_uniform(
      [(size + 1) // 2], seed=seed, minval=None, maxval=None, dtype=tf.uint32)
  draws = tf.reshape(tf.bitcast(words, tf.uint16), [-1])[:size]     # 16-bit uniform draws
  keep = tf.reshape(draws >= tf.constant(threshold, tf.uint16), tf.shape(probs))
  scale = tf.cast(DROPOUT_LEVELS / (DROPOUT_LEVELS - threshold), probs.dtype)
  return tf.where(keep, probs * scale, tf.zeros_like(probs))


@keras.utils.register_keras_serializable(package="zoo")
class MultiHeadAttention(ZooLayer):
  """Scaled dot-product multi-head attention with optional residual attention.

  Computes `softmax(q̂·k + mask_bias) v` per head with `q̂ = q / sqrt(head_size)`, then
  projects the heads back to the query width. With `residual_attention=True` it
  implements RealFormer's residual attention (Liu et al., 2021, Sec. 3; see the module
  docstring): it takes the previous layer's carry and returns the new one.

  Args:
    num_heads: number of heads `N`.
    head_size: width `H` of each head.
    attention_dropout: dropout rate on the attention probabilities (applied by
      `drop_attention_probs`). Configs saved before this argument was renamed call it
      `dropout`; that name is still read, with a warning.
    residual_attention: take and return the float32 carry of raw scores.
    running_mean: divide the carry by `layer_index + 1` before the softmax (the
      paper's choice for models deeper than 24 layers). Needs `residual_attention`.
    kernel_initializer: initializer of the projection kernels.
    attention_window: None for full attention, or W: block-local attention, each query attending
      to the keys within W positions (in the keys' spacing) and to the global tokens, computed by
      blocks with no `[T, S]` tensor (`zoo.windows`, DESIGN.md Section 9). Needs static lengths
      (and, in the relative layer, static evenly spaced positions) and a `[B, S]` mask.
    global_tokens: with `attention_window`, the leading queries and keys (>= 1: [cls]) that
      attend to and are attended by every position.

  Call arguments:
    query: `[B, T, D]`.
    value: `[B, S, D]` keys and values; defaults to `query` (self-attention).
    attention_mask: `[B, S]` or `[B, T, S]`, 1 where a query may attend to a key. The
      mask is applied after the running-mean division, to the softmax input only.
    attention_carry: float32 `[B, N, T, S]`, the `carry` of the layer below, or None
      for the first layer. Needs `residual_attention`.
    layer_index: 0-based depth of this layer in the residual stack, i.e. the number
      of score maps summed in `attention_carry` (used only with `running_mean`).

  Returns:
    An `AttentionResult`: `output [B, T, D]`, `carry` and `probs` (float32
    `[B, N, T, S]`), whatever the flags. With `attention_window`, `carry` and `probs` are
    pairs: the global queries' rows `[B, N, G, S]` and the blocks `[B, K, N, query_block,
    G + 3·key_block]`; `zoo.windows.LocalGeometry.dense_probs` spreads them to `[B, N, T, S]`.

  Example:
    >>> x = tf.random.normal([2, 8, 32])
    >>> layer = MultiHeadAttention(num_heads=4, head_size=8, residual_attention=True)
    >>> first = layer(x)
    >>> second = layer(first.output, attention_carry=first.carry, layer_index=1)
    >>> second.output.shape, second.carry.shape
    (TensorShape([2, 8, 32]), TensorShape([2, 4, 8, 8]))
  """

  def __init__(self,
               num_heads,
               head_size,
               attention_dropout=0.0,
               residual_attention=False,
               running_mean=False,
               kernel_initializer="glorot_uniform",
               attention_window=None,
               global_tokens=1,
               **kwargs):
    if "dropout" in kwargs:   # the argument's name in configs saved before it was renamed
      if attention_dropout:
        raise TypeError(f"{type(self).__name__} got dropout and attention_dropout; "
                        "pass attention_dropout only")
      warnings.warn(f"{type(self).__name__}(dropout=...) is deprecated: the attention-probability "
                    "dropout rate is attention_dropout (re-save the model to update its config)",
                    FutureWarning, stacklevel=2)
      attention_dropout = kwargs.pop("dropout")
    super().__init__(**kwargs)
    if running_mean and not residual_attention:
      raise ValueError("running_mean=True needs residual_attention=True")
    self.num_heads = num_heads
    self.head_size = head_size
    self.attention_dropout = attention_dropout
    self.residual_attention = residual_attention
    self.running_mean = running_mean
    self.kernel_initializer = keras.initializers.get(kernel_initializer)
    check_local_attention(attention_window, global_tokens)
    self.attention_window = attention_window
    self.global_tokens = global_tokens

  def _check_carry(self, attention_carry):
    if attention_carry is not None and not self.residual_attention:
      raise ValueError(f"{self.name}: attention_carry needs residual_attention=True")

  def _local_geometry(self, query_positions, key_positions, query_length, key_length):
    """The `zoo.windows.LocalGeometry` of a call with local attention (static lengths and positions)."""
    if query_length is None or key_length is None:
      raise ValueError(f"{self.name}: local attention (attention_window) needs static sequence lengths")
    grids = []
    for positions, length, name in ((query_positions, query_length, "query_positions"),
                                    (key_positions, key_length, "key_positions")):
      values = self._static_positions(positions, length, name)
      if values is None:
        raise ValueError(f"{self.name}: local attention (attention_window) needs {name} known when the "
                         "graph is built (a Python list, NumPy array or constant)")
      grids.append(values)
    return local_geometry(self.attention_window, self.global_tokens, *grids)

  @staticmethod
  def _static_positions(positions: Any, length: int, name: str) -> np.ndarray | None:
    """Known positions as a float64 vector (None: the default grid `0 .. length - 1`)."""
    if positions is None:
      return np.arange(length, dtype=np.float64)
    return static_vector(positions, length, name)

  def get_config(self):
    config = super().get_config()
    config.update(
        num_heads=self.num_heads,
        head_size=self.head_size,
        attention_dropout=self.attention_dropout,
        residual_attention=self.residual_attention,
        running_mean=self.running_mean,
        kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
        attention_window=self.attention_window,
        global_tokens=self.global_tokens,
    )
    return config

  def build(self, input_shape):
    width = input_shape[-1]
    heads = (self.num_heads, self.head_size)
    # Each kernel gets its own initializer instance, so no two start out equal.
    def projection(equation, output_shape, bias_axes, name):
      return keras.layers.EinsumDense(
          equation, output_shape=output_shape, bias_axes=bias_axes,
          kernel_initializer=clone_initializer(self.kernel_initializer), name=name)

    self.query_dense = projection("BTD,DNH->BTNH", (None, *heads), "NH", "query")
    self.key_dense = projection("BSD,DNH->BSNH", (None, *heads), "NH", "key")
    self.value_dense = projection("BSD,DNH->BSNH", (None, *heads), "NH", "value")
    self.output_dense = projection("BTNH,NHD->BTD", (None, width), "D", "attention_output")
    super().build(input_shape)

  def call(self,
           query: tf.Tensor,
           value: tf.Tensor | None = None,
           attention_mask: tf.Tensor | None = None,
           attention_carry: Carry | None = None,
           layer_index: int = 0,
           training: bool | None = None) -> AttentionResult:
    if self.attention_window is not None:
      return self._attend_local(query, value, attention_mask, attention_carry, layer_index, training)
    return self._attend(query, value, self._content_scores, attention_mask,
                        attention_carry, layer_index, training)

  def _pair_scores(self, query_heads, key_heads, query_positions, key_positions, query_segment_ids,
                   key_segment_ids, form, separate_cls):
    """The scaled scores `[B, N, T, S]` of queries and keys at the given positions (local attention's
    parts); absolute attention has no position or segment term."""
    del query_positions, key_positions, query_segment_ids, key_segment_ids, form, separate_cls
    return self._content_scores(query_heads, key_heads)

  def _content_scores(self, query_heads, key_heads):
    """`[B, T, N, H]`, `[B, S, N, H]` -> scaled scores `[B, N, T, S]`."""
    return tf.einsum("BTNH,BSNH->BNTS", query_heads * self._scale(), key_heads)

  def _scale(self):
    return tf.cast(1.0 / math.sqrt(self.head_size), self.compute_dtype)

  def _attend(self, query, value, scores_fn, attention_mask, attention_carry, layer_index, training):
    """Shared attention body; `scores_fn(query_heads, key_heads)` gives `S_l`."""
    self._check_carry(attention_carry)
    value = query if value is None else value
    query_heads = self.query_dense(query)   # [B, T, N, H]
    key_heads = self.key_dense(value)       # [B, S, N, H]
    value_heads = self.value_dense(value)   # [B, S, N, H]

    # The score, the carry and the softmax stay float32.
    scores = tf.cast(scores_fn(query_heads, key_heads), tf.float32)   # [B, N, T, S]
    if attention_carry is not None:
      scores += tf.cast(attention_carry, tf.float32)
    carry = scores
    logits = scores / float(layer_index + 1) if self.running_mean else scores
    if attention_mask is not None:
      logits += attention_mask_bias(attention_mask)
    probs = tf.nn.softmax(logits, axis=-1)
    dropped = keras.backend.in_train_phase(
        lambda: drop_attention_probs(probs, self.attention_dropout), probs, training=training)

    context = tf.einsum("BNTS,BSNH->BTNH", tf.cast(dropped, self.compute_dtype), value_heads)
    output = self.output_dense(context)     # [B, T, D]
    return AttentionResult(output=output, carry=carry, probs=probs)

  def _attend_local(self, query, value, attention_mask, attention_carry, layer_index, training,
                    query_positions=None, key_positions=None, query_segment_ids=None, key_segment_ids=None):
    """Block-local attention with global tokens (`zoo.windows`): the same outputs as `_attend` under
    the pattern's mask, without a `[T, S]` tensor. The carry and the probabilities are pairs:
    the global queries' rows `[B, N, G, S]` and the blocks `[B, K, N, query_block, G + 3·key_block]`
    (each query's global keys, then its window)."""
    self._check_carry(attention_carry)
    value = query if value is None else value
    geometry = self._local_geometry(query_positions, key_positions, query.shape[1], value.shape[1])
    g, length = geometry.global_tokens, geometry.query_length
    query_heads = self.query_dense(query)   # [B, T, N, H]
    key_heads = self.key_dense(value)       # [B, S, N, H]
    value_heads = self.value_dense(value)   # [B, S, N, H]
    key_segment_ids = query_segment_ids if key_segment_ids is None else key_segment_ids
    if query_segment_ids is not None:
      query_segment_ids, key_segment_ids = (tf.convert_to_tensor(ids)
                                            for ids in (query_segment_ids, key_segment_ids))
    rows, scores = self._local_scores(query_heads, key_heads, geometry, query_segment_ids, key_segment_ids)
    scores = tf.cast(scores, tf.float32)
    windows = lambda x: local_windows(x, geometry)   # noqa: E731  [B, S, ...] -> [B, K, 3bk, ...]
    rows = tf.cast(rows, tf.float32)
    if attention_carry is not None:
      rows += tf.cast(attention_carry[0], tf.float32)
      scores += tf.cast(attention_carry[1], tf.float32)
    carry = (rows, scores)
    if self.running_mean:
      rows, scores = rows / float(layer_index + 1), scores / float(layer_index + 1)

    if attention_mask is None:
      key_mask = tf.ones(tf.shape(value)[:2], tf.float32)
    elif len(attention_mask.shape) != 2:
      raise ValueError(f"{self.name}: local attention takes a [batch, keys] padding mask, got rank "
                       f"{len(attention_mask.shape)}")
    else:
      key_mask = tf.cast(attention_mask, tf.float32)
    allowed = tf.cast(tf.constant(geometry.local_allowed[:, None]), tf.float32)   # bool: 1 B a pair
    window_mask = windows(key_mask)[:, :, None, None, :] * allowed
    global_mask = key_mask[:, None, None, None, :g] * tf.ones_like(window_mask[..., :1])
    rows_probs = tf.nn.softmax(rows + (1.0 - key_mask[:, None, None, :]) * MASK_BIAS, axis=-1)
    probs = tf.nn.softmax(scores + (1.0 - tf.concat([global_mask, window_mask], -1)) * MASK_BIAS, axis=-1)
    drop = lambda p: keras.backend.in_train_phase(                                  # noqa: E731
        lambda: drop_attention_probs(p, self.attention_dropout), p, training=training)
    dropped_rows, dropped = (tf.cast(drop(p), self.compute_dtype) for p in (rows_probs, probs))

    # The global values beside each block's window (small), so the probabilities are read whole.
    global_values = tf.tile(value_heads[:, None, :g], [1, geometry.num_blocks, 1, 1, 1])
    context = tf.einsum("BKNQS,BKSNH->BKQNH", dropped, tf.concat([global_values, windows(value_heads)], 2))
    context = tf.reshape(context, [-1, geometry.num_blocks * geometry.query_block, *context.shape[3:]])
    context = tf.concat([tf.einsum("BNGS,BSNH->BGNH", dropped_rows, value_heads), context[:, g:length]], 1)
    return AttentionResult(output=self.output_dense(context), carry=carry, probs=(rows_probs, probs))

  def _local_scores(self, query_heads, key_heads, geometry, query_segment_ids, key_segment_ids):
    """`(rows [B, N, G, S], blocks [B, K, N, query_block, G + 3·key_block])`: the scaled scores of the
    global queries against every key, and of each block's queries against the global keys and their
    window. Absolute attention: the content term alone, in one product per part (the global keys
    placed beside each block's window keys, so no score-sized tensor is copied)."""
    del query_segment_ids, key_segment_ids
    g = geometry.global_tokens
    global_keys = tf.tile(key_heads[:, None, :g], [1, geometry.num_blocks, 1, 1, 1])
    keys = tf.concat([global_keys, local_windows(key_heads, geometry)], 2)   # [B, K, G + 3bk, N, H]
    return (self._content_scores(query_heads[:, :g], key_heads),
            tf.einsum("BKQNH,BKSNH->BKNQS", local_blocks(query_heads, geometry) * self._scale(), keys))

  def _local_scores_by_parts(self, query_heads, key_heads, geometry, query_segment_ids, key_segment_ids):
    """`_local_scores` from `_pair_scores` of three parts (relative attention: each part has its own
    positions): the global rows, the global columns and the windows."""
    g = geometry.global_tokens
    blocks = lambda x: local_blocks(x, geometry)     # noqa: E731  [B, T, ...] -> [B, K, bq, ...]
    windows = lambda x: local_windows(x, geometry)   # noqa: E731  [B, S, ...] -> [B, K, 3bk, ...]
    fold = lambda x: None if x is None else tf.reshape(x, [-1, *x.shape[2:]])   # noqa: E731
    head = lambda x, stop: None if x is None else x[:, :stop]                   # noqa: E731
    q_pos, k_pos = geometry.query_positions, geometry.key_positions

    # The global parts in the factorized form (the shift form's table would span T distances).
    rows = self._pair_scores(query_heads[:, :g], key_heads, q_pos[:g], k_pos, head(query_segment_ids, g),
                             key_segment_ids, FACTORIZED, self.separate_cls)   # [B, N, G, S]
    columns = self._pair_scores(query_heads, key_heads[:, :g], q_pos, k_pos[:g], query_segment_ids,
                                head(key_segment_ids, g), FACTORIZED, self.separate_cls)   # [B, N, T, G]
    local = self._pair_scores(
        fold(blocks(query_heads)), fold(windows(key_heads)), geometry.local_query_positions,
        geometry.local_key_positions, fold(None if query_segment_ids is None else blocks(query_segment_ids)),
        fold(None if key_segment_ids is None else windows(key_segment_ids)),
        self.position_encoding, False)                                                   # [BK, N, bq, 3bk]
    local = tf.reshape(local, [-1, geometry.num_blocks, *local.shape[1:]])
    columns = tf.transpose(blocks(tf.transpose(columns, [0, 2, 1, 3])), [0, 1, 3, 2, 4])   # [B, K, N, bq, G]
    return rows, tf.concat([columns, local], -1)


def local_blocks(x: tf.Tensor, geometry: LocalGeometry) -> tf.Tensor:
  """`[B, T, ...] -> [B, K, query_block, ...]`, padded with zeros after the last query."""
  pad = geometry.num_blocks * geometry.query_block - geometry.query_length
  x = tf.pad(x, [[0, 0], [0, pad]] + [[0, 0]] * (x.shape.rank - 2))
  return tf.reshape(x, [-1, geometry.num_blocks, geometry.query_block, *x.shape[2:]])


def local_windows(x: tf.Tensor, geometry: LocalGeometry) -> tf.Tensor:
  """`[B, S, ...] -> [B, K, 3·key_block, ...]`: block k's window is key blocks k - 1, k, k + 1 of the key
  sequence behind `geometry.lead` pad keys (zeros), so pad keys read as padding."""
  total = (geometry.num_blocks + 2) * geometry.key_block
  lead = geometry.lead
  if lead < 0:   # keys before the first window: dropped
    x, lead = x[:, min(-lead, x.shape[1]):], 0
  lead = min(lead, total)
  kept = max(0, min(x.shape[1], total - lead))   # keys after the last window: dropped
  x = tf.pad(x[:, :kept], [[0, 0], [lead, total - lead - kept]] + [[0, 0]] * (x.shape.rank - 2))
  blocks = tf.reshape(x, [-1, geometry.num_blocks + 2, geometry.key_block, *x.shape[2:]])
  return tf.concat([blocks[:, :-2], blocks[:, 1:-1], blocks[:, 2:]], axis=2)

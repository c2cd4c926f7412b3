"""Multi-head attention with the residual-attention carry (RealFormer), in Keras 3.

The Keras 3 twin of `zoo.layers.attention`: the same arguments, config fields and
`AttentionResult`, written with `keras.ops` only so it runs under the JAX, TensorFlow
and PyTorch backends. Axes: B batch, T query length, S key length, N heads, H head
width, D model width.

    C_l      = S_l + C_{l-1}                     (C_{-1} = 0)
    logits_l = C_l / (l + 1) if running_mean else C_l
    probs_l  = softmax(logits_l + mask_bias)

The score, the carry, the mask bias and the softmax are float32 under any dtype policy.
"""

import math
import warnings

import keras
import numpy as np
from keras import ops

from zoo.choices import ABSOLUTE
from zoo.choices import FACTORIZED
from zoo.configs.encoder import check_local_attention
from zoo.graphs.kit import AttentionResult
from zoo.grids import static_vector
from zoo.keras3.layers.base import ZooLayer
from zoo.keras3.layers.base import clone_initializer
from zoo.windows import local_geometry

# Added to the float32 logits of masked positions: a fully masked row becomes uniform.
MASK_BIAS = -1e9


def attention_mask_bias(attention_mask):
  """`[B, S]` or `[B, T, S]` mask (1 = attend) -> float32 bias `[B, 1, 1|T, S]`."""
  mask = ops.cast(attention_mask, "float32")
  rank = len(mask.shape)
  if rank == 2:
    mask = ops.expand_dims(ops.expand_dims(mask, 1), 1)
  elif rank == 3:
    mask = ops.expand_dims(mask, 1)
  else:
    raise ValueError(f"attention_mask must be [batch, keys] or [batch, queries, keys], got rank {rank}")
  return (1.0 - mask) * MASK_BIAS


class AttentionLayer(ZooLayer):
  """What the zoo's Keras 3 attention layers and blocks share: explicit input casting.

  Keras 3 casts every floating argument of a call to the compute dtype; these layers
  cast only their hidden states, so a float32 carry stays float32 under `mixed_bfloat16`.
  """

  def __init__(self, **kwargs):
    super().__init__(**kwargs)
    self._convert_input_args = False
    self._allow_non_tensor_positional_args = True

  def __call__(self, *args, **kwargs):
    # Hidden states given as numpy arrays become tensors here, so `build` sees their shapes.
    args = tuple(ops.convert_to_tensor(arg) if isinstance(arg, np.ndarray) else arg for arg in args)
    return super().__call__(*args, **kwargs)

  def _hidden(self, x):
    return ops.cast(ops.convert_to_tensor(x), self.compute_dtype)

  def _num_heads(self):
    return self.num_heads

  def compute_output_spec(self, query, value=None, *args, **kwargs):
    """The `AttentionResult` of shapes, without tracing `call`.

    Relative positions arrive as Python lists, which JAX's shape inference would trace;
    the shapes follow from the inputs alone: `output` like the queries, `carry` and
    `probs` float32 `[B, N, T, S]`, or with local attention the pairs of the global rows
    `[B, N, G, S]` and the blocks (`zoo.windows`).
    """
    del args
    value = query if value is None else value
    batch, length = query.shape[0], query.shape[1]
    output = keras.KerasTensor(query.shape, dtype=self.compute_dtype)
    if getattr(self, "attention_window", None) is not None:   # local attention: rows and blocks
      relative = getattr(self, "position_encoding", ABSOLUTE) != ABSOLUTE   # absolute: positions unused
      geometry = local_geometry(self.attention_window, self.global_tokens,
                               *(_grid(kwargs.get(name) if relative else None, size) for name, size in (
                                   ("query_positions", length), ("key_positions", value.shape[1]))))
      shapes = [(batch, self._num_heads(), geometry.global_tokens, value.shape[1]),
                (batch, geometry.num_blocks, self._num_heads(), geometry.query_block,
                 geometry.global_tokens + 3 * geometry.key_block)]
      scores = tuple(keras.KerasTensor(shape, dtype="float32") for shape in shapes)
      return AttentionResult(output=output, carry=scores, probs=tuple(
          keras.KerasTensor(shape, dtype="float32") for shape in shapes))
    scores = (batch, self._num_heads(), length, value.shape[1])
    return AttentionResult(output=output, carry=keras.KerasTensor(scores, dtype="float32"),
                           probs=keras.KerasTensor(scores, dtype="float32"))


def _grid(positions, length):
  return np.arange(length, dtype=np.float64) if positions is None else np.asarray(positions, np.float64)


@keras.saving.register_keras_serializable(package="zoo")
class MultiHeadAttention(AttentionLayer):
  """Scaled dot-product multi-head attention with optional residual attention.

  `zoo.layers.MultiHeadAttention` for Keras 3 (see its docstring): the same arguments,
  weights (`query`, `key`, `value`, `attention_output` EinsumDense kernels and biases)
  and `AttentionResult`. Attention dropout uses Keras' `keras.random.dropout`.

  Args:
    num_heads, head_size: heads `N` and their width `H`.
    attention_dropout: dropout rate of the attention probabilities.
    residual_attention: take and return the float32 carry of raw scores.
    running_mean: divide the carry by `layer_index + 1` before the softmax.
    kernel_initializer: initializer of the projection kernels.
    seed: seed of the attention dropout.

  Call arguments:
    query `[B, T, D]`, value `[B, S, D]` (default `query`), attention_mask `[B, S]` or
    `[B, T, S]`, attention_carry (float32 `[B, N, T, S]`), layer_index, training.
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
               seed=None,
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
    self.seed = seed
    self.seed_generator = keras.random.SeedGenerator(seed) if self.attention_dropout > 0 else None

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

  _static_positions = staticmethod(lambda positions, length, name: (
      np.arange(length, dtype=np.float64) if positions is None else static_vector(positions, length, name)))

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
        seed=self.seed,
    )
    return config

  def build(self, input_shape):
    width = input_shape[-1]
    heads = (self.num_heads, self.head_size)

    def projection(equation, output_shape, bias_axes, name, shape):
      dense = keras.layers.EinsumDense(
          equation, output_shape=output_shape, bias_axes=bias_axes,
          kernel_initializer=clone_initializer(self.kernel_initializer), dtype=self.dtype_policy, name=name)
      dense.build(shape)
      return dense

    self.query_dense = projection("BTD,DNH->BTNH", (None, *heads), "NH", "query", (None, None, width))
    self.key_dense = projection("BSD,DNH->BSNH", (None, *heads), "NH", "key", (None, None, width))
    self.value_dense = projection("BSD,DNH->BSNH", (None, *heads), "NH", "value", (None, None, width))
    self.output_dense = projection("BTNH,NHD->BTD", (None, width), "D", "attention_output",
                                   (None, None, *heads))
    self.built = True

  def call(self, query, value=None, attention_mask=None, attention_carry=None, layer_index=0,
           training=None):
    if self.attention_window is not None:
      return self._attend_local(query, value, attention_mask, attention_carry, layer_index, training)
    return self._attend(query, value, self._content_scores, attention_mask, attention_carry,
                        layer_index, training)

  def _pair_scores(self, query_heads, key_heads, query_positions, key_positions, query_segment_ids,
                   key_segment_ids, form, separate_cls):
    """The scaled scores `[B, N, T, S]` (local attention's parts): the content term only."""
    del query_positions, key_positions, query_segment_ids, key_segment_ids, form, separate_cls
    return self._content_scores(query_heads, key_heads)

  def _content_scores(self, query_heads, key_heads):
    """`[B, T, N, H]`, `[B, S, N, H]` -> scaled scores `[B, N, T, S]`."""
    return ops.einsum("BTNH,BSNH->BNTS", query_heads * self._scale(), key_heads)

  def _scale(self):
    return ops.cast(1.0 / math.sqrt(self.head_size), self.compute_dtype)

  def _attend(self, query, value, scores_fn, attention_mask, attention_carry, layer_index, training):
    """Shared attention body; `scores_fn(query_heads, key_heads)` gives `S_l`."""
    self._check_carry(attention_carry)
    query = self._hidden(query)
    value = query if value is None else self._hidden(value)
    query_heads = self.query_dense(query)   # [B, T, N, H]
    key_heads = self.key_dense(value)       # [B, S, N, H]
    value_heads = self.value_dense(value)   # [B, S, N, H]

    scores = ops.cast(scores_fn(query_heads, key_heads), "float32")   # [B, N, T, S]
    if attention_carry is not None:
      scores = scores + ops.cast(attention_carry, "float32")
    carry = scores
    logits = scores / float(layer_index + 1) if self.running_mean else scores
    if attention_mask is not None:
      logits = logits + attention_mask_bias(attention_mask)
    probs = ops.softmax(logits, axis=-1)
    dropped = probs
    if training and self.seed_generator is not None:
      dropped = keras.random.dropout(probs, self.attention_dropout, seed=self.seed_generator)

    context = ops.einsum("BNTS,BSNH->BTNH", ops.cast(dropped, self.compute_dtype), value_heads)
    output = self.output_dense(context)     # [B, T, D]
    return AttentionResult(output=output, carry=carry, probs=probs)

  def _attend_local(self, query, value, attention_mask, attention_carry, layer_index, training,
                    query_positions=None, key_positions=None, query_segment_ids=None, key_segment_ids=None):
    """Block-local attention with global tokens (`zoo.windows`; the tf_keras twin's docstring)."""
    self._check_carry(attention_carry)
    query = self._hidden(query)
    value = query if value is None else self._hidden(value)
    geometry = self._local_geometry(query_positions, key_positions, query.shape[1], value.shape[1])
    g, length = geometry.global_tokens, geometry.query_length
    query_heads = self.query_dense(query)   # [B, T, N, H]
    key_heads = self.key_dense(value)       # [B, S, N, H]
    value_heads = self.value_dense(value)   # [B, S, N, H]
    key_segment_ids = query_segment_ids if key_segment_ids is None else key_segment_ids
    if query_segment_ids is not None:
      query_segment_ids, key_segment_ids = (ops.convert_to_tensor(ids)
                                            for ids in (query_segment_ids, key_segment_ids))
    rows, scores = self._local_scores(query_heads, key_heads, geometry, query_segment_ids, key_segment_ids)
    scores = ops.cast(scores, "float32")
    windows = lambda x: local_windows(x, geometry)   # noqa: E731  [B, S, ...] -> [B, K, 3bk, ...]
    rows = ops.cast(rows, "float32")
    if attention_carry is not None:
      rows = rows + ops.cast(attention_carry[0], "float32")
      scores = scores + ops.cast(attention_carry[1], "float32")
    carry = (rows, scores)
    if self.running_mean:
      rows, scores = rows / float(layer_index + 1), scores / float(layer_index + 1)

    if attention_mask is None:
      key_mask = ops.ones(ops.shape(value)[:2], "float32")
    elif len(attention_mask.shape) != 2:
      raise ValueError(f"{self.name}: local attention takes a [batch, keys] padding mask, got rank "
                       f"{len(attention_mask.shape)}")
    else:
      key_mask = ops.cast(attention_mask, "float32")
    window_mask = (ops.expand_dims(ops.expand_dims(windows(key_mask), 2), 2)
                   * ops.cast(ops.convert_to_tensor(geometry.local_allowed[:, None]), "float32"))
    global_mask = ops.reshape(key_mask[:, :g], (-1, 1, 1, 1, g)) * ops.ones_like(window_mask[..., :1])
    rows_bias = (1.0 - ops.reshape(key_mask, (-1, 1, 1, key_mask.shape[1]))) * MASK_BIAS
    rows_probs = ops.softmax(rows + rows_bias, axis=-1)
    probs = ops.softmax(scores + (1.0 - ops.concatenate([global_mask, window_mask], -1)) * MASK_BIAS, axis=-1)
    dropped_rows, dropped = rows_probs, probs
    if training and self.seed_generator is not None:
      dropped_rows = keras.random.dropout(rows_probs, self.attention_dropout, seed=self.seed_generator)
      dropped = keras.random.dropout(probs, self.attention_dropout, seed=self.seed_generator)
    dropped_rows, dropped = ops.cast(dropped_rows, self.compute_dtype), ops.cast(dropped, self.compute_dtype)

    # The global values beside each block's window (small), so the probabilities are read whole.
    global_values = ops.tile(ops.expand_dims(value_heads[:, :g], 1), (1, geometry.num_blocks, 1, 1, 1))
    context = ops.einsum("BKNQS,BKSNH->BKQNH", dropped,
                         ops.concatenate([global_values, windows(value_heads)], 2))
    context = ops.reshape(context, (-1, geometry.num_blocks * geometry.query_block, *context.shape[3:]))
    rows_context = ops.einsum("BNGS,BSNH->BGNH", dropped_rows, value_heads)
    context = ops.concatenate([rows_context, context[:, g:length]], 1)
    return AttentionResult(output=self.output_dense(context), carry=carry, probs=(rows_probs, probs))

  def _local_scores(self, query_heads, key_heads, geometry, query_segment_ids, key_segment_ids):
    """`(rows [B, N, G, S], blocks [B, K, N, query_block, G + 3·key_block])`: the scaled scores of the
    global queries against every key, and of each block's queries against the global keys and their
    window. Absolute attention: the content term alone, in one product per part (the global keys
    placed beside each block's window keys, so no score-sized tensor is copied)."""
    del query_segment_ids, key_segment_ids
    g = geometry.global_tokens
    global_keys = ops.tile(ops.expand_dims(key_heads[:, :g], 1), (1, geometry.num_blocks, 1, 1, 1))
    keys = ops.concatenate([global_keys, local_windows(key_heads, geometry)], 2)   # [B, K, G + 3bk, N, H]
    return (self._content_scores(query_heads[:, :g], key_heads),
            ops.einsum("BKQNH,BKSNH->BKNQS", local_blocks(query_heads, geometry) * self._scale(), keys))

  def _local_scores_by_parts(self, query_heads, key_heads, geometry, query_segment_ids, key_segment_ids):
    """`_local_scores` from `_pair_scores` of three parts (relative attention: each part has its own
    positions): the global rows, the global columns and the windows."""
    g = geometry.global_tokens
    blocks = lambda x: local_blocks(x, geometry)     # noqa: E731  [B, T, ...] -> [B, K, bq, ...]
    windows = lambda x: local_windows(x, geometry)   # noqa: E731  [B, S, ...] -> [B, K, 3bk, ...]
    fold = lambda x: None if x is None else ops.reshape(x, (-1, *x.shape[2:]))   # noqa: E731
    head = lambda x, stop: None if x is None else x[:, :stop]   # noqa: E731
    q_pos, k_pos = geometry.query_positions, geometry.key_positions
    separate_cls = self.separate_cls

    # The global parts in the factorized form (the shift form's table would span T distances).
    rows = self._pair_scores(query_heads[:, :g], key_heads, q_pos[:g], k_pos, head(query_segment_ids, g),
                             key_segment_ids, FACTORIZED, separate_cls)                        # [B, N, G, S]
    columns = self._pair_scores(query_heads, key_heads[:, :g], q_pos, k_pos[:g], query_segment_ids,
                                head(key_segment_ids, g), FACTORIZED, separate_cls)            # [B, N, T, G]
    local = self._pair_scores(
        fold(blocks(query_heads)), fold(windows(key_heads)), geometry.local_query_positions,
        geometry.local_key_positions, fold(None if query_segment_ids is None else blocks(query_segment_ids)),
        fold(None if key_segment_ids is None else windows(key_segment_ids)),
        self.position_encoding, False)                                                   # [BK, N, bq, 3bk]
    local = ops.reshape(local, (-1, geometry.num_blocks, *local.shape[1:]))
    columns = ops.transpose(blocks(ops.transpose(columns, (0, 2, 1, 3))), (0, 1, 3, 2, 4))  # [B, K, N, bq, G]
    return rows, ops.concatenate([columns, local], -1)


def local_blocks(x, geometry):
  """`[B, T, ...] -> [B, K, query_block, ...]`, padded with zeros after the last query."""
  pad = geometry.num_blocks * geometry.query_block - geometry.query_length
  x = ops.pad(x, [[0, 0], [0, pad]] + [[0, 0]] * (len(x.shape) - 2))
  return ops.reshape(x, (-1, geometry.num_blocks, geometry.query_block, *x.shape[2:]))


def local_windows(x, geometry):
  """`[B, S, ...] -> [B, K, 3·key_block, ...]`: key blocks k - 1, k, k + 1 behind `geometry.lead` pad keys."""
  total = (geometry.num_blocks + 2) * geometry.key_block
  lead = geometry.lead
  if lead < 0:   # keys before the first window: dropped
    x, lead = x[:, min(-lead, x.shape[1]):], 0
  lead = min(lead, total)
  kept = max(0, min(x.shape[1], total - lead))   # keys after the last window: dropped
  x = ops.pad(x[:, :kept], [[0, 0], [lead, total - lead - kept]] + [[0, 0]] * (len(x.shape) - 2))
  blocks = ops.reshape(x, (-1, geometry.num_blocks + 2, geometry.key_block, *x.shape[2:]))
  return ops.concatenate([blocks[:, :-2], blocks[:, 1:-1], blocks[:, 2:]], axis=2)

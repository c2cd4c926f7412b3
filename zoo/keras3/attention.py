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

import keras
import numpy as np
from keras import ops

from zoo import specs
from zoo.keras3.base import ZooLayer
from zoo.specs import AttentionResult
from zoo.specs import clone_initializer

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
    `probs` float32 `[B, N, T, S]`.
    """
    del args, kwargs
    value = query if value is None else value
    batch, length = query.shape[0], query.shape[1]
    scores = (batch, self._num_heads(), length, value.shape[1])
    return AttentionResult(output=keras.KerasTensor(query.shape, dtype=self.compute_dtype),
                           carry=keras.KerasTensor(scores, dtype="float32"),
                           probs=keras.KerasTensor(scores, dtype="float32"))


@keras.saving.register_keras_serializable(package="zoo")
class MultiHeadAttention(specs.MultiHeadAttentionSpec, AttentionLayer):
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

  def __init__(self, *args, seed=None, **kwargs):
    super().__init__(*args, **kwargs)
    self.seed = seed
    self.seed_generator = keras.random.SeedGenerator(seed) if self.attention_dropout > 0 else None

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
    return self._attend(query, value, self._content_scores, attention_mask, attention_carry,
                        layer_index, training)

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

  def get_config(self):
    return {**super().get_config(), "seed": self.seed}

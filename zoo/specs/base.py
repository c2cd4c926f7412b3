"""What every layer spec shares: `LayerSpec` (initializers in the edition's Keras), the
`AttentionResult` the attention layers and blocks return, and static position vectors.
"""

import typing

import numpy as np


class AttentionResult(typing.NamedTuple):
  """What `MultiHeadAttention`, `RelativeMultiHeadAttention` and `TransformerBlock` return.

  The same three fields whatever the layer's flags; read them by name
  (`result.output`, `result.carry`, `result.probs`). Keras functional models and
  `.keras` files take it like any tuple of tensors.

  Fields:
    output: `[B, T, D]` in the compute dtype: the attention output, or for
      `TransformerBlock` the block's output.
    carry: float32 `[B, N, T, S]`: the full pre-softmax score `C_l = S_l + C_{l-1}`
      (RealFormer's residual-attention carry, undivided and unmasked), to pass as the
      next residual layer's `attention_carry`. A layer without `residual_attention`
      takes no carry and returns its own score `S_l`, which is what layer 0 of a
      RealFormer passes up.
    probs: float32 `[B, N, T, S]`: the attention probabilities, before dropout.
  """

  output: typing.Any
  carry: typing.Any
  probs: typing.Any


def clone_initializer(initializer):
  """A fresh initializer with the same config, so no two kernels start out equal."""
  if hasattr(initializer, "get_config"):
    return initializer.__class__.from_config(initializer.get_config())
  return initializer


class LayerSpec:
  """The base of every layer spec: initializers read and written by the edition's Keras.

  The edition's base layer class, after the spec in the bases, names its Keras module as
  `_keras` (`tf_keras` or `keras`).
  """

  def _initializer(self, value):
    return self._keras.initializers.get(value)

  def _serialized(self, initializer):
    return self._keras.initializers.serialize(initializer)


def static_vector(value, length, name):
  """A known position vector as 1-D float64 numpy, checked against `length`."""
  value = np.asarray(value, dtype=np.float64)
  if value.ndim != 1 or value.shape[0] != length:
    raise ValueError(f"{name} must be a vector of length {length}, got shape {value.shape}")
  return value

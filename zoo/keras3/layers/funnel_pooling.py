"""Funnel-Transformer pooling and decoder upsampling (Dai et al., 2020, Sec. 2), in Keras 3.

The Keras 3 twin of `zoo.layers.funnel_pooling` (its module docstring and `DESIGN.md`,
Section 5, describe the windows, `separate_cls`, `truncate_seq`, the three padding
semantics and the pooled positions). Axes: B batch, T length before
pooling, T' after, D model width; a residual-attention carry `[B, N, T, S]` pools along
axis 2 or 3.
"""

import keras
import numpy as np
from keras import ops

from zoo.choices import HF_POOLING
from zoo.choices import POOLING_TYPES
from zoo.choices import ZOO_POOLING
from zoo.choices import check_choice
from zoo.choices import check_pooling_semantics
from zoo.choices import recorded_pooling_semantics
from zoo.grids import pool_positions
from zoo.keras3.layers.base import WeightlessLayer

POOLING_MODES = POOLING_TYPES + ("first", "any", "all")
# Below any activation and finite in float32 and bfloat16: the max of an all-padding window.
LOWEST = -3.0e38


def _slice(tensor, axis, start, stop):
  index = [slice(None)] * len(tensor.shape)
  index[axis] = slice(start, stop)
  return tensor[tuple(index)]


def _window_view(tensor, axis, separate_cls, truncate_seq):
  """Re-reads `axis` as pairs: `[..., T, ...] -> [..., T', 2, ...]`, odd tails padded.

  Returns the paired tensor and a float32 numpy `[T', 2]` table, 1 where a pair slot
  holds a token of the sequence and 0 where it is tail padding.
  """
  length = tensor.shape[axis]
  if length is None:
    raise ValueError("funnel pooling needs a static sequence length")
  if separate_cls:
    cls = _slice(tensor, axis, 0, 1)
    body = _slice(tensor, axis, 0, length - 1) if truncate_seq else tensor
    tensor = ops.concatenate([cls, body], axis=axis)
    length = tensor.shape[axis]
  present = np.ones([length], np.float32)
  if length % 2:
    pad = [[0, 0]] * len(tensor.shape)
    pad[axis] = [0, 1]
    tensor = ops.pad(tensor, pad)
    present = np.concatenate([present, [0.0]]).astype(np.float32)
    length += 1
  shape = [-1 if size is None else size for size in tensor.shape]
  shape[axis:axis + 1] = [length // 2, 2]
  return ops.reshape(tensor, shape), present.reshape([-1, 2])


def _broadcast_along(table, axis, rank):
  """Places a `[T', 2]` (or `[B, T', 2]`) table on `axis` of a paired rank-`rank` tensor."""
  shape = [1] * (rank + 1)
  if len(table.shape) == 3:
    shape[0] = -1
  shape[axis], shape[axis + 1] = table.shape[-2], 2
  return ops.reshape(table, shape)


def pool_sequence(tensor, axis=1, mode="mean", separate_cls=True, truncate_seq=True, input_mask=None):
  """Pools `tensor` along `axis` with stride 2: `zoo.layers.pool_sequence` in `keras.ops`.

  `mode`: "mean" or "max" for values, "first" for ids, "any" or "all" for 0/1 masks.
  With `input_mask`, "mean", "max" and "any" read only the real tokens of a window.
  """
  check_choice("pooling mode", mode, POOLING_MODES)
  tensor = ops.convert_to_tensor(tensor)
  axis = axis % len(tensor.shape)
  paired, present = _window_view(tensor, axis, separate_cls, truncate_seq)
  if mode == "first":
    return ops.squeeze(_slice(paired, axis + 1, 0, 1), axis + 1)

  weights = ops.convert_to_tensor(present)   # [T', 2]
  if input_mask is not None:
    mask_pairs, _ = _window_view(ops.cast(input_mask, "float32"), 1, separate_cls, truncate_seq)
    weights = weights * mask_pairs            # [B, T', 2]
  weights = _broadcast_along(weights, axis, len(tensor.shape))
  if mode == "any":
    return ops.cast(ops.max(ops.cast(paired, "float32") * weights, axis=axis + 1), tensor.dtype)
  if mode == "all":   # a tail slot (no token) does not count
    values = ops.where(weights > 0, ops.cast(paired, "float32"), 1.0)
    return ops.cast(ops.min(values, axis=axis + 1), tensor.dtype)
  weights = ops.cast(weights, paired.dtype)
  if mode == "mean":
    total = ops.sum(paired * weights, axis=axis + 1)
    count = ops.sum(weights, axis=axis + 1)
    return total / ops.maximum(count, ops.ones_like(count))
  picked = ops.where(weights > 0, paired, ops.cast(LOWEST, paired.dtype))
  pooled = ops.max(picked, axis=axis + 1)
  return ops.where(ops.max(weights, axis=axis + 1) > 0, pooled, ops.zeros_like(pooled))


@keras.saving.register_keras_serializable(package="zoo")
class FunnelPooling(WeightlessLayer):
  """Stride-2 pooling of a Funnel-Transformer sequence, its mask and its ids.

  `zoo.layers.FunnelPooling` for Keras 3: the same arguments (`pooling_type`,
  `separate_cls`, `truncate_seq`, `semantics`), call (`inputs`, `input_mask`, `axis`,
  `mode`) and helpers (`pool_mask`, `pool_ids`, `pool_positions`). Keeps the dtype it is
  given: a float32 carry stays float32 under mixed precision, masks and ids integers.
  """

  def __init__(self, pooling_type="mean", separate_cls=True, truncate_seq=True, semantics=ZOO_POOLING,
               **kwargs):
    # Pooling keeps the dtype it is given: a float32 attention carry stays float32
    # under mixed precision, and masks and ids stay integers.
    super().__init__(autocast=False, **kwargs)
    check_choice("pooling_type", pooling_type, POOLING_TYPES)
    check_pooling_semantics("semantics", semantics)
    self.pooling_type = pooling_type
    self.separate_cls = separate_cls
    self.truncate_seq = truncate_seq
    self.semantics = semantics

  def call(self, inputs, input_mask=None, axis=1, mode=None):
    if self.semantics != ZOO_POOLING:
      input_mask = None   # every token of a window counts, padding included
    return pool_sequence(inputs, axis, mode or self.pooling_type, self.separate_cls, self.truncate_seq,
                         input_mask=input_mask)

  def pool_mask(self, input_mask):
    """`[B, T]` mask -> `[B, T']`: a window is real if every token of it is (Hugging Face's semantics),
    else if any is."""
    return self(input_mask, mode="all" if self.semantics == HF_POOLING else "any")

  def pool_ids(self, ids):
    """`[B, T]` ids (e.g. segment ids) -> `[B, T']`, the first id of each window."""
    return self(ids, mode="first")

  def pool_positions(self, positions):
    """Position vector `[T]` -> `[T']` (numpy; positions are static)."""
    return pool_positions(positions, self.separate_cls, self.truncate_seq)

  def get_config(self):
    config = super().get_config()
    config.update(pooling_type=self.pooling_type, separate_cls=self.separate_cls,
                  truncate_seq=self.truncate_seq, semantics=self.semantics)
    return config

  @classmethod
  def from_config(cls, config):
    """A recorded config; "authors" there means Hugging Face's semantics (`zoo.choices`)."""
    config = dict(config)
    if "semantics" in config:
      config["semantics"] = recorded_pooling_semantics(config["semantics"])
    return super().from_config(config)


@keras.saving.register_keras_serializable(package="zoo")
class FunnelUpsampling(WeightlessLayer):
  """Restores a pooled Funnel sequence to full length for the decoder (Sec. 2.3).

  `zoo.layers.FunnelUpsampling` for Keras 3: each non-[cls] vector repeated `stride`
  times, [cls] re-attached in front (`separate_cls`), zeros past the repeated vectors (the
  authors' `upsample`). Call: `inputs [B, T', D]`, `target_length`.
  """

  def __init__(self, stride, separate_cls=True, truncate_seq=True, **kwargs):
    super().__init__(**kwargs)
    if stride < 1 or stride & (stride - 1):
      raise ValueError(f"stride must be a power of two, got {stride}")
    self.stride = stride
    self.separate_cls = separate_cls
    self.truncate_seq = truncate_seq

  def get_config(self):
    config = super().get_config()
    config.update(stride=self.stride, separate_cls=self.separate_cls, truncate_seq=self.truncate_seq)
    return config

  def call(self, inputs, target_length):
    if self.stride == 1:
      return inputs[:, :target_length]
    body = inputs[:, 1:] if self.separate_cls else inputs
    repeated = ops.repeat(body, self.stride, axis=1)   # [B, (T'-1)·stride, D]
    if self.separate_cls:
      repeated = ops.concatenate([inputs[:, :1], repeated], axis=1)
    length = repeated.shape[1]
    if length < target_length:
      repeated = ops.pad(repeated, [[0, 0], [0, target_length - length], [0, 0]])
    repeated = repeated[:, :target_length]
    return repeated

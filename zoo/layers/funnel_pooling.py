"""Funnel-Transformer sequence pooling and decoder upsampling (Dai et al., 2020, Sec. 2).

Axes: B batch, T sequence length before pooling, T' after, D model width,
N heads (for a residual-attention carry `[B, N, T, S]`).

Windows: stride 2 over the sequence. With `separate_cls` the [cls] vector (index 0)
stays out of the pooling: the sequence is read as `[cls, cls, x1, x2, ...]` so that
[cls] forms a window of its own; with `truncate_seq` the last token is dropped first,
so lengths stay powers of two (512 -> 256 -> 128). Without `separate_cls`,
`truncate_seq` has no effect and an odd length leaves a last window of one token.

Padding (`semantics`, `zoo.choices.POOLING_SEMANTICS`):

- "zoo" (the default): a pooled token is real when **any** token of its window is
  real, and mean/max pooling read only the real tokens of a window. Outputs at real
  positions therefore do not depend on padding, except where `truncate_seq` drops a real
  token at one padded length that another length pools (a text that nearly fills the
  shorter one; DESIGN.md, "Masks", gives the figure).
- "huggingface": a pooled token is real only when **every** token of its window is
  (the minimum of a mask that is 1 for real tokens), and mean/max run over the whole
  window, padding included: Hugging Face's port, and what its Funnel checkpoints compute.
- "funnel_authors": a pooled token is real when **any** token of its window is (the
  authors' code takes the minimum of a mask that is 1 for padding), and mean/max run
  over the whole window, padding included: the authors' TensorFlow and PyTorch code,
  which trained and evaluated the paper's checkpoints.

All three agree when padding is aligned to the windows (every window wholly real or
wholly padding); they differ where a window holds the last real token and a pad. A
config recorded with "authors" (the name Hugging Face's semantics had before) loads as
"huggingface" (`FunnelPooling.from_config`).

Positions: a pooled token sits at the position of the first token of its window;
with `separate_cls`, [cls] keeps its place on the new grid, one stride before the
first pooled token (`1 - 2^b` in block b, as in the authors' code).
"""

import numpy as np
import tensorflow as tf
import tf_keras as keras

from zoo.choices import HF_POOLING
from zoo.choices import POOLING_TYPES
from zoo.choices import ZOO_POOLING
from zoo.choices import check_choice
from zoo.choices import check_pooling_semantics
from zoo.choices import recorded_pooling_semantics
from zoo.grids import pool_positions
from zoo.layers.base import ZooLayer

# All pooling modes of `pool_sequence`: the pooling types plus "first" (stride
# selection, for ids), "any" and "all" (for masks: the window's maximum or minimum).
POOLING_MODES = POOLING_TYPES + ("first", "any", "all")


def _window_view(tensor: tf.Tensor, axis: int, separate_cls: bool, truncate_seq: bool
                 ) -> tuple[tf.Tensor, np.ndarray]:
  """Re-reads `axis` as pairs: `[..., T, ...] -> [..., T', 2, ...]`, odd tails padded.

  Returns the paired tensor and a float32 `[T', 2]` table, 1 where a pair slot holds a
  token of the sequence and 0 where it is tail padding.
  """
  length = tensor.shape[axis]
  if length is None:
    raise ValueError("funnel pooling needs a static sequence length")
  if separate_cls:
    cls = _slice(tensor, axis, 0, 1)
    body = _slice(tensor, axis, 0, length - 1) if truncate_seq else tensor
    tensor = tf.concat([cls, body], axis=axis)
    length = tensor.shape[axis]
  present = np.ones([length], np.float32)
  if length % 2:
    pad = [[0, 0]] * tensor.shape.rank
    pad[axis] = [0, 1]
    tensor = tf.pad(tensor, pad)
    present = np.concatenate([present, [0.0]]).astype(np.float32)
  dynamic = tf.unstack(tf.shape(tensor))
  new_shape = [s if s is not None else d for s, d in zip(tensor.shape.as_list(), dynamic, strict=True)]
  new_shape[axis:axis + 1] = [tensor.shape[axis] // 2, 2]
  return tf.reshape(tensor, new_shape), present.reshape([-1, 2])


def _slice(tensor: tf.Tensor, axis: int, start: int, stop: int) -> tf.Tensor:
  begin = [0] * tensor.shape.rank
  size = [-1] * tensor.shape.rank
  begin[axis], size[axis] = start, stop - start
  return tf.slice(tensor, begin, size)


def _broadcast_along(table: tf.Tensor, axis: int, rank: int) -> tf.Tensor:
  """Places a `[T', 2]` (or `[B, T', 2]`) table on `axis` of a paired rank-`rank` tensor."""
  shape = [1] * (rank + 1)
  if table.shape.rank == 3:
    shape[0] = -1
  shape[axis], shape[axis + 1] = table.shape[-2], 2
  return tf.reshape(table, shape)


def pool_sequence(tensor: tf.Tensor, axis: int = 1, mode: str = "mean", separate_cls: bool = True,
                  truncate_seq: bool = True, input_mask: tf.Tensor | None = None) -> tf.Tensor:
  """Pools `tensor` along `axis` with stride 2 (see the module docstring).

  Args:
    tensor: any tensor; `axis` is the sequence axis (1 for `[B, T, D]` or `[B, T]`,
      2 or 3 for a `[B, N, T, S]` attention carry).
    mode: "mean" or "max" for values, "first" (take the first token of each window,
      for ids and positions), "any" or "all" (for 0/1 masks: real if any, or every,
      token of the window is).
    input_mask: optional `[B, T]` mask of real tokens; "mean", "max" and "any" then
      read only the real tokens of a window (a window with none pools to 0). Leave it
      out for Hugging Face's and the authors' semantics (every token of the window counts).

  Returns:
    The pooled tensor, `axis` shortened to `T'`.
  """
  check_choice("pooling mode", mode, POOLING_MODES)
  tensor = tf.convert_to_tensor(tensor)
  axis = axis % tensor.shape.rank
  paired, present = _window_view(tensor, axis, separate_cls, truncate_seq)
  if mode == "first":
    return tf.squeeze(_slice(paired, axis + 1, 0, 1), axis + 1)

  weights = tf.constant(present)   # [T', 2]
  if input_mask is not None:
    mask_pairs, _ = _window_view(tf.cast(input_mask, tf.float32), 1, separate_cls, truncate_seq)
    weights = weights * mask_pairs   # [B, T', 2]
  weights = _broadcast_along(weights, axis, tensor.shape.rank)
  if mode == "any":
    return tf.cast(tf.reduce_max(tf.cast(paired, tf.float32) * weights, axis=axis + 1), tensor.dtype)
  if mode == "all":   # a tail slot (no token) does not count
    values = tf.where(weights > 0, tf.cast(paired, tf.float32), 1.0)
    return tf.cast(tf.reduce_min(values, axis=axis + 1), tensor.dtype)
  weights = tf.cast(weights, paired.dtype)
  if mode == "mean":
    total = tf.reduce_sum(paired * weights, axis=axis + 1)
    count = tf.reduce_sum(weights, axis=axis + 1)
    return total / tf.maximum(count, tf.ones_like(count))
  lowest = paired.dtype.min
  picked = tf.where(weights > 0, paired, lowest)
  pooled = tf.reduce_max(picked, axis=axis + 1)
  return tf.where(tf.reduce_max(weights, axis=axis + 1) > 0, pooled, tf.zeros_like(pooled))


@keras.utils.register_keras_serializable(package="zoo")
class FunnelPooling(ZooLayer):
  """Stride-2 pooling of a Funnel-Transformer sequence, its mask and its ids.

  Between blocks, Funnel-Transformer shortens the hidden sequence by 2 (Dai et al.,
  2020, Sec. 2.2). This layer pools hidden states `[B, T, D]` (or a residual-attention
  carry along axis 2 or 3) by `pooling_type` over windows of two tokens, with
  [cls] kept apart (`separate_cls`) and the last token dropped (`truncate_seq`) as
  described in the module docstring.

  Args:
    pooling_type: "mean" or "max" (`zoo.choices.POOLING_TYPES`).
    separate_cls: keep [cls] out of the pooling.
    truncate_seq: with `separate_cls`, drop the last token so lengths halve exactly.
    semantics: what a window does with padding, "zoo", "huggingface" or "funnel_authors"
      (`zoo.choices.POOLING_SEMANTICS`, see the module docstring).

  Call arguments:
    inputs: tensor to pool.
    input_mask: optional `[B, T]` mask (1 = real); with the zoo's semantics the pooling
      reads real tokens only, with the others it is not used.
    axis: the sequence axis of `inputs` (default 1).
    mode: overrides `pooling_type` for this call: "any" for masks, "first" for ids
      (what `pool_mask` and `pool_ids` use).

  Returns:
    The pooled tensor, in the dtype of `inputs`.

  Example:
    >>> pool = FunnelPooling("mean")
    >>> hidden, mask = tf.random.normal([2, 8, 16]), tf.ones([2, 8], tf.int32)
    >>> pool(hidden, input_mask=mask).shape, pool.pool_mask(mask).shape
    (TensorShape([2, 4, 16]), TensorShape([2, 4]))
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


@keras.utils.register_keras_serializable(package="zoo")
class FunnelUpsampling(ZooLayer):
  """Restores a pooled Funnel sequence to full length for the decoder (Sec. 2.3).

  Each non-[cls] vector is repeated `stride` times (`stride = 2^(blocks - 1)`), [cls]
  is re-attached in front when `separate_cls`, and the positions past the repeated
  vectors are zeros: the authors' `upsample` (and Hugging Face's), at every length. At
  lengths whose blocks all pool an even number of tokens (512, 128, ...), these are the
  positions truncation left in no pooled window, and token `p ≥ 1` is the pooled vector
  whose window contains position `p`; elsewhere the last pooled vectors repeat over the
  positions a ceil-rounded window left out, as in their code.

  Args:
    stride: total pooling factor to undo (a power of two).
    separate_cls: the input starts with a [cls] vector that is not repeated.
    truncate_seq: the pooling dropped the last token before each step.

  Call arguments:
    inputs: `[B, T', D]` pooled sequence.
    target_length: the full length `T` to restore.

  Example:
    >>> up = FunnelUpsampling(stride=4)
    >>> up(tf.random.normal([2, 4, 16]), target_length=16).shape
    TensorShape([2, 16, 16])
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

  def call(self, inputs: tf.Tensor, target_length: int) -> tf.Tensor:
    if self.stride == 1:
      return inputs[:, :target_length]
    body = inputs[:, 1:] if self.separate_cls else inputs
    repeated = tf.repeat(body, self.stride, axis=1)   # [B, (T'-1)·stride, D]
    if self.separate_cls:
      repeated = tf.concat([inputs[:, :1], repeated], axis=1)
    length = repeated.shape[1]
    if length < target_length:
      repeated = tf.pad(repeated, [[0, 0], [0, target_length - length], [0, 0]])
    repeated = repeated[:, :target_length]
    return repeated

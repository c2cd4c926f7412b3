"""Multi-head attention with Transformer-XL relative positions (Funnel paper, A.2), in Keras 3.

The Keras 3 twin of `zoo.layers.relative_attention` (see `DESIGN.md`, Section 6): the
factorized form (matmuls and elementwise products only, no gather) and the shift form,
the relative segment term and `separate_cls`, with the residual-attention carry of
`MultiHeadAttention`. Axes: B batch, T query length, S key length, N heads, H head
width, D model width, L relative distances (shift form), K = 2 segment classes.
"""

import keras
import numpy as np
from keras import ops

from zoo.choices import FACTORIZED
from zoo.choices import RELATIVE_POSITION_ENCODINGS
from zoo.choices import SHIFT
from zoo.choices import check_choice
from zoo.grids import shift_distances
from zoo.grids import static_vector
from zoo.keras3.layers.attention import MultiHeadAttention
from zoo.keras3.layers.base import clone_initializer


def sinusoid_frequencies(width):
  """`f_k = 10000^(-2k/width)` for `k < width/2`, float32 `[width/2]` (computed in float32)."""
  if width % 2:
    raise ValueError(f"the sinusoid width must be even, got {width}")
  k = ops.arange(width // 2, dtype="float32")
  return 1.0 / ops.power(10000.0, 2.0 * k / float(width))


def sinusoid(positions, width):
  """`concat[sin(t·f), cos(t·f)]` (not interleaved): `[..., L] -> [..., L, width]`, float32."""
  angles = ops.expand_dims(ops.cast(positions, "float32"), -1) * sinusoid_frequencies(width)
  return ops.concatenate([ops.sin(angles), ops.cos(angles)], axis=-1)


def static_positions(positions, length, name):
  """`positions` as a 1-D float64 numpy array when given as Python or numpy values, else None."""
  if positions is None:
    return np.arange(length, dtype=np.float64)
  if isinstance(positions, (list, tuple, np.ndarray)):
    return static_vector(positions, length, name)
  return None


@keras.saving.register_keras_serializable(package="zoo")
class RelativeMultiHeadAttention(MultiHeadAttention):
  """Relative-position multi-head attention, factorized (default) or shift form.

  `zoo.layers.RelativeMultiHeadAttention` for Keras 3: the same arguments, weights
  (`content_bias` v, `position_bias` u, `position_kernel` W_r, and with the segment
  term `segment_bias` s and `segment_embedding`) and call arguments
  (`query_positions`, `key_positions` as `[T]`/`[S]` or per-example `[B, T]`;
  `query_segment_ids`, `key_segment_ids`). The factorized form takes any positions and
  has no gather; the shift form needs static, evenly spaced positions given as Python
  or numpy values.
  """

  def __init__(self,
               num_heads,
               head_size,
               position_encoding=FACTORIZED,
               use_segment_bias=False,
               separate_cls=False,
               cls_segment_id=2,
               **kwargs):
    super().__init__(num_heads, head_size, **kwargs)
    check_choice("position_encoding", position_encoding, RELATIVE_POSITION_ENCODINGS)
    self.position_encoding = position_encoding
    self.use_segment_bias = use_segment_bias
    self.separate_cls = separate_cls
    self.cls_segment_id = cls_segment_id

  def build(self, input_shape):
    width = input_shape[-1]
    if width % 2:
      raise ValueError(f"relative attention needs an even model width, got {width}")
    heads = (self.num_heads, self.head_size)
    self.content_bias = self.add_weight(name="content_bias", shape=heads, initializer="zeros")      # v
    self.position_bias = self.add_weight(name="position_bias", shape=heads, initializer="zeros")    # u
    self.position_kernel = self.add_weight(                                                          # W_r
        name="position_kernel", shape=(width, *heads), initializer=clone_initializer(self.kernel_initializer))
    if self.use_segment_bias:
      self.segment_bias = self.add_weight(name="segment_bias", shape=heads, initializer="zeros")    # s
      self.segment_embedding = self.add_weight(                                                      # seg
          name="segment_embedding", shape=(2, *heads),
          initializer=clone_initializer(self.kernel_initializer))
    super().build(input_shape)

  def _check_segments(self, query_segment_ids):
    if self.use_segment_bias and query_segment_ids is None:
      raise ValueError("use_segment_bias=True needs query_segment_ids")

  def _shift_layout(self, query_positions, key_positions, query_length, key_length):
    """The shift form's static table `(ratio, distances)` (`zoo.grids.shift_distances`) of positions known
    when the model is built (`_static_positions`; None is the default grid)."""
    if query_length is None or key_length is None:
      raise ValueError("position_encoding='shift' needs static sequence lengths")
    known = []
    for positions, length, name in ((query_positions, query_length, "query_positions"),
                                    (key_positions, key_length, "key_positions")):
      values = self._static_positions(positions, length, name)
      if values is None:
        raise ValueError(
            f"position_encoding='shift' needs {name} known when the graph is built "
            "(a Python list, NumPy array or constant); use position_encoding='factorized' "
            "for positions computed at run time")
      known.append(values)
    return shift_distances(*known)

  def get_config(self):
    config = super().get_config()
    config.update(
        position_encoding=self.position_encoding,
        use_segment_bias=self.use_segment_bias,
        separate_cls=self.separate_cls,
        cls_segment_id=self.cls_segment_id,
    )
    return config

  _static_positions = staticmethod(static_positions)
  _local_scores = MultiHeadAttention._local_scores_by_parts   # each part has positions of its own

  def call(self, query, value=None, attention_mask=None, query_positions=None, key_positions=None,
           query_segment_ids=None, key_segment_ids=None, attention_carry=None, layer_index=0,
           training=None):
    self._check_segments(query_segment_ids)
    if self.attention_window is not None:
      return self._attend_local(query, value, attention_mask, attention_carry, layer_index, training,
                                query_positions, key_positions, query_segment_ids, key_segment_ids)
    key_segment_ids = query_segment_ids if key_segment_ids is None else key_segment_ids

    def scores_fn(query_heads, key_heads):
      return self._pair_scores(query_heads, key_heads, query_positions, key_positions, query_segment_ids,
                               key_segment_ids, self.position_encoding, self.separate_cls)

    return self._attend(query, value, scores_fn, attention_mask, attention_carry, layer_index, training)

  def _pair_scores(self, query_heads, key_heads, query_positions, key_positions, query_segment_ids,
                   key_segment_ids, form, separate_cls):
    """The scaled score `[B, N, T, S]`: content, position (in `form`) and segment terms, the terms of
    pairs with the first query or key zeroed when `separate_cls`."""
    scale = self._scale()
    scores = ops.einsum("BTNH,BSNH->BNTS", (query_heads + self._cast(self.content_bias)) * scale, key_heads)
    position_scores = (self._shift_position_scores if form == SHIFT else self._factorized_position_scores)
    relative = position_scores((query_heads + self._cast(self.position_bias)) * scale, query_positions,
                               key_positions, query_heads.shape[1], key_heads.shape[1])
    if self.use_segment_bias:
      relative = relative + self._segment_scores(
          (query_heads + self._cast(self.segment_bias)) * scale, query_segment_ids, key_segment_ids)
    if separate_cls:   # a select with a static pattern
      relative = ops.where(self._cls_pair_mask(relative), relative, ops.zeros_like(relative))
    return scores + relative

  def _cast(self, variable):
    return ops.cast(variable, self.compute_dtype)

  def _factorized_position_scores(self, query_heads, query_positions, key_positions, query_length,
                                  key_length):
    """Appendix A.2.2 regrouped into one contraction, without a gather (see the tf_keras twin)."""
    width = self.position_kernel.shape[0]
    query_positions = self._positions_or_default(query_positions, query_length, query_heads)
    key_positions = self._positions_or_default(key_positions, key_length, query_heads)
    frequencies = sinusoid_frequencies(width)
    query_angles = ops.expand_dims(ops.cast(query_positions, "float32"), -1) * frequencies  # [(B,) T, D/2]
    key_angles = ops.expand_dims(ops.cast(key_positions, "float32"), -1) * frequencies      # [(B,) S, D/2]
    sin_q = ops.cast(ops.sin(query_angles), self.compute_dtype)
    cos_q = ops.cast(ops.cos(query_angles), self.compute_dtype)
    psi = ops.cast(ops.concatenate([ops.cos(key_angles), ops.sin(key_angles)], -1),
                   self.compute_dtype)                                                     # [(B,) S, D]
    if len(sin_q.shape) == 3:   # per-example positions: [B, T, D/2] -> [B, 1, T, D/2]
      sin_q, cos_q = ops.expand_dims(sin_q, 1), ops.expand_dims(cos_q, 1)

    q_tilde = ops.einsum("BTNH,DNH->BNTD", query_heads, self._cast(self.position_kernel))   # [B, N, T, D]
    a, b = q_tilde[..., :width // 2], q_tilde[..., width // 2:]                            # [B, N, T, D/2]
    rotated = ops.concatenate([a * sin_q + b * cos_q, b * sin_q - a * cos_q], axis=-1)    # [B, N, T, D]
    if len(psi.shape) == 2:
      return ops.einsum("BNTD,SD->BNTS", rotated, psi)
    return ops.einsum("BNTD,BSD->BNTS", rotated, psi)

  def _shift_position_scores(self, query_heads, query_positions, key_positions, query_length, key_length):
    ratio, distances = self._shift_layout(query_positions, key_positions, query_length, key_length)
    num_distances = distances.shape[0]
    width = self.position_kernel.shape[0]
    table = ops.cast(sinusoid(distances, width), self.compute_dtype)
    position_heads = ops.einsum("LD,DNH->LNH", table, self._cast(self.position_kernel))   # [L, N, H]
    scores = ops.einsum("BTNH,LNH->BNTL", query_heads, position_heads)                     # [B, N, T, L]
    # Row i needs the slice starting at ratio·(T - i): drop ratio·T flat entries, re-read
    # the rest as rows of L - ratio, keep S columns.
    flat = ops.reshape(scores, (-1, self.num_heads, query_length * num_distances))
    flat = flat[:, :, ratio * query_length:]
    rows = ops.reshape(flat, (-1, self.num_heads, query_length, num_distances - ratio))
    return rows[:, :, :, :key_length]   # [B, N, T, S]

  def _segment_scores(self, query_heads, query_segment_ids, key_segment_ids):
    """`(q̂ + s)·seg[σ_ij]`: `[B, T, N, H] -> [B, N, T, S]`, a select, not a gather."""
    query_ids = ops.cast(query_segment_ids, "int32")
    key_ids = ops.cast(key_segment_ids, "int32")
    same = ops.equal(ops.expand_dims(query_ids, 2), ops.expand_dims(key_ids, 1))               # [B, T, S]
    same = ops.logical_or(same, ops.expand_dims(ops.equal(query_ids, self.cls_segment_id), 2))
    same = ops.logical_or(same, ops.expand_dims(ops.equal(key_ids, self.cls_segment_id), 1))
    by_class = ops.einsum("BTNH,KNH->BNTK", query_heads, self._cast(self.segment_embedding))  # [B, N, T, 2]
    return ops.where(ops.expand_dims(same, 1), by_class[..., 1:], by_class[..., :1])

  @staticmethod
  def _cls_pair_mask(scores):
    """`[T, S]` bool, False on the first row and column of `[B, N, T, S]` scores."""
    shape = ops.shape(scores)
    rows = ops.arange(shape[2]) > 0
    columns = ops.arange(shape[3]) > 0
    return ops.logical_and(ops.expand_dims(rows, 1), ops.expand_dims(columns, 0))

  @staticmethod
  def _positions_or_default(positions, length, like):
    if positions is None:
      if length is None:
        length = ops.shape(like)[1]
      return ops.arange(length, dtype="float32")
    if isinstance(positions, (list, tuple, np.ndarray)):
      return ops.convert_to_tensor(np.asarray(positions, np.float32))
    return positions

"""Multi-head attention with Transformer-XL relative positions (Funnel paper, A.2).

Axes: B batch, T query length, S key length, N heads, H head width, D model width,
L number of relative distances (shift form), K = 2 segment classes.

With `q̂ = q / sqrt(H)` and the per-head biases scaled the same way:

    score_ij = (q̂_i + v)·k_j                      content
             + (q̂_i + u)·(W_r R(p_i - p_j))        position
             + (q̂_i + s)·seg[σ_ij]                 segment (optional)

`R(t) = concat[sin(t·f), cos(t·f)]`, `f_k = 10000^(-2k/D)`; `σ_ij = 1` when tokens i
and j share a segment or either is [cls] (segment id `cls_segment_id`).
"""

from typing import TypeAlias

import numpy as np
import tensorflow as tf
import tf_keras as keras
from numpy.typing import ArrayLike
from official.modeling.tf_utils import clone_initializer

from zoo.choices import FACTORIZED
from zoo.choices import RELATIVE_POSITION_ENCODINGS
from zoo.choices import SHIFT
from zoo.choices import check_choice
from zoo.grids import shift_distances
from zoo.grids import static_vector
from zoo.layers.attention import AttentionResult
from zoo.layers.attention import Carry
from zoo.layers.attention import MultiHeadAttention


def _length(heads: tf.Tensor) -> int | tf.Tensor:
  """Static length of axis 1 of `[B, L, N, H]` when known, else a scalar tensor."""
  return heads.shape[1] if heads.shape[1] is not None else tf.shape(heads)[1]


# Positions as the layers take them: a tensor (`[T]` or `[B, T]`), or numbers `tf.convert_to_tensor` takes.
Positions: TypeAlias = tf.Tensor | ArrayLike


def sinusoid_frequencies(width: int) -> tf.Tensor:
  """`f_k = 10000^(-2k/width)` for `k < width/2`, float32 `[width/2]`."""
  if width % 2:
    raise ValueError(f"the sinusoid width must be even, got {width}")
  k = tf.range(width // 2, dtype=tf.float32)
  return 1.0 / tf.pow(10000.0, 2.0 * k / float(width))


def sinusoid(positions: Positions, width: int) -> tf.Tensor:
  """`concat[sin(t·f), cos(t·f)]` (not interleaved): `[..., L] -> [..., L, width]`."""
  angles = tf.cast(positions, tf.float32)[..., None] * sinusoid_frequencies(width)
  return tf.concat([tf.sin(angles), tf.cos(angles)], axis=-1)


def static_positions(positions: Positions | None, length: int, name: str) -> np.ndarray | None:
  """Returns `positions` as a 1-D float numpy array when known at trace time, else None.

  `None` means the default grid `0, 1, ..., length-1`.
  """
  if positions is None:
    return np.arange(length, dtype=np.float64)
  value = tf.get_static_value(positions) if tf.is_tensor(positions) else positions
  return None if value is None else static_vector(value, length, name)


@keras.utils.register_keras_serializable(package="zoo")
class RelativeMultiHeadAttention(MultiHeadAttention):
  """Relative-position multi-head attention, factorized (default) or shift form.

  Implements the Funnel-Transformer's attention (Dai et al., 2020, appendix A.2) with
  the Transformer-XL parameterization in the module docstring. Queries and keys take
  their own position vectors, so pooled queries can attend to full-length keys.

  - `position_encoding="factorized"` (A.2.2): `(q̃ ⊙ φ_i)·ψ_j + (q̃ ⊙ π_i)·ω_j` with
    `q̃ = (q̂ + u) W_rᵀ`, computed as one contraction over D. Only elementwise products
    and matmuls, no gather: the fast form on TPUs. Positions may be any vectors,
    static or not, `[T]` or `[B, T]`.
  - `position_encoding="shift"` (A.2.1): scores against every relative distance,
    then a reshape-and-slice shift. Cheaper on CPU/GPU. Positions must be static,
    evenly spaced, and the query spacing a whole multiple of the key spacing.

  Both give the same scores. Residual attention works as in `MultiHeadAttention`, and
  the call returns the same `AttentionResult`.

  Args:
    num_heads, head_size, attention_dropout, residual_attention, running_mean,
      kernel_initializer: as in `MultiHeadAttention`.
    position_encoding: "factorized" or "shift" (`zoo.choices.RELATIVE_POSITION_ENCODINGS`).
    use_segment_bias: add the relative segment term (needs segment ids in the call).
    separate_cls: the first query and the first key are [cls]; the position and
      segment terms of every pair that involves them are zeroed (Funnel's
      `separate_cls`, as in the authors' code).
    cls_segment_id: segment id of [cls], which counts as the same segment as anything.

  Call arguments (besides `MultiHeadAttention`'s):
    query_positions: `[T]` or `[B, T]` positions of the queries (default `0..T-1`).
    key_positions: `[S]` or `[B, S]` positions of the keys (default `0..S-1`).
    query_segment_ids: int `[B, T]`, needed with `use_segment_bias`.
    key_segment_ids: int `[B, S]`, defaults to `query_segment_ids`.

  Example:
    >>> x = tf.random.normal([2, 8, 32])
    >>> pooled = x[:, ::2]                 # 4 queries at positions 0, 2, 4, 6
    >>> layer = RelativeMultiHeadAttention(num_heads=4, head_size=8)
    >>> layer(pooled, x, query_positions=[0, 2, 4, 6]).output.shape
    TensorShape([2, 4, 32])
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

  # Positions and segment ids come before the carry, unlike in MultiHeadAttention.call: pass the carry
  # and what follows it by name.
  def call(self,  # type: ignore[override]
           query: tf.Tensor,
           value: tf.Tensor | None = None,
           attention_mask: tf.Tensor | None = None,
           query_positions: Positions | None = None,
           key_positions: Positions | None = None,
           query_segment_ids: tf.Tensor | None = None,
           key_segment_ids: tf.Tensor | None = None,
           attention_carry: Carry | None = None,
           layer_index: int = 0,
           training: bool | None = None) -> AttentionResult:
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
    scores = tf.einsum("BTNH,BSNH->BNTS", (query_heads + self.content_bias) * scale, key_heads)
    position_scores = (self._shift_position_scores if form == SHIFT else self._factorized_position_scores)
    relative = position_scores((query_heads + self.position_bias) * scale, query_positions, key_positions,
                               key_length=_length(key_heads))
    if self.use_segment_bias:
      relative += self._segment_scores(
          (query_heads + self.segment_bias) * scale, query_segment_ids, key_segment_ids)
    if separate_cls:   # a select: its gradient keeps only the boolean pattern alive
      relative = tf.where(self._cls_pair_mask(relative), relative, tf.zeros_like(relative))
    return scores + relative

  def _factorized_position_scores(self, query_heads, query_positions, key_positions, key_length):
    """Appendix A.2.2 without a gather.

    With `q̃ = (q̂ + u) W_rᵀ = [a, b]` (its sin and cos halves), the paper's
    `(q̃ ⊙ φ_i)·ψ_j + (q̃ ⊙ π_i)·ω_j` regroups exactly into one contraction,
    `[a ⊙ sin_i + b ⊙ cos_i, b ⊙ sin_i - a ⊙ cos_i] · ψ_j` with `ψ_j = [cos_j, sin_j]`:
    the same sum with half the multiplications.
    """
    width = self.position_kernel.shape[0]
    query_positions = self._positions_or_default(query_positions, _length(query_heads))
    key_positions = self._positions_or_default(key_positions, key_length)
    # Positional tables are float32; cast only where they meet the activations.
    frequencies = sinusoid_frequencies(width)
    query_angles = tf.cast(query_positions, tf.float32)[..., None] * frequencies   # [(B,) T, D/2]
    key_angles = tf.cast(key_positions, tf.float32)[..., None] * frequencies       # [(B,) S, D/2]
    cast = lambda t: tf.cast(t, self.compute_dtype)  # noqa: E731
    sin_q, cos_q = cast(tf.sin(query_angles)), cast(tf.cos(query_angles))
    psi = cast(tf.concat([tf.cos(key_angles), tf.sin(key_angles)], -1))           # [(B,) S, D]
    if sin_q.shape.rank == 3:   # per-example positions: [B, T, D/2] -> [B, 1, T, D/2]
      sin_q, cos_q = sin_q[:, None], cos_q[:, None]

    q_tilde = tf.einsum("BTNH,DNH->BNTD", query_heads, self.position_kernel)      # [B, N, T, D]
    a, b = tf.split(q_tilde, 2, axis=-1)                                           # [B, N, T, D/2]
    rotated = tf.concat([a * sin_q + b * cos_q, b * sin_q - a * cos_q], axis=-1)  # [B, N, T, D]
    if psi.shape.rank == 2:
      return tf.einsum("BNTD,SD->BNTS", rotated, psi)
    return tf.einsum("BNTD,BSD->BNTS", rotated, psi)

  def _shift_position_scores(self, query_heads, query_positions, key_positions, key_length):
    query_length = query_heads.shape[1]
    ratio, distances = self._shift_layout(query_positions, key_positions, query_length,
                                          None if tf.is_tensor(key_length) else key_length)
    num_distances = distances.shape[0]
    width = self.position_kernel.shape[0]
    table = tf.cast(sinusoid(distances, width), self.compute_dtype)
    position_heads = tf.einsum("LD,DNH->LNH", table, self.position_kernel)        # [L, N, H]
    scores = tf.einsum("BTNH,LNH->BNTL", query_heads, position_heads)              # [B, N, T, L]
    # Row i needs the slice starting at ratio·(T - i): drop ratio·T flat entries,
    # re-read the rest as rows of L - ratio, keep S columns.
    batch, heads = tf.shape(scores)[0], self.num_heads
    flat = tf.reshape(scores, [batch, heads, query_length * num_distances])
    flat = flat[:, :, ratio * query_length:]
    rows = tf.reshape(flat, [batch, heads, query_length, num_distances - ratio])
    return rows[:, :, :, :key_length]   # [B, N, T, S]

  def _segment_scores(self, query_heads, query_segment_ids, key_segment_ids):
    """`(q̂ + s)·seg[σ_ij]`: `[B, T, N, H] -> [B, N, T, S]`, a select, not a gather."""
    query_ids = tf.cast(query_segment_ids, tf.int32)
    key_ids = tf.cast(key_segment_ids, tf.int32)
    same = tf.equal(query_ids[:, :, None], key_ids[:, None, :])                   # [B, T, S]
    same |= tf.equal(query_ids, self.cls_segment_id)[:, :, None]
    same |= tf.equal(key_ids, self.cls_segment_id)[:, None, :]
    by_class = tf.einsum("BTNH,KNH->BNTK", query_heads, self.segment_embedding)    # [B, N, T, 2]
    return tf.where(same[:, None], by_class[..., 1:], by_class[..., :1])

  @staticmethod
  def _cls_pair_mask(scores):
    """`[T, S]` bool, False on the first row and column of `[B, N, T, S]` scores."""
    shape = tf.shape(scores)
    return tf.pad(tf.ones([shape[2] - 1, shape[3] - 1], tf.bool), [[1, 0], [1, 0]])

  @staticmethod
  def _positions_or_default(positions, length):
    if positions is None:
      return tf.range(length, dtype=tf.float32)
    return tf.convert_to_tensor(positions)

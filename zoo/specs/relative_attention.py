"""`RelativeMultiHeadAttention`'s spec (`zoo.layers.relative_attention`,
`zoo.keras3.relative_attention`): the Transformer-XL position arguments, and the shift form's
static distance table (its position grids, checked to be arithmetic).
"""

import numpy as np

from zoo.choices import FACTORIZED
from zoo.choices import RELATIVE_POSITION_ENCODINGS
from zoo.choices import check_choice
from zoo.grids import position_grid
from zoo.specs.attention import MultiHeadAttentionSpec
from zoo.specs.base import clone_initializer


class RelativeMultiHeadAttentionSpec(MultiHeadAttentionSpec):
  """`RelativeMultiHeadAttention`'s arguments, weights and shift-form position grid.

  `build` is shared: the weights are the same in both editions (`content_bias` v,
  `position_bias` u, `position_kernel` W_r, and with the segment term `segment_bias` s and
  `segment_embedding`), then the edition's `MultiHeadAttention.build` adds the projections.
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
    """The shift form's static table: `(ratio, distances)`.

    The positions must be known when the model is built (`self._static_positions` reads
    them; None is the default grid) and evenly spaced, the query spacing a whole multiple
    `ratio` of the key spacing. The distances are
    `t_n = (q0 - k0) + (ratio·T - n)·k_stride` for `n < L = ratio·T + S`, so that pair
    `(i, j)` sits at `n = ratio·(T - i) + j`.
    """
    if query_length is None or key_length is None:
      raise ValueError("position_encoding='shift' needs static sequence lengths")
    q_start, q_stride = self._static_grid(query_positions, query_length, "query_positions")
    k_start, k_stride = self._static_grid(key_positions, key_length, "key_positions")
    k_stride = k_stride or q_stride or 1.0
    q_stride = q_stride or k_stride
    ratio = q_stride / k_stride
    if ratio < 1 or ratio != int(ratio):
      raise ValueError(
          "position_encoding='shift' needs the query spacing to be a whole multiple of the "
          f"key spacing, got {q_stride} and {k_stride}")
    ratio = int(ratio)
    num_distances = ratio * query_length + key_length
    distances = (q_start - k_start) + (ratio * query_length - np.arange(num_distances)) * k_stride
    return ratio, distances.astype(np.float32)

  def _static_grid(self, positions, length, name):
    values = self._static_positions(positions, length, name)
    if values is None:
      raise ValueError(
          f"position_encoding='shift' needs {name} known when the graph is built "
          "(a Python list, NumPy array or constant); use position_encoding='factorized' "
          "for positions computed at run time")
    return position_grid(values, name)

  def get_config(self):
    config = super().get_config()
    config.update(
        position_encoding=self.position_encoding,
        use_segment_bias=self.use_segment_bias,
        separate_cls=self.separate_cls,
        cls_segment_id=self.cls_segment_id,
    )
    return config


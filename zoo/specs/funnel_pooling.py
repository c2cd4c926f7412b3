"""`FunnelPooling`'s and `FunnelUpsampling`'s specs (`zoo.layers.funnel_pooling`,
`zoo.keras3.funnel_pooling`): pooling type, `separate_cls`, `truncate_seq`, the padding
semantics and the pooled positions; the upsampling's stride.
"""

from zoo.choices import HF_POOLING
from zoo.choices import POOLING_TYPES
from zoo.choices import ZOO_POOLING
from zoo.choices import check_choice
from zoo.choices import check_pooling_semantics
from zoo.choices import recorded_pooling_semantics
from zoo.grids import pool_positions
from zoo.specs.base import LayerSpec


class FunnelPoolingSpec(LayerSpec):
  """`FunnelPooling`: its arguments, the semantics' dispatch and the mask, id and position helpers.

  The edition supplies its tensor code as `_pool_sequence` (its `pool_sequence`).
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
    return self._pool_sequence(inputs, axis, mode or self.pooling_type, self.separate_cls,
                               self.truncate_seq, input_mask=input_mask)

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


class FunnelUpsamplingSpec(LayerSpec):
  """`FunnelUpsampling`'s arguments."""

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

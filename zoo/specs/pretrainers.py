"""The spec of ELECTRA's `ReplacedTokenSampler` (`zoo.models.pretrainers`, `zoo.keras3.models.electra`).
"""

from zoo.specs.base import LayerSpec


class ReplacedTokenSamplerSpec(LayerSpec):
  """ELECTRA's `ReplacedTokenSampler`: float32 unless told otherwise (it samples from float32 logits)."""

  def __init__(self, **kwargs):
    kwargs.setdefault("dtype", "float32")
    super().__init__(**kwargs)

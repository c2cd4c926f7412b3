"""The encoder families' configurations: one frozen, typed, documented object per family.

    TransformerConfig   BERT's Post-LN, Pre-LN, RealFormer, ALBERT, the relative Transformer
    FunnelConfig        Funnel-Transformer

Each holds every architectural argument with its default, its checks, `to_dict`/`from_dict`
(config.json, Keras configs and keras-hub presets; the one place recorded names are read) and the
values derived from them that both editions, the presets, the converters and the training job
ask of a family. Plain Python: importing it loads no Keras.

    >>> from zoo.configs import FunnelConfig
    >>> FunnelConfig(vocab_size=100, block_sizes=(2, 2), seq_length=8).block_lengths()
    (8, 4)
"""

from typing import Any

from zoo.configs.encoder import EncoderConfig
from zoo.configs.funnel import FunnelConfig
from zoo.configs.transformer import TransformerConfig

# Either family's configuration: what the presets, model directories and converters give.
FamilyConfig = TransformerConfig | FunnelConfig

CONFIGS: dict[str, type[EncoderConfig]] = {config.family: config
                                           for config in (TransformerConfig, FunnelConfig)}


def config_class(family: str) -> type[EncoderConfig]:
  """The configuration class of `family` ("transformer" or "funnel")."""
  if family not in CONFIGS:
    raise ValueError(f"unknown encoder family {family!r}; choose one of {sorted(CONFIGS)}")
  return CONFIGS[family]


def from_dict(family: str, values: dict[str, Any]) -> FamilyConfig:
  """The `family` configuration a recorded dict describes (`EncoderConfig.from_dict`)."""
  config = config_class(family).from_dict(values)
  assert isinstance(config, (TransformerConfig, FunnelConfig))
  return config


__all__ = ["CONFIGS", "EncoderConfig", "FamilyConfig", "FunnelConfig", "TransformerConfig", "config_class",
           "from_dict"]

"""Encoders, task heads and pretrainers built from `zoo.layers`."""

from zoo.models.funnel_encoder import FunnelEncoder
from zoo.models.transformer_encoder import TransformerEncoder

__all__ = ["FunnelEncoder", "TransformerEncoder"]

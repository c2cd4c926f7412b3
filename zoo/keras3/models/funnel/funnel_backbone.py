"""The Funnel-Transformer as a keras-hub backbone."""

import keras

from zoo.keras3.models.backbone import ZooBackbone
from zoo.keras3.models.funnel_encoder import FunnelEncoder


@keras.saving.register_keras_serializable(package="zoo")
class FunnelBackbone(ZooBackbone):
  """The Funnel-Transformer (`zoo.keras3.FunnelEncoder`) as a keras-hub backbone."""
  encoder_class = FunnelEncoder

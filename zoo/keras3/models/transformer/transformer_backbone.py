"""The Transformer encoders (BERT, Pre-LN, RealFormer, relative) as a keras-hub backbone."""

import keras

from zoo.keras3.models.backbone import ZooBackbone
from zoo.keras3.models.transformer_encoder import TransformerEncoder


@keras.saving.register_keras_serializable(package="zoo")
class TransformerBackbone(ZooBackbone):
  """BERT, Pre-LN, RealFormer and the relative Transformer (`zoo.keras3.TransformerEncoder`)."""
  encoder_class = TransformerEncoder

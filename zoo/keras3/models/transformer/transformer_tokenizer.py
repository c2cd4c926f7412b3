"""The Transformer encoders' keras-hub tokenizer (BERT's special tokens by default)."""

import keras

from zoo.keras3.models.tokenizer import ZooTokenizer
from zoo.keras3.models.transformer.transformer_backbone import TransformerBackbone


@keras.saving.register_keras_serializable(package="zoo")
class TransformerTokenizer(ZooTokenizer):
  backbone_cls = TransformerBackbone

"""ELECTRA pre-training of a Transformer discriminator in keras-hub, and its preprocessor."""

import keras

from zoo.keras3.models.electra import ZooElectra
from zoo.keras3.models.electra import ZooElectraPreprocessor
from zoo.keras3.models.transformer.transformer_backbone import TransformerBackbone
from zoo.keras3.models.transformer.transformer_tokenizer import TransformerTokenizer


@keras.saving.register_keras_serializable(package="zoo")
class TransformerElectraPreprocessor(ZooElectraPreprocessor):
  backbone_cls = TransformerBackbone
  tokenizer_cls = TransformerTokenizer


@keras.saving.register_keras_serializable(package="zoo")
class TransformerElectra(ZooElectra):
  backbone_cls = TransformerBackbone
  preprocessor_cls = TransformerElectraPreprocessor

"""The Transformer encoders' keras-hub text classifier and its preprocessor."""

import keras
import keras_hub

from zoo.keras3.models.packing import PairTruncation
from zoo.keras3.models.text_classifier import ZooTextClassifier
from zoo.keras3.models.transformer.transformer_backbone import TransformerBackbone
from zoo.keras3.models.transformer.transformer_tokenizer import TransformerTokenizer


@keras.saving.register_keras_serializable(package="zoo")
class TransformerTextClassifierPreprocessor(PairTruncation, keras_hub.models.TextClassifierPreprocessor):
  backbone_cls = TransformerBackbone
  tokenizer_cls = TransformerTokenizer


@keras.saving.register_keras_serializable(package="zoo")
class TransformerTextClassifier(ZooTextClassifier):
  backbone_cls = TransformerBackbone
  preprocessor_cls = TransformerTextClassifierPreprocessor

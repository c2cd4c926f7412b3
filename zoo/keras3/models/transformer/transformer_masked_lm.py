"""The Transformer encoders' keras-hub masked LM and its preprocessor."""

import keras
import keras_hub

from zoo.keras3.models.masked_lm import ZooMaskedLM
from zoo.keras3.models.packing import PairTruncation
from zoo.keras3.models.transformer.transformer_backbone import TransformerBackbone
from zoo.keras3.models.transformer.transformer_tokenizer import TransformerTokenizer


@keras.saving.register_keras_serializable(package="zoo")
class TransformerMaskedLMPreprocessor(PairTruncation, keras_hub.models.MaskedLMPreprocessor):
  backbone_cls = TransformerBackbone
  tokenizer_cls = TransformerTokenizer


@keras.saving.register_keras_serializable(package="zoo")
class TransformerMaskedLM(ZooMaskedLM):
  backbone_cls = TransformerBackbone
  preprocessor_cls = TransformerMaskedLMPreprocessor

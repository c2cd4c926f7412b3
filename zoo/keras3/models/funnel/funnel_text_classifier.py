"""The Funnel-Transformer's keras-hub text classifier and its preprocessor."""

import keras
import keras_hub

from zoo.keras3.models.funnel.funnel_backbone import FunnelBackbone
from zoo.keras3.models.funnel.funnel_tokenizer import FunnelTokenizer
from zoo.keras3.models.packing import PairTruncation
from zoo.keras3.models.text_classifier import ZooTextClassifier


@keras.saving.register_keras_serializable(package="zoo")
class FunnelTextClassifierPreprocessor(PairTruncation, keras_hub.models.TextClassifierPreprocessor):
  backbone_cls = FunnelBackbone
  tokenizer_cls = FunnelTokenizer


@keras.saving.register_keras_serializable(package="zoo")
class FunnelTextClassifier(ZooTextClassifier):
  backbone_cls = FunnelBackbone
  preprocessor_cls = FunnelTextClassifierPreprocessor

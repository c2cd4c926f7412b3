"""The Funnel-Transformer's keras-hub masked LM (with the decoder) and its preprocessor."""

import keras
import keras_hub

from zoo.keras3.models.funnel.funnel_backbone import FunnelBackbone
from zoo.keras3.models.funnel.funnel_tokenizer import FunnelTokenizer
from zoo.keras3.models.masked_lm import ZooMaskedLM
from zoo.keras3.models.packing import PairTruncation


@keras.saving.register_keras_serializable(package="zoo")
class FunnelMaskedLMPreprocessor(PairTruncation, keras_hub.models.MaskedLMPreprocessor):
  backbone_cls = FunnelBackbone
  tokenizer_cls = FunnelTokenizer


@keras.saving.register_keras_serializable(package="zoo")
class FunnelMaskedLM(ZooMaskedLM):
  backbone_cls = FunnelBackbone
  preprocessor_cls = FunnelMaskedLMPreprocessor

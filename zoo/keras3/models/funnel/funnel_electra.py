"""ELECTRA pre-training of a Funnel-Transformer discriminator in keras-hub, and its preprocessor."""

import keras

from zoo.keras3.models.electra import ZooElectra
from zoo.keras3.models.electra import ZooElectraPreprocessor
from zoo.keras3.models.funnel.funnel_backbone import FunnelBackbone
from zoo.keras3.models.funnel.funnel_tokenizer import FunnelTokenizer


@keras.saving.register_keras_serializable(package="zoo")
class FunnelElectraPreprocessor(ZooElectraPreprocessor):
  backbone_cls = FunnelBackbone
  tokenizer_cls = FunnelTokenizer


@keras.saving.register_keras_serializable(package="zoo")
class FunnelElectra(ZooElectra):
  backbone_cls = FunnelBackbone
  preprocessor_cls = FunnelElectraPreprocessor

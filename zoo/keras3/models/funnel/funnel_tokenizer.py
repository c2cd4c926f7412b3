"""The Funnel-Transformer's keras-hub tokenizer (`<cls>`-style special tokens from its checkpoints)."""

import keras

from zoo.keras3.models.funnel.funnel_backbone import FunnelBackbone
from zoo.keras3.models.tokenizer import ZooTokenizer


@keras.saving.register_keras_serializable(package="zoo")
class FunnelTokenizer(ZooTokenizer):
  backbone_cls = FunnelBackbone

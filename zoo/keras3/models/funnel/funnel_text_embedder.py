"""The Funnel-Transformer's keras-hub text embedder and its preprocessor."""

import keras

from zoo.keras3.models.funnel.funnel_backbone import FunnelBackbone
from zoo.keras3.models.funnel.funnel_tokenizer import FunnelTokenizer
from zoo.keras3.models.text_embedder import ZooTextEmbedder
from zoo.keras3.models.text_embedder import ZooTextEmbedderPreprocessor


@keras.saving.register_keras_serializable(package="zoo")
class FunnelTextEmbedderPreprocessor(ZooTextEmbedderPreprocessor):
  backbone_cls = FunnelBackbone
  tokenizer_cls = FunnelTokenizer


@keras.saving.register_keras_serializable(package="zoo")
class FunnelTextEmbedder(ZooTextEmbedder):
  backbone_cls = FunnelBackbone
  preprocessor_cls = FunnelTextEmbedderPreprocessor

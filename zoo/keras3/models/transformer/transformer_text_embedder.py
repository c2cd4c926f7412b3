"""The Transformer encoders' keras-hub text embedder and its preprocessor."""

import keras

from zoo.keras3.models.text_embedder import ZooTextEmbedder
from zoo.keras3.models.text_embedder import ZooTextEmbedderPreprocessor
from zoo.keras3.models.transformer.transformer_backbone import TransformerBackbone
from zoo.keras3.models.transformer.transformer_tokenizer import TransformerTokenizer


@keras.saving.register_keras_serializable(package="zoo")
class TransformerTextEmbedderPreprocessor(ZooTextEmbedderPreprocessor):
  backbone_cls = TransformerBackbone
  tokenizer_cls = TransformerTokenizer


@keras.saving.register_keras_serializable(package="zoo")
class TransformerTextEmbedder(ZooTextEmbedder):
  backbone_cls = TransformerBackbone
  preprocessor_cls = TransformerTextEmbedderPreprocessor

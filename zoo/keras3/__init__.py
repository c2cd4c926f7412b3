"""The zoo's layers and encoders for Keras 3: JAX, TensorFlow and PyTorch backends (see README.md here).

Imports `keras` (3.x) only, never `tf_keras`; the backend is Keras' (`KERAS_BACKEND`). Where
keras-hub is installed, it also registers the zoo's keras-hub classes (`zoo.keras3.hub`) and
gives keras-hub's `from_preset` a converter for Hugging Face Funnel directories
(`zoo.keras3.hf_presets`) and a loader of zoo model directories (`zoo.keras3.run_presets`).
"""

import importlib.util

from zoo.keras3.layers.attention import AttentionResult
from zoo.keras3.layers.attention import MultiHeadAttention
from zoo.keras3.layers.embeddings import ClsSegmentIds
from zoo.keras3.layers.embeddings import EncoderEmbeddings
from zoo.keras3.layers.funnel_pooling import FunnelPooling
from zoo.keras3.layers.funnel_pooling import FunnelUpsampling
from zoo.keras3.layers.funnel_pooling import pool_sequence
from zoo.keras3.layers.relative_attention import RelativeMultiHeadAttention
from zoo.keras3.layers.transformer_block import TransformerBlock
from zoo.keras3.loading import LoadedModelDir
from zoo.keras3.loading import load_model_dir
from zoo.keras3.models.funnel_encoder import FunnelEncoder
from zoo.keras3.models.transformer_encoder import TransformerEncoder

__all__ = [
    "AttentionResult",
    "ClsSegmentIds",
    "EncoderEmbeddings",
    "FunnelEncoder",
    "FunnelPooling",
    "FunnelUpsampling",
    "LoadedModelDir",
    "MultiHeadAttention",
    "RelativeMultiHeadAttention",
    "TransformerBlock",
    "TransformerEncoder",
    "load_model_dir",
    "pool_sequence",
]

if importlib.util.find_spec("keras_hub") is not None:
  from zoo.keras3 import hf_presets
  from zoo.keras3 import hub  # noqa: F401  (registers every family's keras-hub classes)
  from zoo.keras3 import run_presets
  hf_presets.install()
  run_presets.install()

"""Reusable Keras layers of the zoo (see README.md in this folder)."""

from zoo.grids import pool_positions
from zoo.grids import pooled_length
from zoo.layers.attention import AttentionResult
from zoo.layers.attention import MultiHeadAttention
from zoo.layers.attention import drop_attention_probs
from zoo.layers.embeddings import ClsSegmentIds
from zoo.layers.embeddings import EncoderEmbeddings
from zoo.layers.funnel_pooling import FunnelPooling
from zoo.layers.funnel_pooling import FunnelUpsampling
from zoo.layers.funnel_pooling import pool_sequence
from zoo.layers.relative_attention import RelativeMultiHeadAttention
from zoo.layers.transformer_block import ACTIVATIONS
from zoo.layers.transformer_block import TransformerBlock

__all__ = [
    "ACTIVATIONS",
    "AttentionResult",
    "ClsSegmentIds",
    "EncoderEmbeddings",
    "FunnelPooling",
    "FunnelUpsampling",
    "MultiHeadAttention",
    "RelativeMultiHeadAttention",
    "TransformerBlock",
    "drop_attention_probs",
    "pool_positions",
    "pool_sequence",
    "pooled_length",
]

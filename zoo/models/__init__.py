"""Encoders, task heads and pretrainers built from `zoo.layers`."""

from zoo.models.embedder import TextEmbedder
from zoo.models.funnel_encoder import FunnelEncoder
from zoo.models.heads import MaskedLMHead
from zoo.models.heads import MultipleChoice
from zoo.models.heads import SequenceClassifier
from zoo.models.heads import SpanQA
from zoo.models.heads import TokenClassifier
from zoo.models.losses import replaced_token_loss
from zoo.models.pretrainers import ElectraPretrainer
from zoo.models.pretrainers import MaskedLMPretrainer
from zoo.models.pretrainers import ReplacedTokenSampler
from zoo.models.pretrainers import masked_lm_loss
from zoo.models.transformer_encoder import TransformerEncoder

__all__ = [
    "ElectraPretrainer",
    "FunnelEncoder",
    "MaskedLMHead",
    "MaskedLMPretrainer",
    "MultipleChoice",
    "ReplacedTokenSampler",
    "SequenceClassifier",
    "SpanQA",
    "TextEmbedder",
    "TokenClassifier",
    "TransformerEncoder",
    "masked_lm_loss",
    "replaced_token_loss",
]

"""`TransformerConfig`: the Transformer encoder family's arguments (BERT's Post-LN, Pre-LN, RealFormer,
ALBERT's sharing, the relative and local-attention variants), documented, defaulted and checked once.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from zoo.choices import ABSOLUTE
from zoo.choices import LAYER_SHARING
from zoo.choices import POSITION_ENCODINGS
from zoo.choices import SHIFT
from zoo.choices import check_choice
from zoo.configs.encoder import EncoderConfig
from zoo.configs.encoder import check_local_attention


@dataclasses.dataclass(frozen=True)
class TransformerConfig(EncoderConfig):
  """A stack of Transformer blocks over token embeddings, BERT's encoder interface.

  - Post-LN (BERT, Devlin et al., 2019): the default.
  - Pre-LN (Xiong et al., 2020): `norm_first=True`; a final layer norm is added.
  - RealFormer (Liu et al., 2021): `residual_attention=True`, with `running_mean=True` for the
    paper's deep (36-layer) models.
  - ALBERT (Lan et al., 2020): `embedding_width` below the width, `layer_sharing="all"`.
  - Absolute positions (learned table) or Transformer-XL relative attention
    (`position_encoding="factorized"` or `"shift"`) with the relative segment term, as in the
    Funnel paper's Transformer baselines; [cls] gets segment id 2 there.

  Args:
    vocab_size: number of word ids.
    hidden_size, num_layers, num_heads, intermediate_size: model width D, depth, heads and
      feed-forward width.
    activation: feed-forward activation (`zoo.choices.ACTIVATION_NAMES`; Google's TF1 BERT
      "gelu" is "gelu_approximate").
    dropout, attention_dropout: hidden and attention-probability dropout rates.
    max_sequence_length: size of the absolute position table.
    type_vocab_size: number of token types (absolute positions only).
    embedding_width: embedding width E, projected to D when different (default D).
    norm_first: Pre-LN.
    residual_attention, running_mean: RealFormer.
    position_encoding: "absolute", "factorized" or "shift" (`zoo.choices.POSITION_ENCODINGS`).
    layer_norm_epsilon: epsilon of every layer norm.
    initializer_range: stddev of the truncated-normal initializer.
    seq_length: static sequence length of the inputs (None for any; "shift" and local attention
      need it).
    output_attention_probs: also return each layer's attention probabilities.
    layer_sharing: cross-layer sharing (ALBERT, `zoo.choices.LAYER_SHARING`): "none", "all" (the
      first layer at every depth), "attention" or "ffn" (the first layer's attention or
      feed-forward net in every layer).
    attention_window: block-local attention: each query attends to the keys at most this many
      positions away, computed by blocks without a `[T, T]` tensor (`zoo.windows`, DESIGN.md
      Section 9); None (the default) for full attention. Each layer's `attention_probs` then is a
      pair: the global rows and the blocks.
    global_tokens: with `attention_window`, the leading tokens ([cls] at least) that attend to and
      are attended by every position.

  Example:
    >>> config = TransformerConfig(vocab_size=100, hidden_size=32, num_layers=2, num_heads=4)
    >>> config.replace(residual_attention=True).to_dict()["residual_attention"]
    True
    >>> TransformerConfig(vocab_size=100, hidden_size=30, num_heads=4)
    Traceback (most recent call last):
    ...
    ValueError: hidden_size (30) must be a multiple of num_heads (4)
  """

  family: ClassVar[str] = "transformer"
  encoder_name: ClassVar[str] = "TransformerEncoder"

  vocab_size: int
  hidden_size: int = 768
  num_layers: int = 12
  num_heads: int = 12
  intermediate_size: int = 3072
  activation: str = "gelu"
  dropout: float = 0.1
  attention_dropout: float = 0.1
  max_sequence_length: int = 512
  type_vocab_size: int = 2
  embedding_width: int | None = None
  norm_first: bool = False
  residual_attention: bool = False
  running_mean: bool = False
  position_encoding: str = ABSOLUTE
  layer_norm_epsilon: float = 1e-12
  initializer_range: float = 0.02
  seq_length: int | None = None
  output_attention_probs: bool = False
  layer_sharing: str = "none"
  attention_window: int | None = None
  global_tokens: int = 1

  def __post_init__(self) -> None:
    check_choice("position_encoding", self.position_encoding, POSITION_ENCODINGS)
    check_choice("layer_sharing", self.layer_sharing, LAYER_SHARING)
    check_local_attention(self.attention_window, self.global_tokens)
    if self.running_mean and not self.residual_attention:
      raise ValueError("running_mean=True needs residual_attention=True")
    if self.attention_window is not None and self.seq_length is None:
      raise ValueError("local attention (attention_window) needs a static seq_length")
    if self.position_encoding == ABSOLUTE and self.seq_length and self.seq_length > self.max_sequence_length:
      raise ValueError(f"seq_length {self.seq_length} exceeds max_sequence_length "
                       f"{self.max_sequence_length}, the size of the absolute position table: raise "
                       "max_sequence_length (the table grows, and a checkpoint's smaller table no longer "
                       "fits) or use a relative position_encoding")
    if self.hidden_size % self.num_heads:
      raise ValueError(f"hidden_size ({self.hidden_size}) must be a multiple of num_heads ({self.num_heads})")
    if self.position_encoding == SHIFT and self.seq_length is None:
      raise ValueError("position_encoding='shift' needs a static seq_length")

  @property
  def relative(self) -> bool:
    """Relative attention (with the relative segment term) instead of an absolute position table."""
    return self.position_encoding != ABSOLUTE

  @property
  def head_size(self) -> int:
    return self.hidden_size // self.num_heads

  def length_problem(self, length: int) -> str | None:
    if length < 1:
      return f"a sequence needs at least 1 token, got {length}"
    maximum = self.max_sequence_length
    if self.position_encoding == ABSOLUTE and length > maximum:
      return (f"{length} tokens exceed max_sequence_length {maximum}, the size of the absolute position "
              f"table: the encoder takes 1 to {maximum} tokens")
    return None

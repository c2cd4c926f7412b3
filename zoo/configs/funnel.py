"""`FunnelConfig`: the Funnel-Transformer family's arguments (Dai et al., 2020), documented, defaulted and
checked once, with the static lengths and grids both editions derive from them.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from zoo.choices import AUTHORS_TF_POSITIONS
from zoo.choices import CARRY_AT_POOLING
from zoo.choices import FACTORIZED
from zoo.choices import LAYER_SHARING
from zoo.choices import POOLING_TYPES
from zoo.choices import POSITION_RULES
from zoo.choices import RECORDED_POOLING_NAMES
from zoo.choices import RELATIVE_POSITION_ENCODINGS
from zoo.choices import WINDOW_START_POSITIONS
from zoo.choices import ZOO_POOLING
from zoo.choices import check_choice
from zoo.choices import check_pooling_semantics
from zoo.configs.encoder import EncoderConfig
from zoo.configs.encoder import check_local_attention
from zoo.grids import block_lengths
from zoo.length_buckets import funnel_capacity


@dataclasses.dataclass(frozen=True)
class FunnelConfig(EncoderConfig):
  """Funnel-Transformer: blocks of relative-attention layers with pooling in between.

  Between blocks the sequence is pooled with stride 2; with `pool_q_only` the first layer of a
  pooled block takes pooled queries and attends to the unpooled keys (Sec. 2.2). Layers may be
  shared across repeats: blocks `(6, 3, 3)` with repeats `(1, 2, 2)` is the paper's B6-3x2-3x2;
  each layer runs its repeats back to back. With `num_decoder_layers > 0` the last block is
  upsampled back to full length, the output of block 0 is added, and full-length decoder layers
  follow (Sec. 2.3), for token-level tasks.

  Relative attention follows appendix A.2 (factorized by default), with the relative segment term
  where [cls] (the first token, given segment id 2 whatever its input type id) belongs to every
  segment. Optional RealFormer residual attention runs through the encoder: at a block boundary
  the carry is pooled with the hidden states (`carry_at_pooling="pool"`) or restarted (`"reset"`).

  Padding (`pooling_semantics`, `zoo.choices`): with the zoo's (the default) a pooled token is
  real when any token of its window is, and mean and max pooling read only the real tokens, so
  outputs at real positions do not depend on padding (but for a text that nearly fills one length
  and not another, with `truncate_seq`: DESIGN.md, "Masks"). With Hugging Face's ("huggingface":
  its port, its Funnel checkpoints, the presets) a pooled token is real only when every token of
  its window is, and pooling runs over the whole window. With the authors' ("funnel_authors":
  their TensorFlow and PyTorch code, the paper's checkpoints as `zoo.convert funnel-tf` converts
  them) a pooled token is real when any token of its window is, and pooling runs over the whole
  window. The residual-attention carry is pooled the same way.

  Args:
    vocab_size: number of word ids.
    hidden_size: model width D.
    block_sizes: layers per block.
    block_repeats: how often each block's layers run (weights shared); default 1s.
    num_heads, head_size: attention heads and their width (default D / heads).
    intermediate_size, activation: feed-forward width and activation.
    dropout, attention_dropout, activation_dropout: dropout rates.
    embedding_width: embedding width, projected to D when different (default D).
    pooling_type: "mean" or "max" (`zoo.choices.POOLING_TYPES`).
    pooling_semantics: what a pooling window does with padding, "zoo", "huggingface" or
      "funnel_authors" (`zoo.choices.POOLING_SEMANTICS`). A recorded config's "authors" (the name
      Hugging Face's semantics had before) loads as "huggingface" (`from_dict`); passed here it is
      refused as ambiguous.
    pool_q_only: pool only the queries of a pooled block's first layer.
    separate_cls: keep [cls] out of the pooling (and out of the relative terms).
    truncate_seq: drop the last token before pooling, so lengths halve exactly.
    position_encoding: "factorized" or "shift" (`zoo.choices.RELATIVE_POSITION_ENCODINGS`).
    position_rules: where the relative terms place token 0 and pooled tokens without
      `separate_cls` (with it both agree; `zoo.choices.POSITION_RULES`): "window_start" (a pooled
      token at its window's first token; Hugging Face, the authors' PyTorch code) or "authors_tf"
      (the authors' TensorFlow code: token 0's position and segment terms are zeroed, and the
      shift form places block b's pooled queries at 1 - 2^b + 2^b·i).
    use_segment_bias: the relative segment term.
    num_decoder_layers: full-length layers after upsampling; 0 for no decoder.
    decoder_residual_layer: 0-based index of the encoder layer application (counting repeats)
      whose output is added before the decoder; default the last of block 0.
    residual_attention, running_mean: RealFormer residual attention in the encoder.
    carry_at_pooling: "pool" or "reset" the residual carry at block boundaries.
    layer_norm_epsilon: epsilon of every layer norm.
    initializer_range: stddev of the truncated-normal initializer.
    seq_length: static input length.
    output_attention_probs: also return each layer's attention probabilities.
    layer_sharing: cross-layer sharing (ALBERT, `zoo.choices.LAYER_SHARING`): "none", "all", "attention"
      or "ffn" (the decoder's layers never are).
    attention_window: block-local attention in every layer, decoder included (`zoo.windows`,
      DESIGN.md Section 9): W tokens on each side of a query, counted in the block's own sequence
      (so a window widens with every pooling); a pool-query-only layer counts W of its unpooled
      keys. None (the default) for full attention. With `residual_attention` the carry cannot be
      pooled: it needs `carry_at_pooling="reset"` and `pool_q_only=False`.
    global_tokens: with `attention_window`, the leading tokens of every layer's sequence ([cls] at
      least) that attend to and are attended by every position.

  Example:
    >>> config = FunnelConfig(vocab_size=100, block_sizes=(2, 2, 2), num_decoder_layers=2, seq_length=128)
    >>> config.block_lengths(), config.full_length_output
    ((128, 64, 32), True)
    >>> FunnelConfig.from_dict(dict(config.to_dict(), pooling_semantics="authors")).pooling_semantics
    'huggingface'
  """

  family: ClassVar[str] = "funnel"
  encoder_name: ClassVar[str] = "FunnelEncoder"
  RECORDED_NAMES: ClassVar[dict] = {"pooling_semantics": RECORDED_POOLING_NAMES}
  masked_lm_transform: ClassVar[bool] = False   # Funnel's masked-LM head reads the decoder's states

  vocab_size: int
  hidden_size: int = 768
  block_sizes: tuple[int, ...] = (6, 6, 6)
  block_repeats: tuple[int, ...] | None = None
  num_heads: int = 12
  head_size: int | None = None
  intermediate_size: int = 3072
  activation: str = "gelu_approximate"
  dropout: float = 0.1
  attention_dropout: float = 0.1
  activation_dropout: float = 0.0
  embedding_width: int | None = None
  pooling_type: str = "mean"
  pooling_semantics: str = ZOO_POOLING
  pool_q_only: bool = True
  separate_cls: bool = True
  truncate_seq: bool = True
  position_encoding: str = FACTORIZED
  position_rules: str = WINDOW_START_POSITIONS
  use_segment_bias: bool = True
  num_decoder_layers: int = 0
  decoder_residual_layer: int | None = None
  residual_attention: bool = False
  running_mean: bool = False
  carry_at_pooling: str = "pool"
  layer_norm_epsilon: float = 1e-9
  initializer_range: float = 0.1
  seq_length: int = 512
  output_attention_probs: bool = False
  layer_sharing: str = "none"
  attention_window: int | None = None
  global_tokens: int = 1

  def __post_init__(self) -> None:
    object.__setattr__(self, "block_sizes", tuple(self.block_sizes))
    object.__setattr__(self, "block_repeats",
                       tuple(self.block_repeats) if self.block_repeats else (1,) * len(self.block_sizes))
    check_choice("pooling_type", self.pooling_type, POOLING_TYPES)
    check_pooling_semantics("pooling_semantics", self.pooling_semantics)
    check_choice("position_rules", self.position_rules, POSITION_RULES)
    check_choice("carry_at_pooling", self.carry_at_pooling, CARRY_AT_POOLING)
    check_choice("position_encoding", self.position_encoding, RELATIVE_POSITION_ENCODINGS)
    check_choice("layer_sharing", self.layer_sharing, LAYER_SHARING)
    if len(self.repeats) != len(self.block_sizes):
      raise ValueError(f"block_repeats {self.block_repeats} must have one entry per block "
                       f"of block_sizes {self.block_sizes}")
    if not self.seq_length:
      raise ValueError("FunnelEncoder needs a static seq_length")
    lengths = self.block_lengths()
    if lengths[-1] < 2:
      raise ValueError(f"seq_length {self.seq_length} is too short for {len(self.block_sizes)} blocks "
                       f"(lengths {list(lengths)}): at least {self.shortest_length()}")
    check_local_attention(self.attention_window, self.global_tokens)
    pooled = len(self.block_sizes) > 1
    if self.attention_window is not None and self.residual_attention and pooled:
      if self.carry_at_pooling == "pool":
        raise ValueError(
            "local attention (attention_window) with residual_attention cannot pool the carry "
            "(carry_at_pooling='pool'): a pooled block's window spans pairs of the block below that no "
            "window scored, so the pooled carry would not be the full one; use carry_at_pooling='reset' (and "
            "pool_q_only=False)")
      if self.pool_q_only:
        raise ValueError(
            "local attention (attention_window) with residual_attention and pool_q_only: the pool-query-only "
            "layer's carry (pooled queries, unpooled keys) would have to be pooled to the next layer's keys, "
            "which spans pairs its windows never scored; use pool_q_only=False with carry_at_pooling='reset'")
    index = self.decoder_residual_layer
    if index is not None and not 0 <= index < self.layer_applications:
      raise ValueError(f"decoder_residual_layer must be in [0, {self.layer_applications}), got {index}")

  # Derived values both editions read.
  @property
  def repeats(self) -> tuple[int, ...]:
    """`block_repeats` as set (1s when not given)."""
    assert self.block_repeats is not None   # __post_init__ fills it
    return self.block_repeats

  @property
  def attention_head_size(self) -> int:
    """Each head's width: `head_size`, default D / heads."""
    return self.head_size or self.hidden_size // self.num_heads

  @property
  def layer_applications(self) -> int:
    """How many layer applications the encoder's blocks run (repeats counted)."""
    return sum(size * repeat for size, repeat in zip(self.block_sizes, self.repeats, strict=True))

  @property
  def decoder_residual_index(self) -> int:
    """The layer application whose output the decoder adds: `decoder_residual_layer`, default block 0's
    last."""
    if self.decoder_residual_layer is not None:
      return self.decoder_residual_layer
    return self.block_sizes[0] * self.repeats[0] - 1

  @property
  def upsampling_stride(self) -> int:
    """How many full-length tokens a token of the last block stands for (the decoder's upsampling)."""
    return 2 ** (len(self.block_sizes) - 1)

  @property
  def cls_terms_zeroed(self) -> bool:
    """Whether attention zeroes the relative terms of token 0's pairs: with `separate_cls`, and always under
    the authors' TensorFlow rules."""
    return self.separate_cls or self.position_rules == AUTHORS_TF_POSITIONS

  @property
  def full_length_output(self) -> bool:
    """A decoder brings the sequence back to full length; an encoder-only Funnel pools it away."""
    return self.num_decoder_layers > 0

  @property
  def built_length(self) -> int:
    return self.seq_length

  def block_lengths(self, length: int | None = None) -> tuple[int, ...]:
    """Each block's sequence length for inputs of `length` tokens (default `seq_length`)."""
    return tuple(block_lengths(length or self.seq_length, len(self.block_sizes), self.separate_cls,
                               self.truncate_seq))

  def shortest_length(self) -> int:
    """The fewest tokens the encoder runs on: its last block keeps 2."""
    length = 2
    while self.block_lengths(length)[-1] < 2:
      length += 1
    return length

  def length_problem(self, length: int) -> str | None:
    shortest = self.shortest_length()
    if length < shortest:
      return (f"{length} tokens are too few for {len(self.block_sizes)} blocks (lengths "
              f"{list(self.block_lengths(length))}): the encoder takes {shortest} tokens or more (relative "
              "positions: no maximum)")
    return None

  def padding_dependence(self) -> str | None:
    if self.pooling_semantics == ZOO_POOLING:
      return None
    return (f"pooling_semantics={self.pooling_semantics!r} pools padding into the windows that hold the last "
            "real tokens (mean and max run over whole windows), so a length holds only the texts whose "
            f"windows it holds whole, fewer than under pooling_semantics={ZOO_POOLING!r}, which reads only "
            "real tokens")

  def bucket_capacity(self, length: int) -> int:
    return funnel_capacity(length, self.seq_length, num_blocks=len(self.block_sizes),
                           separate_cls=self.separate_cls, truncate_seq=self.truncate_seq,
                           decoder=self.full_length_output, semantics=self.pooling_semantics)

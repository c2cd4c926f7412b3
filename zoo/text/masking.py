"""Masked-LM inputs from packed encoder inputs (BERT, Devlin et al., 2019, Sec. 3.1 and Appendix A.1).

Axes: B batch, T sequence length, W words in a row, P predictions per sequence
(`max_predictions_per_seq`), V vocabulary size.

In each sequence, `n` real tokens can be selected (not padding, not one of
`unselectable_ids`: by default all special tokens). BERT's budget is
`min(P, max(1, round(selection_rate · n)))` tokens (0 when `n = 0`). Items — tokens, or
whole words with `whole_word` — are visited in a random order and each is selected
when it still fits the budget (a word that would overflow it is skipped, as in BERT's
`create_pretraining_data.py`), so token-level selection takes exactly the budget.
Each selected token independently becomes `[MASK]` (`mask_token_rate`, 80%), a token
drawn uniformly from the whole vocabulary (`random_token_rate`, 10%) or stays as it
is (the rest).

Everything is dense core TensorFlow on `[B, T]` tensors (no tensorflow-text op, no
ragged tensor), so the masker runs in the input pipeline of a TPU pod host, whose
TensorFlow server has only core ops, and its shapes are static. Randomness is stateless:
with a `seed`, the output is a pure function of the inputs and the seed.

Outputs follow Model Garden's pre-training data (and `zoo.models.pretrainers`):
`masked_lm_positions` int32 `[B, P]` ascending within a row, `masked_lm_ids` int32
`[B, P]` (the original tokens), `masked_lm_weights` float32 `[B, P]` (1 for a real
prediction; 0, position 0 and id 0 for padding), and `input_word_ids` with the
replacements applied.
"""

from collections.abc import Mapping
from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import Any
from typing import TypeAlias

import numpy as np
import tensorflow as tf

if TYPE_CHECKING:
  from zoo.text.tokenizer import PackingEncoder

# A seed as `MaskedLMMasker` takes it: None (random), an int, or int `[2]` (a list or a tensor).
Seed: TypeAlias = int | Sequence[int] | tf.Tensor | None

# Sorts after every uniform [0, 1) score: items that cannot be selected go last.
_NOT_SELECTABLE = 2.0


def _stateless_seeds(seed: Seed, count: int) -> list[tf.Tensor]:
  """`count` independent stateless seeds int64 `[2]` from `seed` (int, `[2]` ints or None = random)."""
  if seed is None:
    seed = tf.random.uniform([2], maxval=tf.int64.max, dtype=tf.int64)
  pair = tf.cast(tf.convert_to_tensor(seed), tf.int64)
  if pair.shape.rank == 0:
    pair = tf.stack([pair, tf.zeros([], tf.int64)])
  pair.shape.assert_is_compatible_with([2])
  return tf.unstack(tf.random.experimental.stateless_split(pair, count))


def _take_greedily(sorted_sizes: tf.Tensor, budget: tf.Tensor) -> tf.Tensor:
  """bool `[B, W]`: visit items in order, take each that still fits the budget (BERT skips the rest)."""
  # carry: tokens taken so far [B] and the previous decision
  def step(carry: tuple[tf.Tensor, tf.Tensor], sizes: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    total, _ = carry
    take = (sizes > 0) & (total + sizes <= budget)
    return total + tf.where(take, sizes, 0), take

  batch = tf.shape(sorted_sizes)[0]
  # One extra empty column, so that an all-empty batch still has a column to scan.
  columns = tf.transpose(tf.pad(sorted_sizes, [[0, 0], [0, 1]]))   # [W + 1, B]
  _, taken = tf.scan(step, columns, initializer=(tf.zeros([batch], tf.int32), tf.zeros([batch], tf.bool)))
  return tf.transpose(taken)[:, :-1]


class MaskedLMMasker:
  """Chooses masked-LM predictions in packed encoder inputs and corrupts them (BERT's MLM).

  Reads `input_word_ids` and `input_mask` int `[B, T]` (padding at the end, as
  `TextEncoder.encode` packs them) and returns the features with `input_word_ids`
  corrupted plus `masked_lm_positions`, `masked_lm_ids` int32 `[B, P]` and
  `masked_lm_weights` float32 `[B, P]`; see the module docstring for the procedure.
  Works eagerly, in `tf.function` and in `tf.data.Dataset.map`.

  Args:
    vocab_size: V; random replacements are drawn from `[0, V)`.
    mask_id: the id of `[MASK]`.
    unselectable_ids: ids never selected (e.g. `[CLS]`, `[SEP]`, `[PAD]`).
    max_predictions_per_seq: P.
    selection_rate: the share of selectable tokens to predict (BERT: 0.15).
    mask_token_rate: the share of predictions replaced by `[MASK]` (0.8).
    random_token_rate: the share replaced by a random token (0.1).
    whole_word: select whole words: all pieces of a word or none (each selected piece
      still draws its own replacement). A word is a piece that is not a suffix piece
      (`##…`), or follows a special token, with the suffix pieces after it. Needs
      `is_continuation`.
    is_continuation: bool `[V]`, True for suffix pieces (`TextEncoder.is_continuation`).

  Call arguments:
    features: dict with `input_word_ids` and `input_mask` `[B, T]`; other keys pass through.
    seed: None (random each call), an int, or int `[2]` (may be a tensor, e.g. from
      `Dataset.enumerate()`): the same seed and inputs give the same output.

  Example:

  >>> masker = MaskedLMMasker(vocab_size=10, mask_id=4, unselectable_ids=[0, 2, 3],
  ...                         max_predictions_per_seq=2, selection_rate=0.5, mask_token_rate=1.0,
  ...                         random_token_rate=0.0)
  >>> features = dict(input_word_ids=tf.constant([[2, 5, 6, 7, 3, 0]]),
  ...                 input_mask=tf.constant([[1, 1, 1, 1, 1, 0]]))
  >>> out = masker(features, seed=1)
  >>> out["masked_lm_weights"].numpy()
  array([[1., 1.]], dtype=float32)
  >>> ids, positions = out["input_word_ids"].numpy(), out["masked_lm_positions"].numpy()
  >>> bool((ids[0, positions[0]] == 4).all()), int((ids == 4).sum())
  (True, 2)
  """

  def __init__(self, *, vocab_size: int, mask_id: int, unselectable_ids: Sequence[int],
               max_predictions_per_seq: int, selection_rate: float = 0.15, mask_token_rate: float = 0.8,
               random_token_rate: float = 0.1, whole_word: bool = False,
               is_continuation: Sequence[bool] | np.ndarray | None = None) -> None:
    if not 0 <= mask_id < vocab_size:
      raise ValueError(f"mask_id must be an id in [0, vocab_size={vocab_size}), got {mask_id}")
    if max_predictions_per_seq < 1:
      raise ValueError(f"max_predictions_per_seq must be at least 1, got {max_predictions_per_seq}")
    if not 0 < selection_rate <= 1:
      raise ValueError(f"selection_rate must be in (0, 1], got {selection_rate}")
    if not (0 <= mask_token_rate and 0 <= random_token_rate and mask_token_rate + random_token_rate <= 1):
      raise ValueError("mask_token_rate and random_token_rate must be >= 0 with a sum <= 1, got "
                       f"{mask_token_rate} and {random_token_rate}")
    if whole_word:
      if is_continuation is None:
        raise ValueError("whole_word=True needs is_continuation (bool [vocab_size]); "
                         "use MaskedLMMasker.from_encoder(encoder, ...)")
      is_continuation = np.asarray(is_continuation, dtype=bool)
      if is_continuation.shape != (vocab_size,):
        raise ValueError(f"is_continuation must have shape [vocab_size] = [{vocab_size}], "
                         f"got {list(is_continuation.shape)}")
    self.vocab_size = int(vocab_size)
    self.mask_id = int(mask_id)
    self.unselectable_ids = sorted({int(i) for i in unselectable_ids})
    self.max_predictions_per_seq = int(max_predictions_per_seq)
    self.selection_rate = float(selection_rate)
    self.mask_token_rate = float(mask_token_rate)
    self.random_token_rate = float(random_token_rate)
    self.whole_word = bool(whole_word)
    self.is_continuation = is_continuation if whole_word else None

  @classmethod
  def from_encoder(cls, encoder: "PackingEncoder", *, max_predictions_per_seq: int,
                   **kwargs: Any) -> "MaskedLMMasker":
    """A masker for a `TextEncoder`'s vocabulary; its special tokens are never selected."""
    kwargs.setdefault("unselectable_ids", list(encoder.special_ids.values()))
    return cls(vocab_size=encoder.vocab_size, mask_id=encoder.mask_id,
               max_predictions_per_seq=max_predictions_per_seq, is_continuation=encoder.is_continuation,
               **kwargs)

  def __call__(self, features: Mapping[str, Any], seed: Seed = None) -> dict[str, tf.Tensor]:
    missing = [key for key in ("input_word_ids", "input_mask") if key not in features]
    if missing:
      raise ValueError(f"MaskedLMMasker needs the features {missing} (as TextEncoder.encode returns)")
    with tf.name_scope("masked_lm_masker"):
      word_ids = tf.convert_to_tensor(features["input_word_ids"])   # [B, T]
      ids = tf.cast(word_ids, tf.int32)
      real = tf.cast(features["input_mask"], tf.bool)   # [B, T]
      batch, length = tf.shape(ids)[0], tf.shape(ids)[1]
      selection_seed, decision_seed, token_seed = _stateless_seeds(seed, 3)

      unselectable = tf.constant(self.unselectable_ids, tf.int32, shape=[len(self.unselectable_ids)])
      special = tf.reduce_any(tf.equal(ids[:, :, None], unselectable), axis=2) | ~real   # [B, T]
      if self.whole_word:
        # A word: a piece that is not a suffix piece, or follows a special token, and the suffix
        # pieces after it. Special tokens (and padding) are items of their own.
        continuation = tf.gather(tf.constant(self.is_continuation),
                                 tf.clip_by_value(ids, 0, self.vocab_size - 1))
        after_special = tf.pad(special[:, :-1], [[0, 0], [1, 0]], constant_values=True)
        starts = ~continuation | special | after_special
      else:
        starts = tf.ones_like(real)
      item = tf.cumsum(tf.cast(starts, tf.int32), axis=1) - 1   # [B, T] item index of each token
      # Per item (W = T slots): its tokens, and whether all of them are selectable.
      rows = tf.range(batch)[:, None] * length + item   # [B, T] flat item slot
      tokens = tf.math.unsorted_segment_sum(tf.cast(real, tf.int32), rows, batch * length)
      blocked = tf.math.unsorted_segment_sum(tf.cast(special, tf.int32), rows, batch * length)
      sizes = tf.reshape(tf.where((tokens > 0) & (blocked == 0), tokens, 0), [batch, length])   # [B, W]
      selectable_tokens = tf.reduce_sum(sizes, axis=1)   # [B]
      budget = tf.maximum(1, tf.cast(tf.round(self.selection_rate * tf.cast(selectable_tokens, tf.float32)),
                                     tf.int32))
      budget = tf.where(selectable_tokens > 0, tf.minimum(budget, self.max_predictions_per_seq), 0)   # [B]

      scores = tf.random.stateless_uniform([batch, length], seed=selection_seed)
      scores = tf.where(sizes > 0, scores, _NOT_SELECTABLE)
      order = tf.argsort(scores, axis=1, stable=True)   # a random order of the selectable items first
      sorted_sizes = tf.gather(sizes, order, batch_dims=1)
      if self.whole_word:
        taken = _take_greedily(sorted_sizes, budget)
      else:   # every item is one token: the first `budget` of the order
        taken = (sorted_sizes > 0) & (tf.cumsum(sorted_sizes, axis=1) <= budget[:, None])
      taken = tf.gather(taken, tf.argsort(order, axis=1), batch_dims=1)   # [B, W] back to item order
      selected = tf.gather(taken, item, batch_dims=1) & ~special   # [B, T]

      # Replacements, drawn per token: [MASK] / a random token / unchanged.
      draw = tf.random.stateless_uniform([batch, length], seed=decision_seed)
      random_tokens = tf.random.stateless_uniform([batch, length], seed=token_seed, minval=0,
                                                  maxval=self.vocab_size, dtype=tf.int32)
      values = tf.where(draw < self.mask_token_rate, self.mask_id,
                        tf.where(draw < self.mask_token_rate + self.random_token_rate, random_tokens, ids))
      masked_word_ids = tf.where(selected, tf.cast(values, word_ids.dtype), word_ids)

      # The first P selected positions in ascending order (there are at most P), padded with 0.
      positions_range = tf.range(length)[None, :]
      key = tf.where(selected, positions_range, length + positions_range)
      predictions = self.max_predictions_per_seq
      key = tf.pad(key, [[0, 0], [0, tf.maximum(0, predictions - length)]], constant_values=2 * length)
      _, chosen = tf.math.top_k(-key, k=predictions)   # [B, P] smallest keys first
      weights = tf.gather(tf.pad(selected, [[0, 0], [0, tf.maximum(0, predictions - length)]]), chosen,
                          batch_dims=1)
      positions = tf.where(weights, chosen, 0)
      original = tf.where(weights, tf.gather(ids, tf.minimum(chosen, length - 1), batch_dims=1), 0)

      outputs = dict(features)
      outputs.update(input_word_ids=masked_word_ids, masked_lm_positions=positions, masked_lm_ids=original,
                     masked_lm_weights=tf.cast(weights, tf.float32))
      for key_name in ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights"):
        outputs[key_name].set_shape([word_ids.shape[0], self.max_predictions_per_seq])
      masked_word_ids.set_shape(word_ids.shape)
      return outputs

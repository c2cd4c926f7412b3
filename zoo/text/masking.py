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

Selection and replacement run through tensorflow-text's `mask_language_model` with an
`ItemSelector` and a `MaskValuesChooser` subclass whose randomness is stateless: with a
`seed`, the output is a pure function of the inputs and the seed.

Outputs follow Model Garden's pre-training data (and `zoo.models.pretrainers`):
`masked_lm_positions` int32 `[B, P]` ascending within a row, `masked_lm_ids` int32
`[B, P]` (the original tokens), `masked_lm_weights` float32 `[B, P]` (1 for a real
prediction; 0, position 0 and id 0 for padding), and `input_word_ids` with the
replacements applied.
"""

from collections.abc import Sequence

import numpy as np
import tensorflow as tf
import tensorflow_text as text

from zoo.text.tokenizer import word_starts

# Sorts after every uniform [0, 1) score: items that cannot be selected go last.
_NOT_SELECTABLE = 2.0


def _stateless_seeds(seed, count):
  """`count` independent stateless seeds int64 `[2]` from `seed` (int, `[2]` ints or None = random)."""
  if seed is None:
    seed = tf.random.uniform([2], maxval=tf.int64.max, dtype=tf.int64)
  seed = tf.cast(tf.convert_to_tensor(seed), tf.int64)
  if seed.shape.rank == 0:
    seed = tf.stack([seed, tf.zeros([], tf.int64)])
  seed.shape.assert_is_compatible_with([2])
  return tf.unstack(tf.random.experimental.stateless_split(seed, count))


class _BudgetedRandomSelector(text.RandomItemSelector):
  """Selects random items of `[B, (W), (pieces)]` ids up to BERT's per-row budget of tokens.

  Keeps `RandomItemSelector`'s arguments and `get_selectable` (unselectable ids; an item
  is selectable when all its pieces are) but counts the budget in tokens and draws
  stateless random numbers.
  """

  def __init__(self, *, unselectable_ids, selection_rate, max_selections, skip_overflow, seed):
    super().__init__(max_selections, selection_rate, unselectable_ids=unselectable_ids)
    self._skip_overflow = skip_overflow
    self._seed = seed

  def get_selection_mask(self, input_ids, axis=1):
    if axis != 1 or input_ids.ragged_rank != 2:
      raise ValueError("the selector reads [batch, (items), (pieces)] ids along axis 1")
    selectable = self.get_selectable(input_ids, axis)   # bool [B, (W)]
    sizes = tf.where(selectable.flat_values, tf.cast(input_ids.row_lengths(axis=2).flat_values, tf.int32), 0)
    sizes = selectable.with_flat_values(sizes)   # [B, (W)] tokens per item, 0 if not selectable
    tokens = tf.reduce_sum(sizes, axis=1)   # [B] selectable tokens
    budget = tf.maximum(1, tf.cast(tf.round(self.selection_rate * tf.cast(tokens, tf.float32)), tf.int32))
    budget = tf.where(tokens > 0, tf.minimum(budget, self.max_selections_per_batch), 0)   # [B]

    scores = tf.random.stateless_uniform(tf.shape(selectable.flat_values), seed=self._seed)
    scores = tf.where(selectable.flat_values, scores, _NOT_SELECTABLE)
    scores = selectable.with_flat_values(scores).to_tensor(default_value=_NOT_SELECTABLE)   # [B, W]
    order = tf.argsort(scores, axis=1, stable=True)   # a random order of the selectable items first
    sorted_sizes = tf.gather(sizes.to_tensor(), order, batch_dims=1)   # [B, W]
    if self._skip_overflow:
      taken = self._take_greedily(sorted_sizes, budget)
    else:   # every item is one token: the first `budget` of the order
      taken = (sorted_sizes > 0) & (tf.cumsum(sorted_sizes, axis=1) <= budget[:, None])
    taken = tf.gather(taken, tf.argsort(order, axis=1), batch_dims=1)   # back to item order
    return tf.RaggedTensor.from_tensor(taken, lengths=selectable.row_lengths())

  @staticmethod
  def _take_greedily(sorted_sizes, budget):
    """bool `[B, W]`: visit items in order, take each that still fits the budget."""
    def step(carry, sizes):   # carry: tokens taken so far [B] and the previous decision
      total, _ = carry
      take = (sizes > 0) & (total + sizes <= budget)
      return total + tf.where(take, sizes, 0), take

    batch = tf.shape(sorted_sizes)[0]
    # One extra empty column, so that an all-empty batch still has a column to scan.
    columns = tf.transpose(tf.pad(sorted_sizes, [[0, 0], [0, 1]]))   # [W + 1, B]
    _, taken = tf.scan(step, columns, initializer=(tf.zeros([batch], tf.int32), tf.zeros([batch], tf.bool)))
    return tf.transpose(taken)[:, :-1]


class _StatelessMaskValuesChooser(text.MaskValuesChooser):
  """`MaskValuesChooser` with stateless randomness: [MASK] / random token / unchanged."""

  def __init__(self, *, vocab_size, mask_token, mask_token_rate, random_token_rate, seed):
    super().__init__(vocab_size, mask_token, mask_token_rate=mask_token_rate,
                     random_token_rate=random_token_rate)
    self._seed = seed

  def get_mask_values(self, masked_lm_ids):
    decision_seed, token_seed = tf.unstack(tf.random.experimental.stateless_split(self._seed, 2))
    original = masked_lm_ids.flat_values
    draw = tf.random.stateless_uniform(tf.shape(original), seed=decision_seed)
    random_tokens = tf.random.stateless_uniform(tf.shape(original), seed=token_seed, minval=0,
                                                maxval=self.vocab_size, dtype=original.dtype)
    replace_randomly = draw < self._mask_token_rate + self.random_token_rate
    values = tf.where(draw < self._mask_token_rate, tf.cast(self.mask_token, original.dtype),
                      tf.where(replace_randomly, random_tokens, original))
    return masked_lm_ids.with_flat_values(values)


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
               is_continuation: Sequence[bool] | np.ndarray | None = None):
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
  def from_encoder(cls, encoder, *, max_predictions_per_seq: int, **kwargs) -> "MaskedLMMasker":
    """A masker for a `TextEncoder`'s vocabulary; its special tokens are never selected."""
    kwargs.setdefault("unselectable_ids", list(encoder.special_ids.values()))
    return cls(vocab_size=encoder.vocab_size, mask_id=encoder.mask_id,
               max_predictions_per_seq=max_predictions_per_seq, is_continuation=encoder.is_continuation,
               **kwargs)

  def __call__(self, features, seed=None) -> dict[str, tf.Tensor]:
    missing = [key for key in ("input_word_ids", "input_mask") if key not in features]
    if missing:
      raise ValueError(f"MaskedLMMasker needs the features {missing} (as TextEncoder.encode returns)")
    with tf.name_scope("masked_lm_masker"):
      word_ids = tf.convert_to_tensor(features["input_word_ids"])   # [B, T]
      real = tf.cast(features["input_mask"], tf.bool)   # [B, T]
      selection_seed, values_seed = _stateless_seeds(seed, 2)
      tokens = tf.RaggedTensor.from_tensor(word_ids, lengths=tf.reduce_sum(tf.cast(real, tf.int32), axis=1))
      if self.whole_word:
        # Special tokens are items of their own, and a suffix piece right after one starts a word.
        unselectable = tf.constant(self.unselectable_ids, word_ids.dtype, shape=[len(self.unselectable_ids)])
        special = tf.reduce_any(tf.equal(tokens.flat_values[:, None], unselectable), axis=1)
        after_special = tf.concat([[False], special[:-1]], axis=0)
        starts = word_starts(tokens, self.is_continuation).flat_values | special | after_special
      else:
        starts = tf.ones_like(tokens.flat_values, tf.bool)
      items = tf.RaggedTensor.from_row_starts(tokens.flat_values, tf.where(starts)[:, 0])   # [(W), (pieces)]
      items = tf.RaggedTensor.from_row_lengths(items, tf.reduce_sum(tf.cast(
          tokens.with_flat_values(starts), tf.int64), axis=1))   # [B, (W), (pieces)]
      selector = _BudgetedRandomSelector(
          unselectable_ids=self.unselectable_ids, selection_rate=self.selection_rate,
          max_selections=self.max_predictions_per_seq, skip_overflow=self.whole_word, seed=selection_seed)
      chooser = _StatelessMaskValuesChooser(
          vocab_size=self.vocab_size, mask_token=self.mask_id, mask_token_rate=self.mask_token_rate,
          random_token_rate=self.random_token_rate, seed=values_seed)
      masked, positions, original = text.mask_language_model(items, selector, chooser, axis=1)
      masked = masked.to_tensor(default_value=0, shape=tf.shape(word_ids, out_type=tf.int64))   # [B, T]
      masked_word_ids = tf.where(real, tf.cast(masked, word_ids.dtype), word_ids)
      positions, weights = text.pad_model_inputs(tf.cast(positions, tf.int32), self.max_predictions_per_seq)
      original, _ = text.pad_model_inputs(tf.cast(original, tf.int32), self.max_predictions_per_seq)
      outputs = dict(features)
      outputs.update(input_word_ids=masked_word_ids, masked_lm_positions=positions, masked_lm_ids=original,
                     masked_lm_weights=tf.cast(weights, tf.float32))
      for key in ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights"):
        outputs[key].set_shape([word_ids.shape[0], self.max_predictions_per_seq])
      masked_word_ids.set_shape(word_ids.shape)
      return outputs

"""MaskedLMMasker: BERT's budget per row, 80/10/10 statistics, whole words and consistency,
all checked in numpy against the inputs."""

import doctest

import numpy as np
import pytest
import tensorflow as tf

from tests.zoo.text.test_tokenizer import VOCAB
from zoo.text import masking
from zoo.text.masking import MaskedLMMasker
from zoo.text.tokenizer import TextEncoder

V, PAD, UNK, CLS, SEP, MASK = 1000, 0, 1, 2, 3, 4
SPECIAL = [PAD, UNK, CLS, SEP, MASK]
FIRST_WORD_PIECE = 5
# Whole-word vocabulary: ids 5..599 start a word, ids 600..999 are "##" suffix pieces.
FIRST_SUFFIX = 600
IS_CONTINUATION = np.arange(V) >= FIRST_SUFFIX


def packed_batch(rng, batch, length, whole_words=False):
  """Random packed inputs `[CLS] a [SEP] b [SEP] [PAD]...` (numpy), rows of varied length."""
  word_ids = np.full([batch, length], PAD, np.int32)
  input_mask = np.zeros([batch, length], np.int32)
  for row in range(batch):
    real = int(rng.integers(3, length + 1))
    if whole_words:
      pieces = []
      while len(pieces) < real - 3:
        pieces += [int(rng.integers(FIRST_WORD_PIECE, FIRST_SUFFIX))]
        pieces += rng.integers(FIRST_SUFFIX, V, size=int(rng.integers(0, 4))).tolist()
      pieces = pieces[:real - 3]   # the [SEP] below may split a word: its suffix pieces follow [SEP]
    else:
      pieces = rng.integers(FIRST_WORD_PIECE, V, size=real - 3).tolist()
      # Special tokens inside the text (an [UNK], a [MASK]) must not be selected either.
      for special in (UNK, MASK):
        if pieces and rng.random() < 0.3:
          pieces[int(rng.integers(len(pieces)))] = special
    middle = int(rng.integers(0, len(pieces) + 1))
    word_ids[row, :real] = [CLS] + pieces[:middle] + [SEP] + pieces[middle:] + [SEP]
    input_mask[row, :real] = 1
  return dict(input_word_ids=word_ids, input_mask=input_mask, input_type_ids=np.zeros_like(word_ids))


def numpy_budget(word_ids, input_mask, rate, max_predictions):
  """BERT's number of predictions per row: min(P, max(1, round(rate · n))), n selectable tokens.

  The product is taken in float32 (as in the graph) so that halves round the same way.
  """
  selectable = (input_mask > 0) & ~np.isin(word_ids, SPECIAL)
  count = selectable.sum(axis=1)
  budget = np.maximum(1, np.round(np.float32(rate) * count.astype(np.float32))).astype(np.int64)
  return np.where(count > 0, np.minimum(budget, max_predictions), 0), selectable


def check_consistency(features, outputs, max_predictions):
  """Properties that hold by construction, checked row by row in numpy; returns the selection [B, T]."""
  original, input_mask = features["input_word_ids"], features["input_mask"]
  masked = outputs["input_word_ids"].numpy()
  positions = outputs["masked_lm_positions"].numpy()
  labels = outputs["masked_lm_ids"].numpy()
  weights = outputs["masked_lm_weights"].numpy()
  assert positions.shape == labels.shape == weights.shape == (len(original), max_predictions)
  assert positions.dtype == labels.dtype == np.int32 and weights.dtype == np.float32
  assert masked.dtype == np.int32 and masked.shape == original.shape
  selected = np.zeros(original.shape, bool)
  for row in range(len(original)):
    count = int(weights[row].sum())
    np.testing.assert_array_equal(weights[row], [1.0] * count + [0.0] * (max_predictions - count))
    real_positions = positions[row, :count]
    assert (np.diff(real_positions) > 0).all(), "positions ascend and are unique"
    assert (positions[row, count:] == 0).all() and (labels[row, count:] == 0).all(), "padding is 0"
    assert (input_mask[row, real_positions] == 1).all(), "only real tokens"
    assert not np.isin(original[row, real_positions], SPECIAL).any(), "never a special token"
    np.testing.assert_array_equal(labels[row, :count], original[row, real_positions])
    selected[row, real_positions] = True
  np.testing.assert_array_equal(masked[~selected], original[~selected])   # everything else untouched
  assert ((masked >= 0) & (masked < V)).all()
  return selected


def make_masker(**kwargs):
  kwargs.setdefault("max_predictions_per_seq", 20)
  return MaskedLMMasker(vocab_size=V, mask_id=MASK, unselectable_ids=SPECIAL, **kwargs)


def test_docstring_examples_run():
  result = doctest.testmod(masking, extraglobs={"tf": tf, "np": np},
                           optionflags=doctest.NORMALIZE_WHITESPACE)
  assert result.attempted > 0 and result.failed == 0


def test_budget_selection_rate_and_80_10_10_split():
  rng = np.random.default_rng(0)
  features = packed_batch(rng, batch=1500, length=64)
  outputs = make_masker()(features, seed=3)
  selected = check_consistency(features, outputs, 20)
  budget, selectable = numpy_budget(features["input_word_ids"], features["input_mask"], 0.15, 20)
  np.testing.assert_array_equal(selected.sum(axis=1), budget)   # exactly BERT's budget in every row
  assert abs(selected.sum() / selectable.sum() - 0.15) < 0.01

  original = features["input_word_ids"][selected]
  replaced = outputs["input_word_ids"].numpy()[selected]
  as_mask = replaced == MASK
  unchanged = replaced == original
  randomised = ~as_mask & ~unchanged
  total = selected.sum()   # about 6,800 predictions: one standard deviation of a share is <= 0.006
  assert abs(as_mask.mean() - 0.8) < 0.02, as_mask.mean()
  assert abs(unchanged.mean() - 0.1) < 0.015, unchanged.mean()
  assert abs(randomised.mean() - 0.1) < 0.015, randomised.mean()
  # Random replacements are spread over the vocabulary (not stuck on one id).
  assert len(np.unique(replaced[randomised])) > 0.5 * randomised.sum() and total > 5_000


def test_every_position_is_equally_likely():
  features = packed_batch(np.random.default_rng(1), batch=2000, length=24)
  features["input_word_ids"][:] = np.random.default_rng(2).integers(FIRST_WORD_PIECE, V, size=(2000, 24))
  features["input_word_ids"][:, 0], features["input_word_ids"][:, -1] = CLS, SEP
  features["input_mask"][:] = 1   # 22 selectable tokens per row, budget round(3.3) = 3
  selected = check_consistency(features, make_masker()(features, seed=5), 20)
  frequency = selected[:, 1:-1].mean(axis=0)   # expected 3 / 22 = 0.136, sd 0.008 per position
  np.testing.assert_allclose(frequency, 3 / 22, atol=0.035)
  assert not selected[:, [0, -1]].any()


def test_max_predictions_caps_the_budget():
  rng = np.random.default_rng(4)
  features = packed_batch(rng, batch=200, length=64)
  outputs = make_masker(max_predictions_per_seq=3)(features, seed=0)
  selected = check_consistency(features, outputs, 3)
  budget, _ = numpy_budget(features["input_word_ids"], features["input_mask"], 0.15, 3)
  np.testing.assert_array_equal(selected.sum(axis=1), budget)
  assert (budget == 3).mean() > 0.6


def numpy_words(word_ids, input_mask):
  """Word spans per row from the ## table: lists of (start, end) over real tokens.

  A suffix piece continues the word before it, unless that is a special token.
  """
  spans = []
  for row, ids in enumerate(word_ids):
    length, row_spans = int(input_mask[row].sum()), []
    for position in range(length):
      if position == 0 or not IS_CONTINUATION[ids[position]] or ids[position - 1] in SPECIAL:
        row_spans.append([position, position + 1])
      else:
        row_spans[-1][1] = position + 1
    spans.append(row_spans)
  return spans


def test_whole_word_selects_all_pieces_of_a_word_within_the_budget():
  rng = np.random.default_rng(6)
  features = packed_batch(rng, batch=800, length=64, whole_words=True)
  masker = make_masker(whole_word=True, is_continuation=IS_CONTINUATION)
  outputs = masker(features, seed=11)
  selected = check_consistency(features, outputs, 20)
  budget, selectable = numpy_budget(features["input_word_ids"], features["input_mask"], 0.15, 20)
  spans = numpy_words(features["input_word_ids"], features["input_mask"])
  multi_piece_selected = 0
  for row, row_spans in enumerate(spans):
    taken = int(selected[row].sum())
    assert taken <= budget[row]
    for start, end in row_spans:
      chosen = selected[row, start:end]
      assert chosen.all() or not chosen.any(), f"row {row}: word {start}:{end} split"
      multi_piece_selected += chosen.all() and end - start > 1
      # BERT skips a word only when it no longer fits: every word left out is too long.
      if not chosen.any() and selectable[row, start:end].all():
        assert end - start > budget[row] - taken, f"row {row}: word {start}:{end} would have fit"
  assert multi_piece_selected > 100
  assert abs(selected.sum() / selectable.sum() - 0.15) < 0.02


def test_whole_word_end_to_end_with_the_encoder():
  encoder = TextEncoder(VOCAB, seq_length=32)
  features = encoder.encode(tf.constant(["unbelievable dogs running, the cafe!"] * 300))
  masker = MaskedLMMasker.from_encoder(encoder, max_predictions_per_seq=8, whole_word=True,
                                       selection_rate=0.3)
  outputs = masker({key: value.numpy() for key, value in features.items()}, seed=2)
  positions, weights = outputs["masked_lm_positions"].numpy(), outputs["masked_lm_weights"].numpy()
  # Words by position: [CLS] un ##believ ##able dog ##s run ##ning , the cafe ! [SEP]
  words = [[1, 2, 3], [4, 5], [6, 7], [8], [9], [10], [11]]
  chosen_sets = set()
  for row in range(300):
    chosen = set(positions[row, weights[row] > 0].tolist())
    assert chosen and chosen <= set(range(1, 12))
    for word in words:
      assert set(word) <= chosen or not set(word) & chosen
    chosen_sets.add(frozenset(chosen))
  assert len(chosen_sets) > 10


def test_seeds_reproduce_and_differ():
  features = packed_batch(np.random.default_rng(7), batch=16, length=32)
  masker = make_masker()
  first, again, other = masker(features, seed=[1, 2]), masker(features, seed=[1, 2]), masker(features, seed=9)
  for key in ("input_word_ids", "masked_lm_positions", "masked_lm_ids", "masked_lm_weights"):
    np.testing.assert_array_equal(first[key], again[key])
  assert not np.array_equal(first["masked_lm_positions"], other["masked_lm_positions"])
  unseeded = masker(features)   # stateful draw of a seed: still a valid masking
  check_consistency(features, unseeded, 20)
  np.testing.assert_array_equal(first["input_type_ids"], features["input_type_ids"])   # passed through


@pytest.mark.slow
def test_tf_data_map_with_per_batch_seeds_and_tf_function():
  encoder = TextEncoder(VOCAB, seq_length=16)
  masker = MaskedLMMasker.from_encoder(encoder, max_predictions_per_seq=4)
  texts = ["the dogs run.", "unbelievable cafe!", "", "a dog, a dog, a dog"] * 4

  dataset = tf.data.Dataset.from_tensor_slices(texts).batch(4, drop_remainder=True).map(encoder.encode)
  dataset = dataset.enumerate().map(lambda step, features: masker(features, seed=tf.stack([42, step])))
  first, second = list(dataset), list(dataset)   # two passes, the same seeds per batch
  spec = dataset.element_spec
  assert spec["masked_lm_positions"].shape.as_list() == [4, 4]
  assert spec["input_word_ids"].shape.as_list() == [4, 16]
  for a, b in zip(first, second, strict=True):
    for key in a:
      np.testing.assert_array_equal(a[key], b[key])
  assert first[2]["masked_lm_weights"].numpy()[2].sum() == 0, "an empty text has nothing to predict"

  @tf.function(input_signature=[{key: tf.TensorSpec([None, 16], tf.int32)
                                 for key in ("input_word_ids", "input_mask", "input_type_ids")}])
  def mask(features):
    return masker(features, seed=[42, 0])

  for key, value in mask(encoder.encode(tf.constant(texts[:4]))).items():
    np.testing.assert_array_equal(value, first[0][key])


def test_batch_of_zero_and_of_one():
  masker = make_masker(max_predictions_per_seq=5)
  empty = dict(input_word_ids=np.zeros([0, 8], np.int32), input_mask=np.zeros([0, 8], np.int32))
  outputs = masker(empty, seed=0)
  assert outputs["masked_lm_positions"].shape == (0, 5) and outputs["input_word_ids"].shape == (0, 8)
  whole = make_masker(max_predictions_per_seq=5, whole_word=True, is_continuation=IS_CONTINUATION)
  assert whole(empty, seed=0)["masked_lm_weights"].shape == (0, 5)
  one = dict(input_word_ids=np.array([[CLS, 7, 8, SEP, PAD]], np.int32),
             input_mask=np.array([[1, 1, 1, 1, 0]], np.int32))
  outputs = whole(one, seed=0)
  check_consistency(one, outputs, 5)
  assert outputs["masked_lm_weights"].numpy().sum() == 1   # max(1, round(0.15 * 2))
  only_special = dict(input_word_ids=np.array([[CLS, SEP, PAD]], np.int32),
                      input_mask=np.array([[1, 1, 0]], np.int32))
  assert whole(only_special, seed=0)["masked_lm_weights"].numpy().sum() == 0


@pytest.mark.parametrize("kwargs, message", [
    (dict(whole_word=True), "whole_word=True needs is_continuation"),
    (dict(whole_word=True, is_continuation=[True, False]), r"shape \[vocab_size\] = \[1000\]"),
    (dict(mask_token_rate=0.8, random_token_rate=0.3), "sum <= 1"),
    (dict(selection_rate=0.0), r"selection_rate must be in \(0, 1\]"),
    (dict(max_predictions_per_seq=0), "at least 1"),
])
def test_errors_name_the_problem(kwargs, message):
  with pytest.raises(ValueError, match=message):
    make_masker(**kwargs)


def test_missing_features_are_named():
  with pytest.raises(ValueError, match="input_mask"):
    make_masker()(dict(input_word_ids=np.zeros([1, 4], np.int32)))

"""zoo.text.packing against tensorflow-text's trimmers, Model Garden's BertPackInputs and transformers' fast
tokenizer's pair truncation, on many lengths."""

import doctest
import itertools

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as text
from official.nlp.modeling.layers.text_layers import BertPackInputs

from zoo.text import packing
from zoo.text.packing import pack
from zoo.text.packing import trimmed_lengths

CLS, SEP, PAD = 101, 102, 0
LENGTHS = range(0, 13)


def segments_of(lengths, first_id):
  """int32 `[B, (tokens)]` with distinct ids per segment and position: first_id + 100 * row + position."""
  return tf.ragged.constant([[first_id + 100 * row + i for i in range(n)] for row, n in enumerate(lengths)],
                            dtype=tf.int32, ragged_rank=1, row_splits_dtype=tf.int64)


def test_docstring_examples_run():
  result = doctest.testmod(packing, extraglobs={"tf": tf, "np": np}, optionflags=doctest.NORMALIZE_WHITESPACE)
  assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("trimmer, truncator", [(text.RoundRobinTrimmer, "round_robin"),
                                                (text.WaterfallTrimmer, "waterfall")])
@pytest.mark.parametrize("budget", [0, 1, 2, 3, 4, 5, 7, 10, 25])
def test_pair_trimming_matches_tensorflow_text(trimmer, truncator, budget):
  pairs = list(itertools.product(LENGTHS, LENGTHS))   # 169 length combinations per budget
  a = segments_of([n for n, _ in pairs], 1000)
  b = segments_of([n for _, n in pairs], 50000)
  expected = trimmer(budget).trim([a, b])
  kept = trimmed_lengths([a.row_lengths(), b.row_lengths()], budget, truncator)
  for segment, keep, reference in zip((a, b), kept, expected, strict=True):
    np.testing.assert_array_equal(keep, reference.row_lengths())
    trimmed = tf.ragged.boolean_mask(segment, tf.ragged.range(segment.row_lengths()) < keep[:, None])
    assert trimmed.to_list() == reference.to_list()


def test_longest_first_packs_pairs_as_transformers_fast_tokenizer():
  """`pack(..., truncator="longest_first")` (the default) gives the ids of transformers' BERT tokenizer
  `(a, b, truncation="longest_first", max_length=T)` for every pair of lengths 0-13 and T 3-17 (2,940
  pairs), each word of the hand-written vocabulary one token; round robin differs where both segments
  are long and the budget odd (the odd token to a, not to the longer segment)."""
  import transformers
  words = [f"a{i}" for i in range(14)], [f"b{i}" for i in range(14)]
  vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words[0], *words[1]]
  hf = transformers.BertTokenizer(vocab={token: i for i, token in enumerate(vocab)})
  lengths = list(zip(*itertools.product(range(14), range(14)), strict=True))   # a's, b's
  texts = [[" ".join(words[side][:n]) for n in lengths[side]] for side in (0, 1)]
  segments = [tf.ragged.constant([[vocab.index(word) for word in words[side][:n]] for n in lengths[side]],
                                 dtype=tf.int32, ragged_rank=1, row_splits_dtype=tf.int64) for side in (0, 1)]
  round_robin_differs = 0
  for seq_length in range(3, 18):
    expected = hf(*texts, truncation="longest_first", max_length=seq_length, padding="max_length")
    default = pack(segments, seq_length, cls_id=2, sep_id=3, pad_id=0)
    np.testing.assert_array_equal(default["input_word_ids"], expected["input_ids"], err_msg=str(seq_length))
    np.testing.assert_array_equal(default["input_type_ids"], expected["token_type_ids"])
    np.testing.assert_array_equal(default["input_mask"], expected["attention_mask"])
    round_robin = pack(segments, seq_length, cls_id=2, sep_id=3, pad_id=0, truncator="round_robin")
    round_robin_differs += int(np.sum(np.any(round_robin["input_word_ids"] != default["input_word_ids"], 1)))
  assert round_robin_differs > 0


@pytest.mark.parametrize("budget", [0, 1, 4, 9])
def test_single_segment_trimming_matches_tensorflow_text(budget):
  a = segments_of(list(LENGTHS), 1000)
  expected = text.RoundRobinTrimmer(budget).trim([a])[0]
  np.testing.assert_array_equal(trimmed_lengths([a.row_lengths()], budget)[0], expected.row_lengths())


@pytest.mark.parametrize("seq_length", [3, 4, 5, 8, 16])
@pytest.mark.parametrize("truncator", ["round_robin", "waterfall"])   # BertPackInputs' truncators
def test_pack_matches_bert_pack_inputs(seq_length, truncator):
  pairs = list(itertools.product(LENGTHS, LENGTHS))
  a = segments_of([n for n, _ in pairs], 1000)
  b = segments_of([n for _, n in pairs], 50000)
  for segments in ([a], [a, b]):
    if seq_length < len(segments) + 1:
      continue
    expected = BertPackInputs.bert_pack_inputs(segments, seq_length, start_of_sequence_id=CLS,
                                               end_of_segment_id=SEP, padding_id=PAD, truncator=truncator)
    packed = pack(segments, seq_length, cls_id=CLS, sep_id=SEP, pad_id=PAD, truncator=truncator)
    for key, value in packed.items():
      assert value.dtype == tf.int32 and value.shape == (len(pairs), seq_length), key
      np.testing.assert_array_equal(value, expected[key], err_msg=f"{key}, {len(segments)} segment(s)")


def test_pack_edge_cases():
  empty = tf.ragged.constant([], dtype=tf.int32, ragged_rank=1)
  packed = pack([empty, empty], 6, cls_id=CLS, sep_id=SEP, pad_id=PAD)
  assert all(value.shape == (0, 6) for value in packed.values())
  packed = pack([tf.ragged.constant([[]], tf.int32)], 3, cls_id=CLS, sep_id=SEP, pad_id=PAD)
  assert packed["input_word_ids"].numpy().tolist() == [[CLS, SEP, PAD]]
  assert packed["input_mask"].numpy().tolist() == [[1, 1, 0]]
  packed = pack([tf.ragged.constant([[5, 6]]), tf.ragged.constant([[7, 8]])], 3, cls_id=CLS, sep_id=SEP,
                pad_id=PAD)
  assert packed["input_word_ids"].numpy().tolist() == [[CLS, SEP, SEP]]
  with pytest.raises(ValueError, match="leaves no room for 3 special tokens"):
    pack([empty, empty], 2, cls_id=CLS, sep_id=SEP, pad_id=PAD)
  with pytest.raises(ValueError, match="one or two segments"):
    trimmed_lengths([tf.constant([1])] * 3, 5)
  with pytest.raises(ValueError, match="truncator must be one of"):
    trimmed_lengths([tf.constant([1])], 5, "longest")

"""Trimming and packing of one or two token segments into BERT encoder inputs, with core ops.

Axes: B batch, T sequence length.

`trimmed_lengths` gives how many tokens of each of two segments a truncator keeps:

- `"longest_first"` (the default): transformers' fast tokenizers' `truncation="longest_first"`.
  When the pair is too long, the shorter segment stays whole if it fits in half the budget
  (the longer one takes the rest); otherwise the shorter one keeps `budget // 2` and the
  longer one the rest, so the odd token goes to the longer segment, and to the second one
  when they are equally long.
- `"round_robin"`: `tensorflow_text.RoundRobinTrimmer` (one token at a time to each segment
  that still has some, the first segment first): as `"longest_first"` but that the odd
  token goes to the first segment when both are long. The zoo's rule before
  `"longest_first"`; model directories that record no truncator used it
  (`zoo.model_dir.truncator`).
- `"waterfall"`: `WaterfallTrimmer` (the first segment keeps as much as fits).

`pack` lays out `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]` and pads with `[PAD]`, as Model
Garden's `BertPackInputs`. Only core TensorFlow ops are used: the trimmer ops of
tensorflow-text (`TFText>RoundRobinTrim`, ...) are not linked by TF Serving.

Example:

>>> a = tf.ragged.constant([[11, 12, 13, 14], [11]])
>>> b = tf.ragged.constant([[21, 22], [21, 22, 23, 24, 25]])
>>> features = pack([a, b], seq_length=8, cls_id=2, sep_id=3, pad_id=0)
>>> features["input_word_ids"].numpy()
array([[ 2, 11, 12, 13,  3, 21, 22,  3],
       [ 2, 11,  3, 21, 22, 23, 24,  3]], dtype=int32)
>>> features["input_type_ids"].numpy()
array([[0, 0, 0, 0, 0, 1, 1, 1],
       [0, 0, 0, 1, 1, 1, 1, 1]], dtype=int32)
"""

from collections.abc import Sequence

import tensorflow as tf

from zoo.choices import DEFAULT_TRUNCATOR
from zoo.choices import TRUNCATORS


def trimmed_lengths(lengths: Sequence[tf.Tensor], budget: int | tf.Tensor,
                    truncator: str = DEFAULT_TRUNCATOR) -> list[tf.Tensor]:
  """How many tokens of each of one or two segments fit in `budget` tokens together.

  Args:
    lengths: one or two int `[B]` segment lengths.
    budget: the number of tokens the segments share (scalar).
    truncator: one of `TRUNCATORS` (see the module docstring).

  Returns:
    The kept lengths, one int `[B]` per segment (the dtype of `lengths`).
  """
  if truncator not in TRUNCATORS:
    raise ValueError(f"truncator must be one of {TRUNCATORS}, got {truncator!r}")
  if len(lengths) not in (1, 2):
    raise ValueError(f"one or two segments can be packed, got {len(lengths)}")
  lengths = [tf.convert_to_tensor(length) for length in lengths]
  budget = tf.cast(budget, lengths[0].dtype)
  if len(lengths) == 1:
    return [tf.minimum(lengths[0], budget)]
  a, b = lengths
  if truncator == "waterfall":
    keep_a = tf.minimum(a, budget)
  else:
    # Both give a half of the budget unless b needs less than the other half: round robin
    # ceil(budget / 2), longest first floor(budget / 2) when a is not the longer segment.
    half = budget - budget // 2
    if truncator == "longest_first":
      half = tf.where(a <= b, budget // 2, half)
    keep_a = tf.minimum(a, tf.maximum(half, budget - b))
  return [keep_a, tf.minimum(b, budget - keep_a)]


def pack(segments: Sequence[tf.RaggedTensor], seq_length: int, *, cls_id: int, sep_id: int, pad_id: int,
         truncator: str = DEFAULT_TRUNCATOR, cls_type_id: int = 0) -> dict[str, tf.Tensor]:
  """Trims one or two int `[B, (tokens)]` segments together and packs them into int32 `[B, T]` inputs.

  Returns:
    `input_word_ids` (`[CLS] a [SEP] (b [SEP])`, then `[PAD]`), `input_mask` (1 = real
    token) and `input_type_ids` (`cls_type_id` for [CLS], 1 for b and its [SEP], 0
    elsewhere).
  """
  special = len(segments) + 1
  if seq_length < special:
    raise ValueError(f"seq_length {seq_length} leaves no room for {special} special tokens")
  segments = [tf.cast(segment, tf.int32) for segment in segments]
  kept = trimmed_lengths([tf.cast(segment.row_lengths(), tf.int32) for segment in segments],
                         seq_length - special, truncator)
  batch = segments[0].nrows(out_type=tf.int32)
  position = tf.broadcast_to(tf.range(seq_length, dtype=tf.int32)[tf.newaxis], [batch, seq_length])
  word_ids = tf.where(position == 0, cls_id, pad_id)
  type_ids = tf.where(position == 0, cls_type_id, 0)
  start = tf.ones([batch, 1], tf.int32)   # where the segment begins: after [CLS], then after each [SEP]
  for type_id, (segment, keep) in enumerate(zip(segments, kept, strict=True)):
    keep = keep[:, tf.newaxis]
    dense = segment.to_tensor(default_value=pad_id, shape=[None, seq_length])
    offset = tf.clip_by_value(position - start, 0, seq_length - 1)
    inside = (position >= start) & (position < start + keep)
    word_ids = tf.where(inside, tf.gather(dense, offset, batch_dims=1), word_ids)
    word_ids = tf.where(position == start + keep, sep_id, word_ids)
    type_ids = tf.where((position >= start) & (position <= start + keep), type_id, type_ids)
    start = start + keep + 1
  mask = tf.cast(position < start, tf.int32)
  return dict(input_word_ids=word_ids, input_mask=mask, input_type_ids=type_ids)

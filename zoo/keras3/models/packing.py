"""Packing text pairs as transformers does in the zoo's keras-hub preprocessors.

keras-hub's `MultiSegmentPacker` trims a pair round robin (when both segments are long, the
odd token goes to the first); transformers' fast tokenizers trim it longest first
(`zoo.text.packing`: the odd token goes to the longer segment, to the second on a tie), and
so do the zoo's `TextEncoder` and its exports by default. `SegmentPacker` adds that rule,
`truncate="longest_first"`, to keras-hub's packer (both its TensorFlow and its Python path);
`PairTruncation`, a preprocessor mixin, makes it the preprocessor's default and packer.
Preprocessors saved before keep the rule their config names (keras-hub's default
"round_robin").
"""

import keras_hub

from zoo.choices import DEFAULT_TRUNCATOR
from zoo.choices import TRUNCATORS
from zoo.lazy import lazy_module

# Packing runs on TensorFlow's ragged ops whatever Keras' backend (in `tf.data`, as keras-hub's packers do);
# imported on first use, so `import zoo.keras3` loads no TensorFlow for it.
tf = lazy_module("tensorflow")
text_packing = lazy_module("zoo.text.packing")


def longest_first(lengths, budget):
  """The tokens of each of one or two segments of `lengths` (ints) that `"longest_first"` keeps in
  `budget` (`zoo.text.packing.trimmed_lengths`, in Python)."""
  if len(lengths) == 1:
    return [min(lengths[0], budget)]
  a, b = lengths
  half = budget // 2 if a <= b else budget - budget // 2
  keep_a = min(a, max(half, budget - b))
  return [keep_a, min(b, budget - keep_a)]


class SegmentPacker(keras_hub.layers.MultiSegmentPacker):
  """keras-hub's `MultiSegmentPacker` with `truncate="longest_first"` too (one or two segments).

  Args:
    truncate: `"longest_first"` (transformers'), `"round_robin"` or `"waterfall"` (keras-hub's).
    **kwargs: `MultiSegmentPacker`'s.
  """

  def __init__(self, *args, truncate=DEFAULT_TRUNCATOR, **kwargs):
    if truncate not in TRUNCATORS:
      raise ValueError(f"truncate must be one of {TRUNCATORS}, got {truncate!r}")
    super().__init__(*args, truncate="round_robin" if truncate == "longest_first" else truncate, **kwargs)
    self.truncate = truncate

  def _budget(self, segments, sequence_length, add_start_value, add_end_value):
    if len(segments) > 2:
      raise ValueError(f"truncate='longest_first' (transformers' rule) trims one or two segments, got "
                       f"{len(segments)}: give the preprocessor truncate='round_robin' or 'waterfall'")
    special = ((len(self.start_value) if add_start_value else 0) + (len(segments) - 1) * len(self.sep_value)
               + (len(self.end_value) if add_end_value else 0))
    return (sequence_length or self.sequence_length) - special

  def _trim_inputs_tf(self, inputs, sequence_length=None, add_start_value=True, add_end_value=True):
    if self.truncate != "longest_first":
      return super()._trim_inputs_tf(inputs, sequence_length, add_start_value, add_end_value)
    budget = self._budget(inputs, sequence_length, add_start_value, add_end_value)
    lengths = [segment.row_lengths() for segment in inputs]
    kept = text_packing.trimmed_lengths(lengths, budget, "longest_first")
    return [tf.ragged.boolean_mask(segment, tf.ragged.range(segment.row_lengths()) < keep[:, tf.newaxis])
            for segment, keep in zip(inputs, kept, strict=True)]

  def _trim_inputs_python(self, inputs, sequence_length=None, add_start_value=True, add_end_value=True):
    if self.truncate != "longest_first":
      return super()._trim_inputs_python(inputs, sequence_length, add_start_value, add_end_value)
    budget = self._budget(inputs, sequence_length, add_start_value, add_end_value)
    trimmed = [[] for _ in inputs]
    for rows in zip(*inputs, strict=True):
      for index, (row, keep) in enumerate(zip(rows, longest_first([len(row) for row in rows], budget),
                                              strict=True)):
        trimmed[index].append(row[:keep])
    return trimmed


class PairTruncation:
  """A keras-hub preprocessor mixin (before the preprocessor in the bases): `truncate` defaults to
  `"longest_first"` (transformers' trimming of text pairs) and the packer is a `SegmentPacker`, which
  takes it as well as keras-hub's rules."""

  def __init__(self, *args, truncate=DEFAULT_TRUNCATOR, **kwargs):
    super().__init__(*args, truncate=truncate, **kwargs)

  def build(self, input_shape):
    truncate = self.truncate
    self.truncate = "round_robin"   # keras-hub's packer, made here, takes its own rules only: replaced below
    try:
      super().build(input_shape)
    finally:
      self.truncate = truncate
    self.packer = SegmentPacker(start_value=self.tokenizer.start_token_id,
                                end_value=self.tokenizer.end_token_id, pad_value=self.tokenizer.pad_token_id,
                                truncate=truncate, sequence_length=self.sequence_length)

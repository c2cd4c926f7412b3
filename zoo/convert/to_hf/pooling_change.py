"""What an export with `--change-pooling` computes otherwise, measured on the model itself.

A Funnel trained with the zoo's or the authors' pooling semantics and exported with Hugging Face's
(`to-hf --change-pooling`) computes the same on inputs whose pooling windows are wholly real or wholly
padding, and otherwise on the rest (`zoo.length_buckets.mixed_window_counts`). `measure` runs the
restored encoder twice, as trained and with Hugging Face's semantics (the same weights: what the
export computes in transformers, to float32 rounding), on an input of random tokens for each count of
real tokens, padded to the trained length, and gives how far the outputs a head reads move: the model
card prints it.
"""

import dataclasses
from typing import Any

import numpy as np

from zoo.choices import HF_POOLING

# At most this many counts of real tokens are measured (every count up to half of them, then evenly
# spread), so a base model at 512 tokens is measured in seconds, not minutes.
MAX_COUNTS = 64
# Outputs closer than this compute the same (float32 rounding of the same sums in another order).
SAME = 1e-4


@dataclasses.dataclass(frozen=True)
class PoolingChange:
  """Measured outputs of the trained semantics against Hugging Face's, one input per count.

  `counts` are the counts of real tokens measured (with [cls]), `differences` the largest absolute
  difference of the compared output at each, `output` says which output (the final [cls] state a pooled
  head reads, or the final states at the real positions of a full-length output).
  """
  semantics: str
  seq_length: int
  counts: tuple[int, ...]
  differences: tuple[float, ...]
  output: str

  @property
  def differing(self) -> list[int]:
    """The measured counts whose outputs differ."""
    return [count for count, difference in zip(self.counts, self.differences, strict=True)
            if difference > SAME]

  @property
  def largest(self) -> float:
    return max(self.differences, default=0.0)

  def median_differing(self) -> float:
    differing = [difference for difference in self.differences if difference > SAME]
    return float(np.median(differing)) if differing else 0.0


def measured_counts(seq_length: int) -> list[int]:
  """The counts of real tokens measured: every one from 1 up to `MAX_COUNTS // 2`, then evenly spread to
  `seq_length` (a full input, which computes the same under every semantics)."""
  if seq_length <= MAX_COUNTS:
    return list(range(1, seq_length + 1))
  head = list(range(1, MAX_COUNTS // 2 + 1))
  tail = np.linspace(MAX_COUNTS // 2 + 1, seq_length, MAX_COUNTS - len(head)).round().astype(int)
  return head + sorted(set(tail.tolist()) - set(head))


def measure(encoder: Any, pooled_head: bool, seed: int = 0, batch_size: int = 16) -> PoolingChange:
  """The outputs of the restored tf_keras Funnel `encoder` against the same weights under Hugging Face's
  pooling semantics, on random tokens (`seed`) for each of `measured_counts`, padded to its length.

  `pooled_head`: compare the last block's [cls] state (what a classifier's pooler reads) rather than
  the final states at every real position (those of the decoder, when there is one).
  """
  import tensorflow as tf

  from zoo.named_weights import copy_weights
  config = encoder.get_config()
  semantics, length = config["pooling_semantics"], int(config["seq_length"])
  twin = type(encoder).from_config(dict(config, pooling_semantics=HF_POOLING))
  copy_weights(encoder, twin)
  counts = measured_counts(length)
  rng = np.random.default_rng(seed)
  ids = rng.integers(1, config["vocab_size"], size=(len(counts), length), dtype=np.int32)
  mask = (np.arange(length)[None, :] < np.array(counts)[:, None]).astype(np.int32)
  inputs = dict(input_word_ids=ids * mask, input_mask=mask, input_type_ids=np.zeros_like(ids))
  full_length = not pooled_head and bool(config.get("num_decoder_layers"))
  differences = []
  for start in range(0, len(counts), batch_size):
    batch = {name: tf.constant(value[start:start + batch_size]) for name, value in inputs.items()}
    key = "sequence_output" if full_length else "encoder_sequence_output"
    trained = encoder(batch, training=False)[key].numpy()
    changed = twin(batch, training=False)[key].numpy()
    gap = np.abs(trained - changed)
    if full_length:
      real = batch["input_mask"].numpy()[:, :, None].astype(bool)
      differences += np.where(real, gap, 0).max(axis=(1, 2)).tolist()
    else:
      differences += gap[:, 0].max(axis=-1).tolist()
  output = ("the final states at the real positions" if full_length
            else "the final [cls] state (what a pooled head reads)")
  return PoolingChange(semantics, length, tuple(counts), tuple(differences), output)

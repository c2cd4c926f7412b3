"""Length buckets on the tf_keras encoders: a batch runs at a ladder length, with the outputs of the full
length.

The reference is the same encoder without buckets (every batch at its built `seq_length`):
at the real positions the outputs must be equal, for every count of real tokens. The
Funnel's capacities (`zoo.length_buckets.funnel_capacity`, computed from the pooling
geometry) are held to what the layers compute: every count within a length's capacity runs
there with the full length's outputs, and one token more does not.
"""

import itertools

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from tests.conftest import fast_or_slow
from zoo.length_buckets import default_ladder
from zoo.length_buckets import funnel_capacity
from zoo.length_buckets import funnel_windows
from zoo.length_buckets import parse_ladder
from zoo.models import FunnelEncoder
from zoo.models import TransformerEncoder
from zoo.models import bucketing

VOCAB, LENGTH = 50, 16
TINY = dict(vocab_size=VOCAB, hidden_size=16, num_heads=2, intermediate_size=32, seq_length=LENGTH,
            dropout=0.0, attention_dropout=0.0)
FUNNELS = {
    "default": dict(),
    "decoder": dict(num_decoder_layers=1),
    "no_truncate_decoder": dict(truncate_seq=False, num_decoder_layers=1),
    "joint_cls_max": dict(separate_cls=False, pooling_type="max"),
}


def _batch(reals, seed=0):
  """One text per count of real tokens in `reals`, padded to LENGTH."""
  rng = np.random.default_rng(seed)
  mask = (np.arange(LENGTH)[None, :] < np.array(reals)[:, None]).astype(np.int32)
  types = (np.arange(LENGTH)[None, :] >= np.array(reals)[:, None] // 2).astype(np.int32)
  return dict(input_word_ids=tf.constant(rng.integers(5, VOCAB, mask.shape) * mask, tf.int32),
              input_mask=tf.constant(mask), input_type_ids=tf.constant(types * mask))


def _real_parts(encoder, outputs, row, real):
  """The outputs of text `row` at the positions that hold one of its `real` tokens: a sequence output cut
  to them (a pooled one to its windows with a real token), the pooled output whole."""
  config = encoder.get_config()
  sequence = outputs["sequence_output"].numpy()[row]
  if config.get("block_sizes") and not config["num_decoder_layers"]:
    windows = funnel_windows(LENGTH, len(config["block_sizes"]), config["separate_cls"],
                             config["truncate_seq"])
    real = int(np.sum(windows[-1][0] < real))
  return [outputs["pooled_output"].numpy()[row], sequence[:real]]


def _differences(encoder, reals, index, padding_dependent=False):
  """max |bucketed - full| at the real positions of each text of `reals`, run at ladder index `index`."""
  batch = _batch(reals)
  ladder = encoder.length_buckets
  encoder.use_length_buckets(None)
  full = encoder(batch, training=False)
  encoder.use_length_buckets([length for length, _ in ladder], padding_dependent=padding_dependent)
  with bucketing.stepping(tf.constant(index)):
    bucketed = encoder(batch, training=False)
  return [max(float(np.max(np.abs(a - b), initial=0.0))
              for a, b in zip(_real_parts(encoder, full, row, real),
                              _real_parts(encoder, bucketed, row, real),
                              strict=True))
          for row, real in enumerate(reals)]


SEMANTICS = ("zoo", "huggingface", "funnel_authors")


CASES = [f"{flags}-{semantics}" for semantics in SEMANTICS for flags in FUNNELS]


@pytest.mark.parametrize("case", fast_or_slow(CASES, ("default-zoo", "decoder-huggingface")))
def test_funnel_capacity_is_what_the_layers_compute(case):
  flags, semantics = case.split("-")
  funnel = FunnelEncoder(block_sizes=(1, 1, 1), pooling_semantics=semantics, **TINY, **FUNNELS[flags])
  config = funnel.get_config()
  lengths = list(range(5, LENGTH))
  dependent = semantics != "zoo"
  funnel.use_length_buckets(lengths, padding_dependent=dependent)
  ladder = dict(funnel.length_buckets)
  for index, (length, capacity) in enumerate(funnel.length_buckets[:-1]):
    assert capacity == funnel_capacity(length, LENGTH, num_blocks=3, separate_cls=config["separate_cls"],
                                       truncate_seq=config["truncate_seq"],
                                       decoder=bool(config["num_decoder_layers"]), semantics=semantics)
    reals = list(range(1, min(capacity + 1, length) + 1))
    differences = _differences(funnel, reals, index, dependent)
    assert max(differences[:capacity]) < 1e-5, (length, differences)
    if capacity < length:   # one token more than the capacity changes the outputs
      assert differences[capacity] > 1e-3, (length, capacity + 1, differences)
  # A length whose capacity adds nothing to a shorter one's is dropped from the ladder.
  assert all(ladder[a] < ladder[b] for a, b in itertools.pairwise(sorted(ladder)))


TRANSFORMERS = {
    "bert": dict(num_layers=2, max_sequence_length=LENGTH),
    "albert": dict(num_layers=2, max_sequence_length=LENGTH, layer_sharing="all", embedding_width=8),
    "realformer": dict(num_layers=2, max_sequence_length=LENGTH, residual_attention=True),
    "pre_ln_relative": dict(num_layers=2, norm_first=True, position_encoding="factorized"),
}


@pytest.mark.parametrize("flags", fast_or_slow(list(TRANSFORMERS), ("realformer",)))
def test_transformer_buckets_hold_every_length(flags):
  encoder = TransformerEncoder(**TINY, **TRANSFORMERS[flags])
  encoder.use_length_buckets([4, 8])
  assert encoder.length_buckets == [(4, 4), (8, 8), (16, 16)]
  for reals, expected in (([1, 4], 0), ([5, 8, 2], 1), ([9, 16], 2)):
    assert int(bucketing.bucket_index(_batch(reals)["input_mask"], [4, 8, 16])) == expected
    assert max(_differences(encoder, reals, expected)) < 1e-5, reals


@pytest.mark.slow
@pytest.mark.parametrize("flags", ["decoder", "no_truncate_decoder"])
def test_per_text_buckets_run_each_text_at_its_own_length(flags):
  """A call's texts split by length (what exports do): each at its own ladder length, equal to the full
  length at its real positions, zeros past its ladder length; batches of one length, of none at some
  lengths, and empty."""
  funnel = FunnelEncoder(block_sizes=(1, 1, 1), **TINY, **FUNNELS[flags])
  reals = [3, 16, 9, 1, 12, 7, 15]
  batch = _batch(reals)
  full = funnel(batch, training=False)
  funnel.use_length_buckets([8, 12], per_text=True)
  ladder = funnel.length_buckets
  outputs = tf.function(lambda batch: funnel(batch, training=False))(batch)
  for row, real in enumerate(reals):
    for a, b in zip(_real_parts(funnel, full, row, real), _real_parts(funnel, outputs, row, real),
                    strict=True):
      np.testing.assert_allclose(a, b, atol=1e-5)
    length = next(length for length, capacity in ladder if capacity >= real)
    assert not np.any(outputs["sequence_output"].numpy()[row, length:])
  for rows in ([0, 3], [1], []):
    rows = tf.constant(rows, tf.int32)
    part = {name: tf.gather(value, rows) for name, value in batch.items()}
    np.testing.assert_allclose(funnel(part, training=False)["pooled_output"],
                               tf.gather(full["pooled_output"], rows), atol=1e-5)


def test_outputs_keep_their_shapes_and_are_zero_past_the_bucket():
  encoder = FunnelEncoder(block_sizes=(1, 1), num_decoder_layers=1, output_attention_probs=True, **TINY)
  plain = encoder(_batch([3, 2]), training=False)
  encoder.use_length_buckets([8])
  outputs = encoder(_batch([3, 2]), training=False)
  assert tf.nest.map_structure(lambda x: x.shape, outputs) == tf.nest.map_structure(lambda x: x.shape, plain)
  assert not np.any(outputs["sequence_output"].numpy()[:, 8:])
  assert np.any(outputs["sequence_output"].numpy()[:, :3])


@pytest.mark.slow
def test_gradients_equal_the_full_length_ones():
  encoder = TransformerEncoder(**TINY, num_layers=2, max_sequence_length=LENGTH, residual_attention=True)
  batch = _batch([5, 4])
  weights = (tf.random.stateless_normal([2, LENGTH, 16], [1, 2])
             * tf.cast(batch["input_mask"], tf.float32)[:, :, None])

  def gradients():
    with tf.GradientTape() as tape:
      loss = tf.reduce_sum(encoder(batch, training=False)["sequence_output"] * weights)
    return tape.gradient(loss, encoder.trainable_variables)

  full = tf.function(gradients, jit_compile=True)()
  encoder.use_length_buckets([8])
  bucketed = tf.function(gradients, jit_compile=True)()
  # A variable the outputs used do not read (the pooler) has no gradient at the full length, and zeros
  # through the buckets' switch (the trainer drops those: tests/tpu/test_length_buckets.py).
  assert all(not np.any(b) for a, b in zip(full, bucketed, strict=True) if a is None)
  full, bucketed = zip(*[(tf.convert_to_tensor(a).numpy(), tf.convert_to_tensor(b).numpy())
                         for a, b in zip(full, bucketed, strict=True) if a is not None], strict=True)
  scale = max(np.abs(gradient).max() for gradient in full)
  for a, b in zip(full, bucketed, strict=True):
    np.testing.assert_allclose(a, b, atol=1e-6 * scale)


@pytest.mark.slow
def test_xla_and_mixed_bfloat16():
  keras.mixed_precision.set_global_policy("mixed_bfloat16")
  try:
    encoder = FunnelEncoder(block_sizes=(1, 1), num_decoder_layers=1, **TINY)
  finally:
    keras.mixed_precision.set_global_policy("float32")
  batch = _batch([6, 5])
  full = encoder(batch, training=False)["sequence_output"]
  encoder.use_length_buckets([8])
  bucketed = tf.function(lambda: encoder(batch, training=False), jit_compile=True)()["sequence_output"]
  assert bucketed.dtype == full.dtype == tf.bfloat16
  np.testing.assert_allclose(tf.cast(bucketed[0, :6], tf.float32), tf.cast(full[0, :6], tf.float32),
                             atol=0.05)


def test_padding_dependent_semantics_and_impossible_lengths_are_refused():
  funnel = FunnelEncoder(block_sizes=(1, 1, 1), pooling_semantics="huggingface", **TINY)
  with pytest.raises(ValueError, match="taken only when asked for .*"
                                       "pooling_semantics='huggingface' pools padding"):
    funnel.use_length_buckets([8])
  funnel.use_length_buckets([8], padding_dependent=True)
  assert funnel.length_buckets == [(8, 5), (16, 16)]   # [cls] and one whole window of 4 of the last block
  zoo_funnel = FunnelEncoder(block_sizes=(1, 1, 1), **TINY)
  with pytest.raises(ValueError, match="length bucket 4: 4 tokens are too few for 3 blocks"):
    zoo_funnel.use_length_buckets([4, 8])
  with pytest.raises(ValueError, match="longer than its seq_length 16"):
    zoo_funnel.use_length_buckets([32])


def test_ladders():
  assert default_ladder(512) == [16, 32, 64, 128, 256, 512]
  assert default_ladder(100) == [16, 32, 64, 100]
  assert default_ladder(64, per_octave=4) == [16, 20, 24, 28, 32, 40, 48, 56, 64]
  assert default_ladder(16, per_octave=4) == [16]
  assert parse_ladder("off", 128) == [] and parse_ladder(None, 128) == []
  assert parse_ladder([64, 32], 128) == [32, 64, 128]
  with pytest.raises(ValueError, match="'auto', 'off' or comma-separated lengths"):
    parse_ladder("short", 128)
  with pytest.raises(ValueError, match=r"\[256\] are outside 1..128"):
    parse_ladder("32,256", 128)

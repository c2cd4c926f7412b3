"""Funnel pooling and upsampling against a numpy reference with explicit window loops.

The reference reads the conventions of `zoo/layers/funnel_pooling.py` straight from its
docstring and shares no code with it: windows of 2 original tokens; with `separate_cls`
[cls] is a window of its own and `truncate_seq` drops the last token first; a pooled
token is real if any token of its window is; mean/max read only the real tokens and a
window without one pools to 0.
"""

import numpy as np
import pytest
import tensorflow as tf

from tests.layer_checks import run_layer_checks
from zoo.layers import FunnelPooling
from zoo.layers import FunnelUpsampling
from zoo.layers import pool_positions
from zoo.layers import pool_sequence
from zoo.layers import pooled_length

WIDTH = 3
# (separate_cls, truncate_seq) with readable ids; without separate_cls, truncate_seq
# has no effect, so one of the two combinations is enough for the value tests.
FLAGS = [(True, True), (True, False), (False, True), (False, False)]
FLAG_IDS = ["cls_truncate", "cls", "truncate_only", "plain"]
VALUE_FLAGS = FLAGS[:3]
VALUE_FLAG_IDS = FLAG_IDS[:3]


# --- Independent numpy reference -------------------------------------------------------

def _windows(length, separate_cls, truncate_seq):
  """Indices (into a length-`length` sequence) of the tokens of each pooling window."""
  if not separate_cls:
    return [list(range(start, min(start + 2, length))) for start in range(0, length, 2)]
  kept = length - 1 if truncate_seq else length
  windows = [[0]]   # [cls] pooled with itself.
  for start in range(1, kept, 2):
    windows.append(list(range(start, min(start + 2, kept))))
  return windows


def _coverage(length, blocks, separate_cls, truncate_seq):
  """Original token indices read by each token after `blocks` pooling steps."""
  coverage = [[i] for i in range(length)]
  for _ in range(blocks):
    coverage = [sorted(i for m in window for i in coverage[m])
                for window in _windows(len(coverage), separate_cls, truncate_seq)]
  return coverage


def _pool_reference(x, axis, mode, separate_cls, truncate_seq, mask=None):
  """numpy pooling of `x` along `axis` (>= 1); `mask` is `[B, T]` along that axis."""
  x = np.moveaxis(np.asarray(x, np.float64), axis, 1)   # [B, T, ...]
  batch, length = x.shape[:2]
  windows = _windows(length, separate_cls, truncate_seq)
  out = np.zeros((batch, len(windows)) + x.shape[2:])
  for b in range(batch):
    for m, window in enumerate(windows):
      real = [i for i in window if mask is None or mask[b, i]]
      if not real:
        continue   # A window with no real token pools to 0.
      values = np.stack([x[b, i] for i in real])
      out[b, m] = values.mean(axis=0) if mode == "mean" else values.max(axis=0)
  return np.moveaxis(out, 1, axis)


def _pool_mask_reference(mask, separate_cls, truncate_seq):
  windows = _windows(mask.shape[1], separate_cls, truncate_seq)
  out = np.zeros([mask.shape[0], len(windows)], np.int64)
  for b in range(mask.shape[0]):
    for m, window in enumerate(windows):
      out[b, m] = int(any(mask[b, i] for i in window))
  return out


def _pool_ids_reference(ids, separate_cls, truncate_seq):
  windows = _windows(ids.shape[1], separate_cls, truncate_seq)
  out = np.zeros([ids.shape[0], len(windows)], ids.dtype)
  for b in range(ids.shape[0]):
    for m, window in enumerate(windows):
      out[b, m] = ids[b, window[0]]
  return out


# --- Inputs ----------------------------------------------------------------------------

def _masks(length, seed=0):
  """Rows: all real; all padding; two hand-made patterns; one random.

  The hand-made rows give, for every flag combination, windows that are fully padded
  and windows that mix a real and a pad token (asserted in the value test).
  """
  rng = np.random.default_rng(seed)
  rows = [np.ones(length), np.zeros(length),
          np.resize([1, 0, 0, 1, 0, 1, 1, 0, 1], length),
          np.resize([0, 0, 1, 1, 1, 0, 0, 0, 1], length),
          rng.integers(0, 2, size=length)]
  return np.stack(rows).astype(np.int32)


def _hidden(batch, length, seed=0):
  return np.random.default_rng(seed).normal(size=(batch, length, WIDTH)).astype(np.float32)


# --- 1. Lengths ------------------------------------------------------------------------

# length -> expected pooled length per flag combination (in FLAGS order).
EXPECTED_LENGTHS = {
    512: (256, 257, 256, 256),
    8: (4, 5, 4, 4),
    9: (5, 5, 5, 5),
    7: (4, 4, 4, 4),
    2: (1, 2, 1, 1),
}


@pytest.mark.parametrize("length", sorted(EXPECTED_LENGTHS))
@pytest.mark.parametrize("flags", FLAGS, ids=FLAG_IDS)
def test_pooled_length_matches_pooled_tensor(length, flags):
  separate_cls, truncate_seq = flags
  expected = EXPECTED_LENGTHS[length][FLAGS.index(flags)]
  layer = FunnelPooling("mean", separate_cls, truncate_seq)
  pooled = layer(tf.zeros([1, length, 2]))
  assert pooled_length(length, separate_cls, truncate_seq) == expected
  assert pooled.shape[1] == expected
  assert len(_windows(length, separate_cls, truncate_seq)) == expected
  assert layer.pool_mask(tf.ones([1, length], tf.int32)).shape[1] == expected
  assert layer.pool_ids(tf.zeros([1, length], tf.int32)).shape[1] == expected
  if separate_cls and expected == 1:
    # Only [cls] is left: there is no pooled token to place on the position grid.
    with pytest.raises(ValueError, match="leaves only"):
      layer.pool_positions(np.arange(length))
  else:
    assert len(layer.pool_positions(np.arange(length))) == expected


@pytest.mark.parametrize("flags,lengths", [
    ((True, True), [512, 256, 128, 64]),
    ((True, False), [512, 257, 129, 65]),
    ((False, False), [512, 256, 128, 64]),
], ids=["cls_truncate", "cls", "plain"])
def test_repeated_pooling_lengths(flags, lengths):
  layer = FunnelPooling("max", *flags)
  hidden = tf.zeros([1, lengths[0], 2])
  for expected in lengths[1:]:
    assert pooled_length(hidden.shape[1], *flags) == expected
    hidden = layer(hidden)
    assert hidden.shape[1] == expected


# --- 2. Values -------------------------------------------------------------------------

@pytest.mark.parametrize("length", [8, 9, 7])
@pytest.mark.parametrize("masked", [False, True], ids=["no_mask", "mask"])
@pytest.mark.parametrize("flags", VALUE_FLAGS, ids=VALUE_FLAG_IDS)
@pytest.mark.parametrize("pooling_type", ["mean", "max"])
def test_hidden_pooling_matches_numpy(pooling_type, flags, masked, length):
  mask = _masks(length)
  hidden = _hidden(mask.shape[0], length)
  layer = FunnelPooling(pooling_type, *flags)
  output = layer(hidden, input_mask=mask if masked else None).numpy()
  expected = _pool_reference(hidden, 1, pooling_type, *flags, mask=mask if masked else None)
  assert output.dtype == np.float32
  np.testing.assert_allclose(output, expected, atol=1e-6, rtol=0)
  if masked:
    windows = _windows(length, *flags)
    real_counts = np.array([[sum(row[i] for i in w) for w in windows] for row in mask])
    # The masks must exercise empty and mixed windows, otherwise this test checks less.
    assert (real_counts == 0).any() and any(
        0 < real_counts[b, m] < len(w) for b in range(len(mask)) for m, w in enumerate(windows))
    np.testing.assert_array_equal(output[real_counts == 0], 0.0)
    np.testing.assert_array_equal(output[1], 0.0)   # Fully padded row.


def test_masked_max_ignores_a_larger_pad_token():
  hidden = np.array([[[0.0], [-5.0], [9.0], [-1.0], [-2.0]]], np.float32)
  mask = np.array([[1, 1, 0, 0, 0]], np.int32)
  # Windows [cls], [x1, x2], [x3] (x4 truncated): the pad 9.0 must not win.
  output = FunnelPooling("max")(hidden, input_mask=mask).numpy()
  np.testing.assert_array_equal(output[0, :, 0], [0.0, -5.0, 0.0])
  output = FunnelPooling("mean")(hidden, input_mask=mask).numpy()
  np.testing.assert_array_equal(output[0, :, 0], [0.0, -5.0, 0.0])


def _pooled_mask_reference(mask, separate_cls, truncate_seq, rule):
  """A pooled mask from its windows: real when `rule` (`all` for Hugging Face's, `any` for the authors')
  holds of the window's tokens."""
  windows = _windows(mask.shape[1], separate_cls, truncate_seq)
  return np.array([[int(rule(row[i] for i in window)) for window in windows] for row in mask])


@pytest.mark.parametrize("length", [8, 9, 7])
@pytest.mark.parametrize("flags", FLAGS, ids=FLAG_IDS)
@pytest.mark.parametrize("pooling_type", ["mean", "max"])
@pytest.mark.parametrize("semantics, rule", [("huggingface", all), ("funnel_authors", any)])
def test_whole_window_semantics_pool_padding_in_and_keep_their_mask_rule(semantics, rule, pooling_type, flags,
                                                                         length):
  """Hugging Face's and the authors' pooling: padding inside a window is averaged (or maxed) in; a window
  is real when every (Hugging Face's) or any (the authors') of its tokens is."""
  mask = _masks(length)
  hidden = _hidden(mask.shape[0], length)
  layer = FunnelPooling(pooling_type, *flags, semantics=semantics)
  output = layer(hidden, input_mask=mask).numpy()   # the mask does not change the values
  np.testing.assert_allclose(output, _pool_reference(hidden, 1, pooling_type, *flags), atol=1e-6, rtol=0)
  pooled_mask = layer.pool_mask(tf.constant(mask)).numpy()
  expected_mask = _pooled_mask_reference(mask, *flags, rule)
  np.testing.assert_array_equal(pooled_mask, expected_mask)
  # The masks hold windows that mix real tokens and padding, where the two rules disagree.
  assert (expected_mask != _pooled_mask_reference(mask, *flags, any if rule is all else all)).any()
  # The carry (float32 [B, N, T, S]) follows the same rule along either axis.
  carry = np.random.default_rng(3).normal(size=(mask.shape[0], 2, length, length)).astype(np.float32)
  for axis in (2, 3):
    np.testing.assert_allclose(layer(carry, input_mask=mask, axis=axis).numpy(),
                               _pool_reference(carry, axis, pooling_type, *flags), atol=1e-6, rtol=0)
  # The three semantics agree when every window is wholly real or wholly padding.
  aligned = np.ones_like(mask)
  zoo = FunnelPooling(pooling_type, *flags)
  np.testing.assert_array_equal(zoo(hidden, input_mask=aligned).numpy(),
                                layer(hidden, input_mask=aligned).numpy())
  np.testing.assert_array_equal(zoo.pool_mask(aligned).numpy(), layer.pool_mask(aligned).numpy())


def test_unknown_semantics_name_the_choices():
  with pytest.raises(ValueError, match=r"semantics must be one of \('zoo', 'huggingface', "
                                       r"'funnel_authors'\), got 'hf'"):
    FunnelPooling("mean", semantics="hf")


def test_the_old_name_is_refused_as_ambiguous_and_a_recorded_one_loads_as_hugging_faces():
  with pytest.raises(ValueError, match="'authors' is ambiguous.*'huggingface'.*'funnel_authors'"):
    FunnelPooling("mean", semantics="authors")
  recorded = dict(FunnelPooling("mean", semantics="huggingface").get_config(), semantics="authors")
  assert FunnelPooling.from_config(recorded).semantics == "huggingface"


# --- 3. Masks, ids, positions ----------------------------------------------------------

@pytest.mark.parametrize("length", [8, 9, 7, 2])
@pytest.mark.parametrize("flags", VALUE_FLAGS, ids=VALUE_FLAG_IDS)
def test_pool_mask_is_any_real_in_window(flags, length):
  mask = _masks(length, seed=length)
  output = FunnelPooling("mean", *flags).pool_mask(tf.constant(mask))
  assert output.dtype == tf.int32
  np.testing.assert_array_equal(output.numpy(), _pool_mask_reference(mask, *flags))


@pytest.mark.parametrize("length", [8, 9, 7, 2])
@pytest.mark.parametrize("flags", VALUE_FLAGS, ids=VALUE_FLAG_IDS)
def test_pool_ids_takes_first_id_of_window(flags, length):
  ids = np.random.default_rng(length).integers(0, 100, size=(3, length)).astype(np.int32)
  output = FunnelPooling("max", *flags).pool_ids(tf.constant(ids))
  assert output.dtype == tf.int32
  np.testing.assert_array_equal(output.numpy(), _pool_ids_reference(ids, *flags))


# (length, flags) -> positions after blocks 1, 2 (and 3), written by hand.
EXPECTED_POSITIONS = [
    (8, (True, True), [[-1, 1, 3, 5], [-3, 1]]),
    (8, (True, False), [[-1, 1, 3, 5, 7], [-3, 1, 5]]),
    (8, (False, True), [[0, 2, 4, 6], [0, 4]]),
    (8, (False, False), [[0, 2, 4, 6], [0, 4]]),
    (9, (True, True), [[-1, 1, 3, 5, 7], [-3, 1, 5]]),
    (9, (True, False), [[-1, 1, 3, 5, 7], [-3, 1, 5]]),
    (9, (False, False), [[0, 2, 4, 6, 8], [0, 4, 8]]),
    (7, (True, True), [[-1, 1, 3, 5], [-3, 1]]),
    (7, (False, False), [[0, 2, 4, 6], [0, 4]]),
    (16, (True, True), [[-1, 1, 3, 5, 7, 9, 11, 13], [-3, 1, 5, 9], [-7, 1]]),
]


@pytest.mark.parametrize("length,flags,expected", EXPECTED_POSITIONS,
                         ids=[f"{n}-{FLAG_IDS[FLAGS.index(f)]}" for n, f, _ in EXPECTED_POSITIONS])
def test_pool_positions_by_hand(length, flags, expected):
  layer = FunnelPooling("mean", *flags)
  np.testing.assert_array_equal(pool_positions(np.arange(length), *flags), expected[0])
  positions = np.arange(length)
  coverage = [[i] for i in range(length)]
  for block, expected_block in enumerate(expected, start=1):
    positions = layer.pool_positions(positions)
    np.testing.assert_array_equal(positions, expected_block)
    # Same as: each pooled token sits at the first original token of its window, and
    # with separate_cls the [cls] sits one new stride (2^block) before token 1.
    coverage = [sorted(i for m in w for i in coverage[m]) for w in _windows(len(coverage), *flags)]
    firsts = [c[0] for c in coverage]
    if flags[0]:
      firsts[0] = 1 - 2 ** block
      np.testing.assert_array_equal(positions[1:], 1 + np.arange(len(positions) - 1) * 2 ** block)
    np.testing.assert_array_equal(positions, firsts)


# --- 4. Padding invariance -------------------------------------------------------------

@pytest.mark.parametrize("length", [8, 9])
@pytest.mark.parametrize("flags", VALUE_FLAGS, ids=VALUE_FLAG_IDS)
@pytest.mark.parametrize("pooling_type", ["mean", "max"])
def test_outputs_do_not_depend_on_padding(pooling_type, flags, length):
  mask = _masks(length, seed=3)
  hidden = _hidden(mask.shape[0], length, seed=1)
  noise = np.random.default_rng(2).normal(scale=1e4, size=hidden.shape).astype(np.float32)
  perturbed = np.where(mask[..., None] == 1, hidden, noise)
  layer = FunnelPooling(pooling_type, *flags)
  original = layer(hidden, input_mask=mask).numpy()
  changed = layer(perturbed, input_mask=mask).numpy()
  real = FunnelPooling(pooling_type, *flags).pool_mask(tf.constant(mask)).numpy() == 1
  assert real.any() and (~real).any()
  np.testing.assert_array_equal(changed[real], original[real])
  np.testing.assert_array_equal(changed[~real], 0.0)
  # Without the mask the padding does leak in: the check above can fail.
  assert np.abs(layer(perturbed).numpy() - layer(hidden).numpy()).max() > 1.0


# --- 5. Residual-attention carry -------------------------------------------------------

@pytest.mark.parametrize("flags", VALUE_FLAGS, ids=VALUE_FLAG_IDS)
@pytest.mark.parametrize("pooling_type", ["mean", "max"])
def test_carry_pooled_along_queries_then_keys(pooling_type, flags):
  batch, heads, t_len, s_len = 5, 2, 8, 9
  carry = np.random.default_rng(4).normal(size=(batch, heads, t_len, s_len)).astype(np.float32)
  query_mask, key_mask = _masks(t_len, seed=5), _masks(s_len, seed=6)
  layer = FunnelPooling(pooling_type, *flags)
  queries = layer(carry, input_mask=query_mask, axis=2)   # [B, N, T, S] -> [B, N, T', S]
  both = layer(queries, input_mask=key_mask, axis=3)       # [B, N, T', S] -> [B, N, T', S']
  expected_queries = _pool_reference(carry, 2, pooling_type, *flags, mask=query_mask)
  expected = _pool_reference(expected_queries, 3, pooling_type, *flags, mask=key_mask)
  assert both.shape == (batch, heads, pooled_length(t_len, *flags), pooled_length(s_len, *flags))
  np.testing.assert_allclose(queries.numpy(), expected_queries, atol=1e-6, rtol=0)
  np.testing.assert_allclose(both.numpy(), expected, atol=1e-6, rtol=0)
  # axis=-1 is the key axis.
  np.testing.assert_array_equal(layer(queries, input_mask=key_mask, axis=-1).numpy(), both.numpy())


# --- 6. Upsampling ---------------------------------------------------------------------

def _upsample_reference(pooled, coverage, target_length):
  """Output token p is the pooled token whose window (in original tokens) contains p."""
  out = np.zeros([pooled.shape[0], target_length, pooled.shape[2]], pooled.dtype)
  for m, window in enumerate(coverage):
    for p in window:
      out[:, p] = pooled[:, m]
  return out


# (length, blocks of pooling, separate_cls, truncate_seq); lengths divisible by 2^blocks.
UPSAMPLING_CASES = [
    (16, 2, True, True),
    (16, 2, True, False),
    (16, 2, False, False),
    (8, 1, True, True),
    (8, 1, True, False),
    (32, 3, True, True),
    (12, 2, True, True),
    (12, 2, False, False),
]


@pytest.mark.parametrize("length,pools,separate_cls,truncate_seq", UPSAMPLING_CASES)
def test_upsampling_repeats_each_pooled_token_over_its_window(length, pools, separate_cls, truncate_seq):
  stride = 2 ** pools
  hidden = _hidden(2, length, seed=7)
  pool = FunnelPooling("mean", separate_cls, truncate_seq)
  pooled, positions = tf.constant(hidden), np.arange(length)
  for _ in range(pools):
    pooled, positions = pool(pooled), pool.pool_positions(positions)
  output = FunnelUpsampling(stride, separate_cls, truncate_seq)(pooled, target_length=length).numpy()
  assert output.shape == hidden.shape
  coverage = _coverage(length, pools, separate_cls, truncate_seq)
  np.testing.assert_array_equal(output, _upsample_reference(pooled.numpy(), coverage, length))
  if separate_cls:
    np.testing.assert_array_equal(output[:, 0], pooled.numpy()[:, 0])
  # Token p >= 1 comes from the pooled token m with positions[m] <= p < positions[m] + stride.
  first = 1 if separate_cls else 0
  for p in range(first, length):
    owners = [m for m in range(first, len(positions)) if positions[m] <= p < positions[m] + stride]
    if owners:
      np.testing.assert_array_equal(output[:, p], pooled.numpy()[:, owners[0]])
      assert p in coverage[owners[0]]
    else:
      np.testing.assert_array_equal(output[:, p], 0.0)   # Dropped by truncation.
  dropped = sorted(set(range(length)) - {p for window in coverage for p in window})
  assert dropped == (list(range(length - stride + 1, length)) if truncate_seq and separate_cls else [])


@pytest.mark.parametrize("separate_cls,truncate_seq", [(True, True), (True, False), (False, False)])
def test_upsampling_is_the_authors_at_every_length(separate_cls, truncate_seq):
  """Hugging Face's `upsample` (the authors' rule): also where a block pools an odd number of tokens
  (9, 10, 13 tokens ...), where a ceil-rounded window leaves positions that the repeat still fills."""
  import torch
  from transformers.models.funnel.modeling_funnel import upsample
  pool = FunnelPooling("mean", separate_cls, truncate_seq)
  for length in range(5, 21):
    hidden = _hidden(1, length, seed=length)
    pooled = tf.constant(hidden)
    for pools in (1, 2, 3):
      pooled = pool(pooled)
      if pooled.shape[1] < 2:
        break
      output = FunnelUpsampling(2 ** pools, separate_cls, truncate_seq)(pooled, target_length=length).numpy()
      expected = upsample(torch.from_numpy(pooled.numpy()), 2 ** pools, length, separate_cls,
                          truncate_seq).numpy()
      np.testing.assert_array_equal(output, expected, err_msg=f"length {length}, {pools} pooling steps")


def test_upsampling_inverts_pooling_shapes():
  hidden = tf.constant(_hidden(2, 16, seed=9))
  pool = FunnelPooling("max")
  pooled = pool(pool(hidden))
  assert pooled.shape == (2, 4, WIDTH)
  assert FunnelUpsampling(stride=4)(pooled, target_length=16).shape == (2, 16, WIDTH)


def test_upsampling_stride_one_is_identity():
  hidden = _hidden(2, 8, seed=10)
  np.testing.assert_array_equal(FunnelUpsampling(1)(hidden, target_length=8).numpy(), hidden)


# --- 7. Errors -------------------------------------------------------------------------

def test_unknown_pooling_type_names_the_choices():
  with pytest.raises(ValueError, match=r"'mean'.*'max'.*'avg'"):
    FunnelPooling("avg")


@pytest.mark.parametrize("stride", [3, 0, 6])
def test_upsampling_stride_must_be_power_of_two(stride):
  with pytest.raises(ValueError, match="power of two"):
    FunnelUpsampling(stride=stride)


def test_unknown_pooling_mode():
  with pytest.raises(ValueError, match="'first'.*'any'.*'sum'"):
    pool_sequence(tf.zeros([1, 4, 2]), mode="sum")


# --- 8. Standard checks ----------------------------------------------------------------

# Flags vary so that a config missing one of them changes the outputs.
@pytest.mark.parametrize("pooling_type,separate_cls,truncate_seq,semantics",
                         [("mean", True, True, "zoo"), ("max", True, False, "zoo"),
                          ("max", False, True, "zoo"), ("mean", True, True, "huggingface"),
                          ("max", True, False, "funnel_authors")])
def test_funnel_pooling_standard_checks(pooling_type, separate_cls, truncate_seq, semantics, tmp_path):
  x = np.random.default_rng(11).normal(size=(2, 8, 16)).astype(np.float32)
  m = np.array([[1] * 8, [1] * 5 + [0] * 3], np.int32)
  run_layer_checks(lambda: FunnelPooling(pooling_type, separate_cls, truncate_seq, semantics=semantics),
                   {"hidden": x, "mask": m},
                   lambda layer, inp: layer(inp["hidden"], input_mask=inp["mask"]), tmp_path)


@pytest.mark.parametrize("separate_cls", [True, False], ids=["cls", "plain"])
def test_funnel_upsampling_standard_checks(separate_cls, tmp_path):
  x = np.random.default_rng(12).normal(size=(2, 4, 16)).astype(np.float32)
  run_layer_checks(lambda: FunnelUpsampling(stride=4, separate_cls=separate_cls), {"hidden": x},
                   lambda layer, inp: layer(inp["hidden"], target_length=16), tmp_path)


# --- 9. XLA ----------------------------------------------------------------------------

@pytest.mark.parametrize("flags", VALUE_FLAGS, ids=VALUE_FLAG_IDS)
@pytest.mark.parametrize("mode", ["mean", "max", "first", "any"])
def test_pool_sequence_jit_compile_equals_eager(mode, flags):
  mask = tf.constant(_masks(9, seed=13))
  if mode in ("first", "any"):
    tensor = mask if mode == "any" else tf.constant(np.arange(45, dtype=np.int32).reshape(5, 9))
    input_mask = None
  else:
    tensor, input_mask = tf.constant(_hidden(5, 9, seed=14)), mask

  def pool(t, m):
    return pool_sequence(t, 1, mode, *flags, input_mask=m)

  eager = pool(tensor, input_mask)
  compiled = tf.function(pool, jit_compile=True)(tensor, input_mask)
  np.testing.assert_allclose(compiled.numpy(), eager.numpy(), atol=1e-6, rtol=0)

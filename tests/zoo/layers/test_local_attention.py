"""Block-local attention with global tokens against full attention under the same mask, in numpy.

The reference is the pairwise numpy formula of `reference.py` (every pair scored, then the
band-and-global mask of the definition below, written here from the definition, not from
`zoo.windows`) and a softmax over all keys: what the local layers compute by blocks."""

import numpy as np
import pytest
import tensorflow as tf

from tests.layer_checks import run_layer_checks
from tests.zoo.layers import reference
from zoo.grids import pool_positions
from zoo.layers import MultiHeadAttention
from zoo.layers import RelativeMultiHeadAttention
from zoo.windows import LocalGeometry

WIDTH, HEADS, HEAD_SIZE = 16, 2, 4


def pattern(window, global_tokens, query_positions, key_positions):
  """The definition: |p_i - p_j| <= W · (key spacing), or i or j among the first G."""
  spacing = key_positions[1] - key_positions[0] if len(key_positions) > 1 else 1.0
  allowed = np.zeros([len(query_positions), len(key_positions)], bool)
  for i, p in enumerate(query_positions):
    for j, k in enumerate(key_positions):
      allowed[i, j] = abs(p - k) <= window * spacing or i < global_tokens or j < global_tokens
  return allowed


# (name, key length, query positions, key positions): self-attention at lengths that are and are not
# multiples of the block, Funnel's pooled queries against unpooled keys (with and without a separate
# [cls]), a pooled block's own grid, and offset grids.
def _grids():
  return [
      ("self_13", 13, np.arange(13), np.arange(13)),
      ("self_16", 16, np.arange(16), np.arange(16)),
      ("pooled_queries", 16, np.arange(0, 16, 2), np.arange(16)),
      ("pooled_queries_cls", 16, pool_positions(np.arange(16)), np.arange(16)),
      ("pooled_queries_cls_odd", 15, pool_positions(np.arange(15), True, False), np.arange(15)),
      ("pooled_grid_cls", 8, pool_positions(np.arange(16)), pool_positions(np.arange(16))),
      ("offset", 9, np.arange(3.0, 13.0, 2.0), np.arange(-2.0, 7.0)),
      ("far_apart", 9, np.arange(12.0, 17.0), np.arange(9.0)),   # cross-attention sharing no window pair
  ]


GRIDS = _grids()
SETTINGS = [(0, 1), (1, 1), (2, 2), (3, 1), (5, 3), (1, 5)]   # (window, global tokens)


def test_the_blocks_hold_exactly_the_pattern_for_every_window_length_and_grid():
  """Every pair of the definition is scored once (in a window, a global row or a global column) and no
  other pair is: for windows 0..8, lengths 1..40 and every Funnel grid."""
  checked = 0
  for window in range(9):
    for length in range(1, 41):
      grids = [(np.arange(length), np.arange(length))]
      if length >= 4:
        for separate_cls, truncate_seq in ((True, True), (True, False), (False, True)):
          pooled = pool_positions(np.arange(length), separate_cls, truncate_seq)
          grids += [(pooled, np.arange(length)), (pooled, pooled)]
      for query_positions, key_positions in grids:
        for global_tokens in range(1, min(3, len(query_positions)) + 1):
          geometry = LocalGeometry(window, global_tokens, query_positions, key_positions)
          expected = pattern(window, global_tokens, query_positions, key_positions)
          np.testing.assert_array_equal(geometry.dense_allowed(), expected)
          scored = np.zeros(expected.shape, int)
          k, q, s = np.nonzero(geometry.local_allowed)
          np.add.at(scored, (k * geometry.query_block + q, k * geometry.key_block + s - geometry.lead), 1)
          scored[:global_tokens] = 0
          scored[:global_tokens] += 1   # the global rows
          scored[global_tokens:, :global_tokens] += 1   # the global columns
          np.testing.assert_array_equal(scored, expected.astype(int))
          # The windows are short: 3 blocks of at most the window plus the query spacing.
          assert geometry.key_block <= window + 2 * geometry.ratio
          checked += 1
  assert checked > 5000


def _layer(form, window, global_tokens, separate_cls, residual=True, **kwargs):
  common = dict(residual_attention=residual, name="attention", **kwargs)
  if window is not None:
    common.update(attention_window=window, global_tokens=global_tokens)
  if form == "absolute":
    return MultiHeadAttention(HEADS, HEAD_SIZE, **common)
  return RelativeMultiHeadAttention(HEADS, HEAD_SIZE, position_encoding=form, use_segment_bias=True,
                                    separate_cls=separate_cls, **common)


def _case(grid, seed):
  _, length, query_positions, key_positions = grid
  rng = np.random.default_rng(seed)
  value = rng.normal(size=(3, length, WIDTH)).astype(np.float32)
  query = rng.normal(size=(3, len(query_positions), WIDTH)).astype(np.float32)
  key_segments = rng.integers(0, 2, size=(3, length)).astype(np.int32)
  query_segments = rng.integers(0, 2, size=(3, len(query_positions))).astype(np.int32)
  key_segments[:, 0] = query_segments[:, 0] = 2
  mask = (np.arange(length)[None] < np.array([length, length // 2 + 1, 1])[:, None]).astype(np.int32)
  return query, value, query_segments, key_segments, mask


def _call(layer, form, grid, query, value, query_segments, key_segments, mask, carry=None, index=0):
  _, _, query_positions, key_positions = grid
  kwargs = dict(attention_mask=mask, attention_carry=carry, layer_index=index)
  if form != "absolute":
    kwargs.update(query_positions=query_positions.tolist(), key_positions=key_positions.tolist(),
                  query_segment_ids=query_segments, key_segment_ids=key_segments)
  return layer(query, value, **kwargs)


# Absolute attention (positions live in the embeddings) on the self-attention grids only. `make test-fast`
# runs FAST_CASES (each form, self-attention and a pooled grid with [cls]); the full suite all.
FAST_CASES = ("self_13-factorized", "pooled_queries_cls-shift", "self_16-absolute", "offset-factorized")
FORMS_AND_GRIDS = [pytest.param(form, grid, id=f"{grid[0]}-{form}",
                                marks=() if f"{grid[0]}-{form}" in FAST_CASES else (pytest.mark.slow,))
                   for grid in GRIDS for form in ("factorized", "shift", "absolute")
                   if form != "absolute" or grid[0].startswith("self")]


@pytest.mark.parametrize("form, grid", FORMS_AND_GRIDS)
def test_local_attention_equals_full_attention_under_the_pattern_in_numpy(form, grid):
  """Two residual layers (the second takes the first's carry, running mean) at every setting of
  SETTINGS, on three inputs of different padding (full, half, only [cls]): outputs and probabilities
  equal the numpy formula's to 1e-5, carries (raw scores) to 1e-5 of their size."""
  name, _, query_positions, key_positions = grid
  query, value, query_segments, key_segments, mask = _case(grid, seed=len(name))
  separate_cls = "cls" in name
  worst = 0.0
  for window, global_tokens in SETTINGS:
    if global_tokens > min(len(query_positions), len(key_positions)):
      continue
    allowed = pattern(window, global_tokens, query_positions, key_positions)
    layer = _layer(form, window, global_tokens, separate_cls, running_mean=True)
    _call(layer, form, grid, query, value, query_segments, key_segments, mask)
    rng = np.random.default_rng(window)
    layer.set_weights([rng.normal(scale=0.5, size=w.shape).astype(np.float32) for w in layer.weights])
    weights = reference.named_weights(layer)
    first = _call(layer, form, grid, query, value, query_segments, key_segments, mask)
    second = _call(layer, form, grid, query, value, query_segments, key_segments, mask, first.carry, 1)

    if form == "absolute":
      scores = reference.content_scores(weights, query.astype(np.float64), value.astype(np.float64))
    else:
      scores = reference.relative_scores(weights, query.astype(np.float64), value.astype(np.float64),
                                         query_positions, key_positions, query_segments, key_segments,
                                         separate_cls=separate_cls)
    geometry = LocalGeometry(window, global_tokens, query_positions, key_positions)
    keep = allowed[None, None] & (mask[:, None, None, :] > 0)
    for depth, result in enumerate((first, second)):
      carry = scores * (depth + 1)
      probs = reference.softmax(np.where(keep, carry / (depth + 1), -1e9))
      output = reference.attention_output(weights, probs, value.astype(np.float64))
      got_probs = geometry.dense_probs(*(p.numpy() for p in result.probs))
      got_carry = geometry.dense_probs(*(c.numpy() for c in result.carry))
      differences = [np.abs(result.output.numpy() - output).max(),
                     np.abs(got_probs - np.where(allowed, probs, 0.0)).max(),
                     # raw scores grow with the distances: relative to their size
                     np.abs(np.where(allowed, got_carry - carry, 0.0)).max() / max(1.0, np.abs(carry).max())]
      worst = max(worst, *differences)
      assert max(differences) < 1e-5, (window, global_tokens, depth, differences)
    # The mask mattered: full attention differs.
    full = reference.attention_output(weights, reference.softmax(np.where(mask[:, None, None, :] > 0, scores,
                                                                          -1e9)), value.astype(np.float64))
    if not allowed.all():
      assert np.abs(first.output.numpy() - full).max() > 1e-3
  print(f"{form} {name}: max |diff| to numpy {worst:.1e}")


def _traced_shapes(layer_fn, *specs):
  graph = tf.function(layer_fn).get_concrete_function(*specs).graph
  return [tuple(output.shape.as_list()) for op in graph.get_operations() for output in op.outputs
          if output.shape.rank is not None]


@pytest.mark.parametrize("form", ["factorized", "shift", "absolute"])
def test_no_tensor_spans_queries_and_keys_and_the_compiled_graph_has_no_gather(form):
  """At T = 256, window 8, 2 global tokens: no tensor of the traced layer holds a quarter of a
  `[B, N, T, S]` score's elements (the blocks hold B·N·T·(2 + 3·8), the shift form's table
  B·N·T·(8 + 3·8)); XLA's HLO has no gather."""
  length, batch = 256, 2
  layer = _layer(form, 8, 2, separate_cls=form != "absolute")
  positions = list(range(length))
  ids = tf.zeros([batch, length], tf.int32)

  def call(x, mask):
    kwargs = {} if form == "absolute" else dict(query_positions=positions, key_positions=positions,
                                                 query_segment_ids=ids, key_segment_ids=ids)
    result = layer(x, attention_mask=mask, **kwargs)
    return result.output, result.carry

  specs = (tf.TensorSpec([batch, length, WIDTH], tf.float32), tf.TensorSpec([batch, length], tf.int32))
  sizes = [int(np.prod(shape)) for shape in _traced_shapes(call, *specs) if None not in shape]
  full = batch * HEADS * length * length
  assert max(sizes) >= batch * HEADS * length * 26   # the block scores were traced
  assert max(sizes) < full / 4, f"a tensor of {max(sizes)} elements; a full score has {full}"
  x = tf.random.normal([2, length, WIDTH])
  mask = tf.ones([2, length], tf.int32)
  hlo = tf.function(call, jit_compile=True).experimental_get_compiler_ir(x, mask)(stage="hlo")
  assert "dot(" in hlo and " gather(" not in hlo


@pytest.mark.parametrize("form", ["factorized", pytest.param("shift", marks=pytest.mark.slow)])
def test_standard_layer_checks(form, tmp_path):
  """Config round trip (window and global tokens included), .keras and SavedModel reload, XLA and
  mixed_bfloat16 (the carry and probabilities float32), on a pool-query-only grid with padding."""
  rng = np.random.default_rng(0)
  inputs = {
      "pooled": rng.normal(size=(2, 8, WIDTH)).astype(np.float32),
      "hidden": rng.normal(size=(2, 16, WIDTH)).astype(np.float32),
      "mask": np.array([[1] * 16, [1] * 7 + [0] * 9], np.int32),
      "segments": np.array([[2] + [0] * 7 + [1] * 8] * 2, np.int32),
  }
  pooled_positions = pool_positions(np.arange(16)).tolist()

  def build_outputs(layer, x):
    result = layer(x["pooled"], x["hidden"], attention_mask=x["mask"], query_positions=pooled_positions,
                   query_segment_ids=x["segments"][:, ::2], key_segment_ids=x["segments"])
    return {"output": result.output, "carry_rows": result.carry[0], "carry_blocks": result.carry[1],
            "probs": result.probs[1]}

  model = run_layer_checks(lambda: _layer(form, 3, 2, True, attention_dropout=0.1), inputs, build_outputs,
                           tmp_path, float32_outputs=("carry_rows", "carry_blocks", "probs"))
  config = model.get_layer("attention").get_config()
  assert config["attention_window"] == 3 and config["global_tokens"] == 2


def test_settings_and_inputs_local_attention_refuses():
  with pytest.raises(ValueError, match="global_tokens must be a whole number >= 1"):
    MultiHeadAttention(2, 4, attention_window=2, global_tokens=0)
  with pytest.raises(ValueError, match="attention_window must be None"):
    MultiHeadAttention(2, 4, attention_window=-1)
  x = tf.zeros([1, 6, WIDTH])
  layer = MultiHeadAttention(2, 4, attention_window=1)
  with pytest.raises(ValueError, match=r"takes a \[batch, keys\] padding mask"):
    layer(x, attention_mask=tf.ones([1, 6, 6]))
  with pytest.raises(ValueError, match="global_tokens .* exceeds the sequence length"):
    MultiHeadAttention(2, 4, attention_window=1, global_tokens=7)(x)
  relative = RelativeMultiHeadAttention(2, 4, attention_window=1)
  with pytest.raises(ValueError, match="evenly spaced query_positions"):
    relative(x, query_positions=[0, 1, 2, 4, 5, 6])
  with pytest.raises(ValueError, match="known when the graph is built"):
    tf.function(lambda p: relative(x, query_positions=p))(tf.range(6, dtype=tf.float32))

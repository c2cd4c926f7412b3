import numpy as np
import pytest
import tensorflow as tf

from tests.layer_checks import run_layer_checks
from tests.zoo.layers import reference
from zoo.layers import RelativeMultiHeadAttention

WIDTH, HEADS, HEAD_SIZE = 16, 2, 4

# (name, keys length, query positions, key positions): uneven lengths, pooled-query
# grids with and without a separate [cls], and a block-2 pool-query-only grid.
GRIDS = [
    ("self_uneven", 7, np.arange(7), np.arange(7)),
    ("pooled_queries_no_cls", 9, np.arange(0, 9, 2), np.arange(9)),
    ("pooled_queries_cls", 8, np.array([-1, 1, 3, 5]), np.arange(8)),
    ("pooled_queries_cls_no_truncate", 8, np.array([-1, 1, 3, 5, 7]), np.arange(8)),
    ("block2_pool_q_only", 4, np.array([-3, 1]), np.array([-1, 1, 3, 5])),
    ("offset_grids", 5, np.array([3.0, 5.0, 7.0]), np.array([-2.0, -1.0, 0.0, 1.0, 2.0])),
]


def _random_layer(form, use_segment_bias, separate_cls, query, value, seed=0, **kwargs):
  layer = RelativeMultiHeadAttention(
      HEADS, HEAD_SIZE, position_encoding=form, use_segment_bias=use_segment_bias,
      separate_cls=separate_cls, residual_attention=True, name="attention", **kwargs)
  layer(query, value, query_positions=np.arange(query.shape[1]), key_positions=np.arange(value.shape[1]),
        query_segment_ids=np.zeros(query.shape[:2], np.int32),
        key_segment_ids=np.zeros(value.shape[:2], np.int32))
  rng = np.random.default_rng(seed)
  # Non-zero biases so every term of the score is exercised.
  layer.set_weights([rng.normal(scale=0.5, size=w.shape).astype(np.float32) for w in layer.weights])
  return layer


def _inputs(seq_length, query_positions, key_positions, seed=1):
  rng = np.random.default_rng(seed)
  value = rng.normal(size=(2, seq_length, WIDTH)).astype(np.float32)
  query = rng.normal(size=(2, len(query_positions), WIDTH)).astype(np.float32)
  key_segments = rng.integers(0, 2, size=(2, seq_length)).astype(np.int32)
  key_segments[:, 0] = 2
  query_segments = rng.integers(0, 2, size=(2, len(query_positions))).astype(np.int32)
  query_segments[:, 0] = 2
  return query, value, query_segments, key_segments


@pytest.mark.parametrize("form", ["factorized", "shift"])
@pytest.mark.parametrize("segments", [False, True], ids=["no_segments", "segments"])
@pytest.mark.parametrize("separate_cls", [False, True], ids=["joint_cls", "separate_cls"])
@pytest.mark.parametrize("grid", GRIDS, ids=[g[0] for g in GRIDS])
def test_scores_match_pairwise_numpy_formula(form, segments, separate_cls, grid):
  _, seq_length, query_positions, key_positions = grid
  query, value, query_segments, key_segments = _inputs(seq_length, query_positions, key_positions)
  layer = _random_layer(form, segments, separate_cls, query, value)
  segment_kwargs = dict(query_segment_ids=query_segments, key_segment_ids=key_segments) if segments else {}
  scores = layer(query, value, query_positions=query_positions.tolist(),
                 key_positions=key_positions.tolist(), **segment_kwargs).carry   # no carry in: the scores
  expected = reference.relative_scores(
      reference.named_weights(layer), query.astype(np.float64), value.astype(np.float64),
      query_positions, key_positions,
      query_segments if segments else None, key_segments if segments else None,
      separate_cls=separate_cls)
  np.testing.assert_allclose(scores.numpy(), expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("grid", GRIDS, ids=[g[0] for g in GRIDS])
def test_factorized_and_shift_forms_agree(grid):
  _, seq_length, query_positions, key_positions = grid
  query, value, query_segments, key_segments = _inputs(seq_length, query_positions, key_positions, seed=5)
  factorized = _random_layer("factorized", True, True, query, value, seed=3)
  shift = _random_layer("shift", True, True, query, value, seed=3)
  kwargs = dict(query_positions=query_positions, key_positions=key_positions,
                query_segment_ids=query_segments, key_segment_ids=key_segments)
  out_f, scores_f, _ = factorized(query, value, **kwargs)
  out_s, scores_s, _ = shift(query, value, **kwargs)
  np.testing.assert_allclose(scores_f.numpy(), scores_s.numpy(), atol=1e-5, rtol=0)
  np.testing.assert_allclose(out_f.numpy(), out_s.numpy(), atol=1e-5, rtol=0)


def test_factorized_takes_per_example_and_runtime_positions():
  query, value, _, _ = _inputs(6, np.arange(6), np.arange(6))
  layer = _random_layer("factorized", False, False, query, value)
  positions = np.stack([np.arange(6), np.array([0, 1, 2, 0, 1, 2])]).astype(np.float32)  # packed
  run = tf.function(lambda p: layer(query, value, query_positions=p, key_positions=p).carry)
  scores = run(tf.constant(positions)).numpy()
  weights = reference.named_weights(layer)
  for b in range(2):
    expected = reference.relative_scores(weights, query[b:b + 1].astype(np.float64),
                                         value[b:b + 1].astype(np.float64), positions[b], positions[b])
    np.testing.assert_allclose(scores[b:b + 1], expected, atol=1e-5, rtol=0)


def _op_types(form):
  layer = RelativeMultiHeadAttention(HEADS, HEAD_SIZE, position_encoding=form, use_segment_bias=True,
                                     separate_cls=True, residual_attention=True)
  spec = tf.TensorSpec([2, 8, WIDTH], tf.float32)
  ids = tf.TensorSpec([2, 8], tf.int32)
  pooled = tf.TensorSpec([2, 4, WIDTH], tf.float32)
  pooled_ids = tf.TensorSpec([2, 4], tf.int32)

  @tf.function
  def pooled_layer(q, kv, q_ids, kv_ids, mask):
    return layer(q, kv, attention_mask=mask, query_positions=[-1, 1, 3, 5],
                 query_segment_ids=q_ids, key_segment_ids=kv_ids).output

  graph = pooled_layer.get_concrete_function(pooled, spec, pooled_ids, ids, ids).graph
  types = {op.type for op in graph.get_operations()}
  for function in graph.as_graph_def().library.function:
    types |= {node.op for node in function.node_def}
  return types


def test_factorized_graph_has_no_gather():
  types = _op_types("factorized")
  assert "Einsum" in types or "BatchMatMulV2" in types   # the graph was really traced
  gathers = {t for t in types if "Gather" in t}
  assert not gathers, f"factorized attention must not gather, found {gathers}"


def test_errors_name_the_problem():
  with pytest.raises(ValueError, match=r"position_encoding must be one of \('factorized', 'shift'\)"):
    RelativeMultiHeadAttention(2, 4, position_encoding="rotary")
  query, value, _, _ = _inputs(6, np.arange(6), np.arange(6))
  shift = _random_layer("shift", False, False, query, value)
  with pytest.raises(ValueError, match="evenly spaced"):
    shift(query, value, query_positions=[0, 1, 2, 4, 5, 6])
  with pytest.raises(ValueError, match="known when the graph is built"):
    tf.function(lambda p: shift(query, value, query_positions=p))(tf.range(6, dtype=tf.float32))
  with pytest.raises(ValueError, match="whole multiple"):
    shift(query[:, :3], value, query_positions=[0, 3, 6], key_positions=[0, 2, 4, 6, 8, 10])
  segmented = _random_layer("factorized", True, False, query, value)
  with pytest.raises(ValueError, match="needs query_segment_ids"):
    segmented(query, value)


@pytest.mark.parametrize("form", ["factorized", "shift"])
def test_standard_layer_checks(form, tmp_path):
  rng = np.random.default_rng(0)
  inputs = {
      "pooled": rng.normal(size=(2, 4, WIDTH)).astype(np.float32),
      "hidden": rng.normal(size=(2, 8, WIDTH)).astype(np.float32),
      "mask": np.array([[1] * 8, [1] * 5 + [0] * 3], np.int32),
      "segments": np.array([[2, 0, 0, 0, 1, 1, 1, 1]] * 2, np.int32),
  }

  def build_outputs(layer, x):
    result = layer(x["pooled"], x["hidden"], attention_mask=x["mask"],
                   query_positions=[-1, 1, 3, 5], query_segment_ids=x["segments"][:, ::2],
                   key_segment_ids=x["segments"])
    return {"output": result.output, "carry": result.carry}

  run_layer_checks(
      lambda: RelativeMultiHeadAttention(HEADS, HEAD_SIZE, position_encoding=form, use_segment_bias=True,
                                         separate_cls=True, residual_attention=True,
                                         attention_dropout=0.1),
      inputs, build_outputs, tmp_path, float32_outputs=("carry",))

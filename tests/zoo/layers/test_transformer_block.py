"""TransformerBlock against a numpy Post-LN / Pre-LN reference and its variants."""

import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import fast_or_slow
from tests.layer_checks import run_layer_checks
from tests.zoo.layers import reference
from zoo.layers import AttentionResult
from zoo.layers import TransformerBlock

WIDTH, HEADS, HEAD_SIZE, FFN = 16, 2, 8, 32


def _inputs(length=8, seed=0):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(2, length, WIDTH)).astype(np.float32)
  mask = np.ones([2, length], np.int32)
  mask[1, length - 3:] = 0
  return x, mask


def _randomize(layer, seed=1):
  rng = np.random.default_rng(seed)
  layer.set_weights([rng.normal(scale=0.3, size=w.shape).astype(np.float32) for w in layer.weights])


def _numpy_block(block, x, kv, mask, norm_first):
  w = reference.named_weights(block)
  attention = {k[len("attention/"):]: v for k, v in w.items() if k.startswith("attention/")}

  def norm(name, h):
    return reference.layer_norm(h, w[f"{name}/gamma"], w[f"{name}/beta"], block.layer_norm_epsilon)

  q_in, kv_in = (norm("attention_norm", x), norm("attention_norm", kv)) if norm_first else (x, kv)
  probs = reference.softmax(reference.content_scores(attention, q_in, kv_in)
                            + (1 - mask[:, None, None, :]) * -1e9)
  hidden = x + reference.attention_output(attention, probs, kv_in)
  if not norm_first:
    hidden = norm("attention_norm", hidden)
  ffn_in = norm("output_norm", hidden) if norm_first else hidden
  inner = reference.gelu(ffn_in @ w["intermediate/kernel"] + w["intermediate/bias"])
  out = hidden + inner @ w["output/kernel"] + w["output/bias"]
  return out if norm_first else norm("output_norm", out)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
@pytest.mark.parametrize("pool_q_only", [False, True], ids=["self", "pool_q_only"])
def test_block_matches_numpy(norm_first, pool_q_only):
  x, mask = _inputs()
  query = x[:, ::2] if pool_q_only else x
  block = TransformerBlock(HEADS, HEAD_SIZE, FFN, norm_first=norm_first, name="block")
  block(query, x)
  _randomize(block)
  output = block(query, x, attention_mask=mask).output.numpy()
  expected = _numpy_block(block, query.astype(np.float64), x.astype(np.float64), mask, norm_first)
  assert output.shape == query.shape
  np.testing.assert_allclose(output, expected, atol=2e-5, rtol=0)


@pytest.mark.parametrize("position_encoding", ["absolute", "factorized", "shift"])
def test_realformer_layer_zero_equals_post_ln(position_encoding):
  x, mask = _inputs()
  post_ln = TransformerBlock(HEADS, HEAD_SIZE, FFN, position_encoding=position_encoding)
  realformer = TransformerBlock(HEADS, HEAD_SIZE, FFN, position_encoding=position_encoding,
                                residual_attention=True)
  post_ln(x)
  realformer(x)
  _randomize(post_ln)
  realformer.set_weights(post_ln.get_weights())
  expected = post_ln(x, attention_mask=mask)
  result = realformer(x, attention_mask=mask)
  np.testing.assert_array_equal(result.output.numpy(), expected.output.numpy())
  # Layer 0's carry is its own score, with or without residual attention.
  np.testing.assert_array_equal(result.carry.numpy(), expected.carry.numpy())
  assert result.carry.shape == (2, HEADS, 8, 8)


def test_carry_passes_through_and_changes_the_next_layer():
  x, mask = _inputs()
  block = TransformerBlock(HEADS, HEAD_SIZE, FFN, residual_attention=True, dropout=0.0, attention_dropout=0.0)
  first = block(x, attention_mask=mask)
  expected = reference.softmax(first.carry.numpy() + (1 - mask[:, None, None]) * -1e9)
  np.testing.assert_allclose(first.probs.numpy(), expected, atol=1e-6)
  with_carry = block(x, attention_mask=mask, attention_carry=first.carry, layer_index=1)
  without_carry = block(x, attention_mask=mask)
  assert np.abs(with_carry.output.numpy() - without_carry.output.numpy()).max() > 1e-4
  np.testing.assert_allclose(with_carry.carry.numpy(), 2 * first.carry.numpy(), atol=1e-5, rtol=0)


@pytest.mark.parametrize("options", [{}, dict(residual_attention=True), dict(position_encoding="factorized")],
                         ids=["post_ln", "realformer", "relative"])
def test_the_result_has_the_same_fields_whatever_the_flags(options):
  x, mask = _inputs()
  result = TransformerBlock(HEADS, HEAD_SIZE, FFN, **options)(x[:, :4], x, attention_mask=mask)
  assert isinstance(result, AttentionResult)
  assert result.output.shape == (2, 4, WIDTH)
  assert result.carry.shape == result.probs.shape == (2, HEADS, 4, 8)
  assert result.carry.dtype == result.probs.dtype == tf.float32
  np.testing.assert_allclose(result.probs.numpy().sum(-1), 1.0, atol=1e-6)


def test_attention_dropout_reaches_the_attention_and_dropout_the_hidden_states():
  block = TransformerBlock(HEADS, HEAD_SIZE, FFN, dropout=0.2, attention_dropout=0.3)
  block(_inputs()[0])
  assert block.attention.attention_dropout == 0.3
  assert {layer.rate for layer in (block.attention_output_dropout, block.output_dropout)} == {0.2}


def test_relative_forms_agree_in_a_pool_q_only_block():
  x, mask = _inputs()
  pooled, positions = x[:, :4], [-1, 1, 3, 5]
  blocks = [TransformerBlock(HEADS, HEAD_SIZE, FFN, position_encoding=form, separate_cls=True,
                             use_segment_bias=True) for form in ("factorized", "shift")]
  segments = np.array([[2, 0, 0, 0, 1, 1, 1, 1]] * 2, np.int32)
  kwargs = dict(attention_mask=mask, query_positions=positions, query_segment_ids=segments[:, :4],
                key_segment_ids=segments)
  blocks[0](pooled, x, **kwargs)
  blocks[1](pooled, x, **kwargs)
  _randomize(blocks[0])
  blocks[1].set_weights(blocks[0].get_weights())
  outputs = [block(pooled, x, **kwargs).output.numpy() for block in blocks]
  np.testing.assert_allclose(outputs[0], outputs[1], atol=1e-5, rtol=0)


def test_errors_list_valid_choices():
  with pytest.raises(ValueError, match=r"position_encoding must be one of \('absolute'"):
    TransformerBlock(2, 4, 8, position_encoding="learned")
  with pytest.raises(ValueError, match=r"activation must be one of \('gelu'"):
    TransformerBlock(2, 4, 8, activation="gelu_fast")
  with pytest.raises(ValueError, match="need a relative position_encoding"):
    TransformerBlock(2, 4, 8, use_segment_bias=True)


VARIANTS = {
    "post_ln_absolute": dict(),
    "pre_ln_absolute": dict(norm_first=True),
    "realformer_running_mean": dict(residual_attention=True, running_mean=True),
    "funnel_factorized": dict(position_encoding="factorized", use_segment_bias=True, separate_cls=True),
    "funnel_shift_residual": dict(position_encoding="shift", use_segment_bias=True, separate_cls=True,
                                  residual_attention=True, activation="gelu_approximate"),
}


# `make test-fast` runs a RealFormer block and a Funnel block; the full suite every variant.
FAST_VARIANTS = ("realformer_running_mean", "funnel_factorized")


@pytest.mark.parametrize("variant", fast_or_slow(VARIANTS, FAST_VARIANTS))
def test_standard_layer_checks(variant, tmp_path):
  options = VARIANTS[variant]
  x, mask = _inputs()
  relative = options.get("position_encoding", "absolute") != "absolute"
  inputs = {"x": x, "mask": mask, "segments": np.array([[2, 0, 0, 0, 1, 1, 1, 1]] * 2, np.int32)}

  def build_outputs(layer, tensors):
    kwargs = dict(attention_mask=tensors["mask"])
    query = tensors["x"]
    if relative:   # pool-query-only call
      query = tensors["x"][:, :4]
      kwargs.update(query_positions=[-1, 1, 3, 5], query_segment_ids=tensors["segments"][:, :4],
                    key_segment_ids=tensors["segments"])
    result = layer(query, tensors["x"], **kwargs)
    return {"output": result.output, "carry": result.carry, "probs": result.probs}

  run_layer_checks(lambda: TransformerBlock(HEADS, HEAD_SIZE, FFN, **options), inputs, build_outputs,
                   tmp_path, float32_outputs=("carry", "probs"))

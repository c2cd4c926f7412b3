"""MultiHeadAttention and RealFormer residual attention against numpy formulas."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from tests.layer_checks import run_layer_checks
from tests.zoo.layers import reference
from zoo.layers import AttentionResult
from zoo.layers import MultiHeadAttention
from zoo.layers import attention as attention_module
from zoo.layers import drop_attention_probs

WIDTH, HEADS, HEAD_SIZE, LENGTH = 16, 2, 4, 6


def _inputs(seed=0, batch=2):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(batch, LENGTH, WIDTH)).astype(np.float32)
  mask = np.ones([batch, LENGTH], np.int32)
  mask[-1, 4:] = 0
  return x, mask


def _stack(depth, running_mean=False, attention_dropout=0.0):
  layers = [MultiHeadAttention(HEADS, HEAD_SIZE, residual_attention=True, running_mean=running_mean,
                               attention_dropout=attention_dropout, name=f"attention_{i}")
            for i in range(depth)]
  return layers


def _masked_softmax(logits, mask):
  return reference.softmax(logits + (1 - mask[:, None, None, :]) * -1e9)


def test_output_matches_numpy_attention():
  x, mask = _inputs()
  layer = MultiHeadAttention(HEADS, HEAD_SIZE, name="attention")
  result = layer(x, attention_mask=mask)
  weights = reference.named_weights(layer)
  expected_scores = reference.content_scores(weights, x, x)
  expected_probs = _masked_softmax(expected_scores, mask)
  expected = reference.attention_output(weights, expected_probs, x)
  np.testing.assert_allclose(result.probs.numpy(), expected_probs, atol=1e-6, rtol=0)
  np.testing.assert_allclose(result.output.numpy(), expected, atol=1e-5, rtol=0)
  # Without residual attention the carry is the layer's own unmasked score.
  np.testing.assert_allclose(result.carry.numpy(), expected_scores, atol=1e-5, rtol=0)
  assert result.probs.numpy()[-1, :, :, 4:].max() == 0.0


@pytest.mark.parametrize("residual", [False, True], ids=["plain", "residual"])
def test_the_result_has_the_same_fields_whatever_the_flags(residual):
  x, mask = _inputs()
  layer = MultiHeadAttention(HEADS, HEAD_SIZE, residual_attention=residual, running_mean=residual)
  result = layer(x, attention_mask=mask)
  assert isinstance(result, AttentionResult) and result._fields == ("output", "carry", "probs")
  assert result.output.shape == (2, LENGTH, WIDTH)
  assert result.carry.shape == result.probs.shape == (2, HEADS, LENGTH, LENGTH)
  assert result.carry.dtype == result.probs.dtype == tf.float32


def test_a_carry_needs_residual_attention():
  x, mask = _inputs()
  carry = tf.zeros([2, HEADS, LENGTH, LENGTH])
  with pytest.raises(ValueError, match="attention_carry needs residual_attention=True"):
    MultiHeadAttention(HEADS, HEAD_SIZE)(x, attention_mask=mask, attention_carry=carry)


@pytest.mark.parametrize("running_mean", [False, True], ids=["running_sum", "running_mean"])
def test_carry_is_sum_of_independently_recomputed_scores(running_mean):
  x, mask = _inputs()
  layers = _stack(3, running_mean=running_mean)
  hidden, carry, total = x, None, 0.0
  for index, layer in enumerate(layers):
    output, new_carry, probs = layer(hidden, attention_mask=mask, attention_carry=carry, layer_index=index)
    # Score of this layer alone, recomputed in numpy from its weights and input.
    total = total + reference.content_scores(reference.named_weights(layer), hidden.astype(np.float64),
                                             hidden.astype(np.float64))
    np.testing.assert_allclose(new_carry.numpy(), total, atol=1e-5, rtol=0)
    # The mask and the running-mean division touch only the softmax input.
    logits = total / (index + 1) if running_mean else total
    np.testing.assert_allclose(probs.numpy(), _masked_softmax(logits, mask), atol=1e-6, rtol=0)
    hidden, carry = output.numpy(), new_carry
  assert carry.dtype == tf.float32


def test_running_mean_differs_from_running_sum_only_in_the_softmax():
  x, mask = _inputs()
  carry = tf.constant(np.random.default_rng(1).normal(size=(2, HEADS, LENGTH, LENGTH)), tf.float32)
  summed = MultiHeadAttention(HEADS, HEAD_SIZE, residual_attention=True)
  mean = MultiHeadAttention(HEADS, HEAD_SIZE, residual_attention=True, running_mean=True)
  summed(x)
  mean(x)
  mean.set_weights(summed.get_weights())
  _, carry_sum, probs_sum = summed(x, attention_mask=mask, attention_carry=carry, layer_index=3)
  _, carry_mean, probs_mean = mean(x, attention_mask=mask, attention_carry=carry, layer_index=3)
  np.testing.assert_array_equal(carry_sum.numpy(), carry_mean.numpy())
  np.testing.assert_allclose(probs_mean.numpy(), _masked_softmax(carry_sum.numpy() / 4, mask), atol=1e-6)
  assert np.abs(probs_mean.numpy() - probs_sum.numpy()).max() > 1e-3


def test_carry_ignores_mask_constant_and_dropout(monkeypatch):
  x, mask = _inputs()
  previous = tf.constant(np.random.default_rng(2).normal(size=(2, HEADS, LENGTH, LENGTH)), tf.float32)
  plain = MultiHeadAttention(HEADS, HEAD_SIZE, residual_attention=True)
  reference_carry = plain(x, attention_mask=mask, attention_carry=previous).carry
  dropped = MultiHeadAttention(HEADS, HEAD_SIZE, residual_attention=True, attention_dropout=0.5)
  dropped(x)
  dropped.set_weights(plain.get_weights())
  out_a, carry_a, _ = dropped(x, attention_mask=mask, attention_carry=previous, training=True)
  monkeypatch.setattr(attention_module, "MASK_BIAS", -1e4)
  out_b, carry_b, _ = dropped(x, attention_mask=mask, attention_carry=previous, training=True)
  np.testing.assert_array_equal(carry_a.numpy(), reference_carry.numpy())
  np.testing.assert_array_equal(carry_b.numpy(), reference_carry.numpy())
  assert np.abs(out_a.numpy() - out_b.numpy()).max() > 0   # dropout and the mask did act


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_fully_padded_rows_stay_finite(policy):
  keras.mixed_precision.set_global_policy(policy)
  x, _ = _inputs()
  mask = np.zeros([2, LENGTH, LENGTH], np.int32)
  mask[0] = 1                                # example 1: every row fully padded
  layers = _stack(2, running_mean=True)
  hidden, carry = tf.constant(x), None
  for index, layer in enumerate(layers):
    hidden, carry, probs = layer(hidden, attention_mask=mask, attention_carry=carry, layer_index=index)
    for value in (hidden, carry, probs):
      assert np.all(np.isfinite(tf.cast(value, tf.float32).numpy()))
  assert hidden.dtype == tf.as_dtype(policy.split("_")[1])
  assert carry.dtype == tf.float32 and probs.dtype == tf.float32


def test_gradient_reaches_layer_zero_through_the_carry():
  x, mask = _inputs()
  first, second = _stack(2)
  other_input = tf.constant(_inputs(seed=9)[0])
  with tf.GradientTape() as tape:
    carry = first(x, attention_mask=mask).carry
    # Layer 1 sees an unrelated input: the carry is its only link to layer 0.
    output = second(other_input, attention_mask=mask, attention_carry=carry, layer_index=1).output
    loss = tf.reduce_sum(output ** 2)
  gradient = tape.gradient(loss, first.query_dense.kernel)
  assert gradient is not None and np.abs(gradient.numpy()).max() > 1e-6


def test_running_mean_needs_residual_attention():
  with pytest.raises(ValueError, match="running_mean=True needs residual_attention=True"):
    MultiHeadAttention(2, 4, running_mean=True)


def test_bad_mask_rank():
  x, _ = _inputs()
  with pytest.raises(ValueError, match="attention_mask must be"):
    MultiHeadAttention(2, 4)(x, attention_mask=np.ones([LENGTH], np.int32))


@pytest.mark.parametrize("residual", [False, True], ids=["plain", "residual"])
def test_standard_layer_checks(residual, tmp_path):
  x, mask = _inputs()
  carry = np.random.default_rng(3).normal(size=(2, HEADS, LENGTH, LENGTH)).astype(np.float32)

  def build_outputs(layer, inputs):
    carry_kwargs = dict(attention_carry=inputs["carry"], layer_index=1) if residual else {}
    result = layer(inputs["x"], attention_mask=inputs["mask"], **carry_kwargs)
    return {"output": result.output, "carry": result.carry, "probs": result.probs}

  inputs = {"x": x, "mask": mask, "carry": carry} if residual else {"x": x, "mask": mask}
  run_layer_checks(
      lambda: MultiHeadAttention(HEADS, HEAD_SIZE, residual_attention=residual, running_mean=residual,
                                 attention_dropout=0.1),
      inputs, build_outputs, tmp_path, float32_outputs=("carry", "probs"))


def test_the_old_dropout_argument_is_read_as_attention_dropout():
  """Configs saved before the rename name the attention-probability dropout `dropout`."""
  config = MultiHeadAttention(HEADS, HEAD_SIZE, attention_dropout=0.3).get_config()
  assert config["attention_dropout"] == 0.3 and "dropout" not in config
  config["dropout"] = config.pop("attention_dropout")
  with pytest.warns(FutureWarning, match="attention_dropout"):
    layer = MultiHeadAttention.from_config(config)
  assert layer.attention_dropout == 0.3 and layer.get_config()["attention_dropout"] == 0.3
  with pytest.raises(TypeError, match="pass attention_dropout only"):
    MultiHeadAttention(HEADS, HEAD_SIZE, attention_dropout=0.1, dropout=0.2)


# ---------------------------------------------------------------------------------------------
# Attention-probability dropout with 16-bit draws.


@pytest.mark.parametrize("rate", [0.1, 0.5, 0.9])
def test_drop_attention_probs_drops_at_the_rate_and_keeps_the_expectation(rate):
  probs = tf.fill([2, 4, 250, 251], 0.25)   # 502,000 entries, an odd count
  dropped = drop_attention_probs(probs, rate).numpy()
  kept = dropped != 0
  # Binomial standard deviation of the kept fraction is below 7.1e-4 here.
  assert abs(1 - kept.mean() - rate) < 4e-3
  threshold = round(rate * 65536)
  np.testing.assert_allclose(dropped[kept], 0.25 * 65536 / (65536 - threshold), rtol=1e-6)
  assert abs(dropped.mean() - 0.25) < 0.25 * 4e-3 / (1 - rate)


def test_drop_attention_probs_is_random_per_call_and_follows_the_global_seed():
  probs = tf.ones([3, 2, 16, 16])
  tf.random.set_seed(7)
  first, second = (drop_attention_probs(probs, 0.5).numpy() for _ in range(2))
  assert (first != second).any()
  tf.random.set_seed(7)
  np.testing.assert_array_equal(drop_attention_probs(probs, 0.5).numpy(), first)


def test_drop_attention_probs_gradient_is_the_scaled_mask():
  probs = tf.random.uniform([2, 2, 8, 9])
  weights = tf.random.normal(probs.shape)
  with tf.GradientTape() as tape:
    tape.watch(probs)
    dropped = drop_attention_probs(probs, 0.3)
    loss = tf.reduce_sum(dropped * weights)
  scale = 65536 / (65536 - round(0.3 * 65536))
  expected = np.where(dropped.numpy() != 0, scale * weights.numpy(), 0.0)
  np.testing.assert_allclose(tape.gradient(loss, probs).numpy(), expected, rtol=1e-6)


def test_drop_attention_probs_compiles_keeps_dtype_and_rate_zero_is_identity():
  probs = tf.random.uniform([2, 3, 5, 7])
  compiled = tf.function(lambda p: drop_attention_probs(p, 0.2), jit_compile=True)
  assert 0 < (compiled(probs).numpy() == 0).mean() < 0.6
  assert drop_attention_probs(tf.cast(probs, tf.bfloat16), 0.2).dtype == tf.bfloat16
  assert drop_attention_probs(probs, 0.0) is probs


def test_attention_dropout_acts_only_in_training():
  x, mask = _inputs()
  layer = MultiHeadAttention(HEADS, HEAD_SIZE, attention_dropout=0.5)
  inference = layer(x, attention_mask=mask).output.numpy()
  np.testing.assert_array_equal(layer(x, attention_mask=mask, training=False).output.numpy(), inference)
  trained = [layer(x, attention_mask=mask, training=True).output.numpy() for _ in range(2)]
  assert np.abs(trained[0] - inference).max() > 1e-3 and np.abs(trained[0] - trained[1]).max() > 1e-3

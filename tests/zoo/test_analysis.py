"""zoo.analysis against values worked out by hand."""

import math

import numpy as np
import pytest

from zoo import analysis
from zoo.models import FunnelEncoder
from zoo.models import TransformerEncoder


def test_entropy_of_hand_made_distributions():
  # Layer 0: head 0 uniform over 4 keys (ln 4), head 1 one-hot (0). Token 2 is padding.
  uniform, one_hot = [0.25] * 4, [0.0, 1.0, 0.0, 0.0]
  half = [0.5, 0.5, 0.0, 0.0]
  probs = np.array([[[[uniform, half, one_hot], [one_hot, one_hot, uniform]]]])   # [1, 1, 2, 3, 4]
  entropy = analysis.attention_entropy(probs, np.array([[1, 1, 0]]))
  np.testing.assert_allclose(entropy[0][0], [math.log(4), math.log(2)])   # the padded query is left out
  np.testing.assert_allclose(entropy[0][1], [0.0, 0.0])


def test_js_divergence_by_hand():
  # JSD([1, 0], [0, 1]) = ln 2; JSD(p, p) = 0; JSD([1, 0], [.5, .5]):
  # m = [.75, .25]; H(m) = -(.75 ln .75 + .25 ln .25); H(p) = 0; H(q) = ln 2.
  np.testing.assert_allclose(analysis.js_divergence([1, 0], [0, 1]), math.log(2))
  np.testing.assert_allclose(analysis.js_divergence([0.3, 0.7], [0.3, 0.7]), 0.0, atol=1e-15)
  expected = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25)) - 0.5 * math.log(2)
  np.testing.assert_allclose(analysis.js_divergence([1, 0], [0.5, 0.5]), expected)
  np.testing.assert_allclose(analysis.js_divergence([0.5, 0.5], [1, 0]), expected)   # symmetric


def test_adjacent_layer_divergence_averages_real_queries():
  a, b = [1.0, 0.0], [0.0, 1.0]
  # Two layers, one head, queries: token 0 flips (ln 2), token 1 stays (0), token 2 is padding.
  probs = np.array([[[[a, a, a]]], [[[b, a, b]]]])   # [2, 1, 1, 3, 2]
  divergence = analysis.adjacent_layer_js_divergence(probs, np.array([[1, 1, 0]]))
  assert divergence.shape == (1, 1)
  np.testing.assert_allclose(divergence[0, 0], math.log(2) / 2)


def test_errors_name_the_expected_shapes():
  with pytest.raises(ValueError, match=r"\[L, B, N, T, S\]"):
    analysis.attention_entropy(np.ones([2, 3]), np.ones([1, 3]))
  with pytest.raises(ValueError, match=r"input_mask must have shape \[B, T\] = \[1, 3\]"):
    analysis.attention_entropy(np.ones([1, 1, 1, 3, 3]) / 3, np.ones([1, 4]))
  with pytest.raises(ValueError, match="L >= 2"):
    analysis.adjacent_layer_js_divergence(np.ones([1, 1, 1, 3, 3]) / 3, np.ones([1, 3]))


def test_probabilities_of_an_encoder():
  encoder = TransformerEncoder(vocab_size=20, hidden_size=16, num_layers=3, num_heads=2, intermediate_size=32,
                               output_attention_probs=True)
  ids = np.array([[2, 5, 6, 3, 0, 0]], np.int32)
  inputs = dict(input_word_ids=ids, input_mask=(ids > 0).astype(np.int32), input_type_ids=0 * ids)
  probs = analysis.attention_probabilities(encoder, inputs)
  assert probs.shape == (3, 1, 2, 6, 6)
  np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-5)
  entropy = analysis.attention_entropy(probs, inputs["input_mask"])
  assert len(entropy) == 3 and len(entropy[0]) == 2 and entropy[0][0].shape == (4,)
  # Padded keys get no probability, so no entropy exceeds ln(4 real tokens).
  assert max(e.max() for layer in entropy for e in layer) <= math.log(4) + 1e-6
  assert analysis.adjacent_layer_js_divergence(probs, inputs["input_mask"]).shape == (2, 2)


def test_probabilities_of_a_local_attention_encoder_are_the_full_maps_inside_the_pattern():
  """The global rows and blocks spread to `[T, S]` maps: rows of 1, 0 outside the window and the global
  token and on padding (that the values are full attention's under that mask: test_local_attention)."""
  config = dict(vocab_size=20, hidden_size=16, num_layers=2, num_heads=2, intermediate_size=32,
                output_attention_probs=True, seq_length=11, dropout=0.0, attention_dropout=0.0)
  local = TransformerEncoder(attention_window=2, global_tokens=1, **config)
  ids = np.array([[2, 5, 6, 3, 7, 8, 9, 4, 5, 0, 0]], np.int32)
  inputs = dict(input_word_ids=ids, input_mask=(ids > 0).astype(np.int32), input_type_ids=0 * ids)
  probs = analysis.attention_probabilities(local, inputs)
  assert probs.shape == (2, 1, 2, 11, 11)
  np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-5)
  i, j = np.indices((11, 11))
  outside = (np.abs(i - j) > 2) & (i > 0) & (j > 0)
  assert np.all(probs[..., outside] == 0) and np.all(probs[..., 4:, 9:] == 0)   # the window; padding
  assert np.all(probs[..., 0, :9] > 0)   # [cls] attends to every real token
  # A Funnel's pooled layers have other grids: refused with the reason, not an index error.
  funnel = FunnelEncoder(vocab_size=20, hidden_size=16, block_sizes=(1, 1), num_heads=2, intermediate_size=32,
                         seq_length=16, attention_window=1, output_attention_probs=True)
  ids = np.arange(2, 18, dtype=np.int32)[None] % 20
  inputs = dict(input_word_ids=ids, input_mask=np.ones_like(ids), input_type_ids=0 * ids)
  with pytest.raises(ValueError, match="analyse them one by one"):
    analysis.attention_probabilities(funnel, inputs)

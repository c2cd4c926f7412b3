"""Both encoder families with local attention against the same encoders with full attention under the
band-and-global mask, layer by layer: Funnel pooling (pool-query-only and not, with and without a
separate [cls], both pooling semantics), the decoder, RealFormer's carry, Pre-LN, both relative forms."""

import numpy as np
import pytest
import tensorflow as tf

from tests.layer_checks import run_encoder_checks
from tests.zoo.layers.test_local_attention import pattern
from zoo.layers import MultiHeadAttention
from zoo.layers import RelativeMultiHeadAttention
from zoo.models import FunnelEncoder
from zoo.models import TransformerEncoder

SMALL = dict(vocab_size=60, hidden_size=16, num_heads=2, intermediate_size=32, dropout=0.0,
             attention_dropout=0.0)


@pytest.fixture
def banded(monkeypatch):
  """`banded(encoder, window, global_tokens)`: the full-attention encoder's layers then attend under
  `pattern(...)` (the definition, from the test of the layers) and the padding mask, as a
  `[B, T, S]` mask."""
  def mask_of(query, value, attention_mask, query_positions, key_positions, band):
    value = query if value is None else value
    query_positions = np.arange(query.shape[1]) if query_positions is None else np.asarray(query_positions)
    key_positions = np.arange(value.shape[1]) if key_positions is None else np.asarray(key_positions)
    allowed = pattern(band[0], band[1], query_positions, key_positions).astype(np.float32)
    return tf.cast(attention_mask, tf.float32)[:, None, :] * allowed

  relative_call, absolute_call = RelativeMultiHeadAttention.call, MultiHeadAttention.call

  def relative(self, query, value=None, attention_mask=None, query_positions=None, key_positions=None,
               **kwargs):
    if getattr(self, "band", None):
      attention_mask = mask_of(query, value, attention_mask, query_positions, key_positions, self.band)
    return relative_call(self, query, value, attention_mask, query_positions, key_positions, **kwargs)

  def absolute(self, query, value=None, attention_mask=None, **kwargs):
    if getattr(self, "band", None):
      attention_mask = mask_of(query, value, attention_mask, None, None, self.band)
    return absolute_call(self, query, value, attention_mask, **kwargs)

  monkeypatch.setattr(RelativeMultiHeadAttention, "call", relative)
  monkeypatch.setattr(MultiHeadAttention, "call", absolute)

  def apply(encoder, window, global_tokens):
    layers = [layer for layer in encoder.submodules if isinstance(layer, MultiHeadAttention)]
    assert layers
    for layer in layers:
      layer.band = (window, global_tokens)
  return apply


def _inputs(seq_length, seed=0):
  """Three examples: full, about half and two tokens long; two segments each."""
  rng = np.random.default_rng(seed)
  lengths = np.array([seq_length, seq_length // 2 + 1, 2])
  mask = (np.arange(seq_length)[None] < lengths[:, None]).astype(np.int32)
  ids = rng.integers(5, SMALL["vocab_size"], (3, seq_length)).astype(np.int32) * mask
  types = ((np.arange(seq_length)[None] > lengths[:, None] // 2) & (mask > 0)).astype(np.int32)
  return dict(input_word_ids=ids, input_mask=mask, input_type_ids=types)


CASES = [
    ("bert_post_ln", TransformerEncoder, 2, 1, dict(num_layers=2, seq_length=19)),
    ("realformer_running_mean", TransformerEncoder, 3, 2,
     dict(num_layers=3, seq_length=16, residual_attention=True, running_mean=True)),
    ("pre_ln_factorized", TransformerEncoder, 1, 1,
     dict(num_layers=2, seq_length=17, norm_first=True, position_encoding="factorized")),
    ("realformer_shift", TransformerEncoder, 2, 1,
     dict(num_layers=2, seq_length=18, residual_attention=True, position_encoding="shift")),
    ("funnel_decoder", FunnelEncoder, 2, 1, dict(block_sizes=(1, 1, 1), seq_length=32, num_decoder_layers=1)),
    ("funnel_shift_no_cls", FunnelEncoder, 3, 2,
     dict(block_sizes=(1, 1, 1), seq_length=30, position_encoding="shift", separate_cls=False,
          num_decoder_layers=1)),
    ("funnel_realformer_reset", FunnelEncoder, 1, 1,
     dict(block_sizes=(2, 1), seq_length=24, pool_q_only=False, residual_attention=True,
          carry_at_pooling="reset", position_encoding="shift")),
    ("funnel_authors_untruncated", FunnelEncoder, 2, 1,
     dict(block_sizes=(1, 2), block_repeats=(1, 2), seq_length=21, truncate_seq=False,
          pooling_semantics="funnel_authors")),
]


# `make test-fast` runs one case of each family; the full suite all of them.
FAST_CASES = ("realformer_running_mean", "funnel_decoder")


@pytest.mark.parametrize("name, encoder_class, window, global_tokens, config", [
    pytest.param(*case, id=case[0], marks=() if case[0] in FAST_CASES else (pytest.mark.slow,))
    for case in CASES])
def test_local_encoder_equals_full_attention_under_the_pattern(banded, name, encoder_class, window,
                                                               global_tokens, config):
  config = dict(SMALL, **config)
  full = encoder_class(**config)
  local = encoder_class(attention_window=window, global_tokens=global_tokens, **config)
  local.set_weights(full.get_weights())
  inputs = _inputs(config["seq_length"])
  unbanded = full(inputs)["sequence_output"].numpy()
  banded(full, window, global_tokens)
  expected, got = full(inputs), local(inputs)
  mask = inputs["input_mask"][..., None]
  if expected["sequence_output"].shape[1] != config["seq_length"]:   # a Funnel without decoder: pooled
    mask = np.ones_like(expected["sequence_output"].numpy()[..., :1])
  sequence = got["sequence_output"].numpy()
  difference = np.abs((expected["sequence_output"].numpy() - sequence) * mask).max()
  pooled = np.abs(expected["pooled_output"].numpy() - got["pooled_output"].numpy()).max()
  print(f"{name}: sequence_output max |diff| {difference:.1e}, pooled_output {pooled:.1e}")
  assert difference < 1e-5 and pooled < 1e-5
  assert np.abs((unbanded - sequence) * mask).max() > 1e-3   # the window mattered


def test_attention_probabilities_come_out_in_block_form():
  config = dict(SMALL, num_layers=2, seq_length=16, output_attention_probs=True)
  encoder = TransformerEncoder(attention_window=2, global_tokens=1, **config)
  probs = encoder(_inputs(16))["attention_probs"]
  assert len(probs) == 2
  rows, blocks = probs[0]
  assert rows.shape == (3, 2, 1, 16) and blocks.shape == (3, 8, 2, 2, 1 + 3 * 2)
  np.testing.assert_allclose(blocks.numpy().sum(-1), 1.0, atol=1e-6)


@pytest.mark.slow
def test_encoder_checks_with_local_attention(tmp_path):
  """A Funnel with local attention, pooling, the decoder and the carry (reset at pooling): config round
  trip, .keras and SavedModel reload, XLA and mixed_bfloat16; the compiled encoder's only gather is the
  word-embedding lookup."""
  config = dict(SMALL, attention_window=3, global_tokens=2, block_sizes=(1, 1), seq_length=20,
                num_decoder_layers=1, residual_attention=True, carry_at_pooling="reset", pool_q_only=False)
  inputs = _inputs(config["seq_length"])
  run_encoder_checks(FunnelEncoder, config, inputs, tmp_path)
  encoder = FunnelEncoder(**config)
  compiled = tf.function(lambda x: encoder(x)["sequence_output"], jit_compile=True)
  hlo = compiled.experimental_get_compiler_ir({k: tf.constant(v) for k, v in inputs.items()})(stage="hlo")
  assert hlo.count(" gather(") == 1


def test_combinations_local_attention_refuses_name_the_reason():
  with pytest.raises(ValueError, match="cannot pool the carry .* use carry_at_pooling='reset'"):
    FunnelEncoder(attention_window=2, residual_attention=True, block_sizes=(1, 1), seq_length=16, **SMALL)
  with pytest.raises(ValueError, match="pool-query-only layer's carry .* use pool_q_only=False"):
    FunnelEncoder(attention_window=2, residual_attention=True, carry_at_pooling="reset", block_sizes=(1, 1),
                  seq_length=16, **SMALL)
  with pytest.raises(ValueError, match="needs a static seq_length"):
    TransformerEncoder(attention_window=2, num_layers=1, **SMALL)
  with pytest.raises(ValueError, match="global_tokens must be a whole number >= 1"):
    TransformerEncoder(attention_window=2, global_tokens=0, num_layers=1, seq_length=8, **SMALL)
  # A single block has no pooling: its carry runs as in a RealFormer.
  FunnelEncoder(attention_window=2, residual_attention=True, block_sizes=(2,), seq_length=16, **SMALL)

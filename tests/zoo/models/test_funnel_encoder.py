"""FunnelEncoder: properties that hold by construction, and the standard checks.

Numerics against the reference implementation are in tests/zoo/convert.
"""

import numpy as np
import pytest
import tf_keras as keras
from official.nlp.modeling import models as nlp_models

from tests.layer_checks import run_encoder_checks
from zoo.grids import block_lengths
from zoo.models import FunnelEncoder
from zoo.models import TransformerEncoder

VOCAB, WIDTH, HEADS, FFN, LENGTH = 50, 16, 2, 32, 16
SMALL = dict(vocab_size=VOCAB, hidden_size=WIDTH, num_heads=HEADS, intermediate_size=FFN, seq_length=LENGTH,
             dropout=0.0, attention_dropout=0.0)


def _inputs(seed=0, padded=True):
  rng = np.random.default_rng(seed)
  mask = np.ones([2, LENGTH], np.int32)
  if padded:
    mask[1, 11:] = 0   # not aligned to pooling windows
  types = np.array([[2] + [0] * 7 + [1] * 8] * 2, np.int32)
  return dict(input_word_ids=rng.integers(1, VOCAB, size=(2, LENGTH)).astype(np.int32), input_mask=mask,
              input_type_ids=types)


def _same_weights(target, source):
  target.set_weights(source.get_weights())
  return target


def test_block_lengths():
  assert block_lengths(512, 3) == [512, 256, 128]
  assert block_lengths(512, 3, truncate_seq=False) == [512, 257, 129]
  assert block_lengths(512, 3, separate_cls=False) == [512, 256, 128]


SHAPE_FLAGS = {
    "default": dict(),
    "pool_all_max": dict(pool_q_only=False, pooling_type="max"),
    "joint_cls": dict(separate_cls=False),
    "no_truncate_repeats": dict(truncate_seq=False, block_repeats=(2, 1, 2)),
    "residual": dict(residual_attention=True),
    "residual_reset": dict(residual_attention=True, carry_at_pooling="reset", pool_q_only=False),
}


# `make test-fast` runs every flag set without the decoder and the default one with it.
@pytest.mark.parametrize("flags, decoder", [
    pytest.param(flags, decoder, id=f"{name}-{'decoder' if decoder else 'no_decoder'}",
                 marks=pytest.mark.slow if decoder and name != "default" else ())
    for decoder in (0, 2) for name, flags in SHAPE_FLAGS.items()])
def test_shapes_and_factorized_equals_shift(flags, decoder):
  config = dict(SMALL, block_sizes=(1, 1, 1), num_decoder_layers=decoder, **flags)
  factorized = FunnelEncoder(**config)
  shift = _same_weights(FunnelEncoder(**config, position_encoding="shift"), factorized)
  inputs = _inputs()
  a, b = factorized(inputs), shift(inputs)
  lengths = block_lengths(LENGTH, 3, config.get("separate_cls", True), config.get("truncate_seq", True))
  assert a["encoder_sequence_output"].shape == (2, lengths[-1], WIDTH)
  assert a["sequence_output"].shape == (2, LENGTH if decoder else lengths[-1], WIDTH)
  assert [o.shape[1] for o in a["encoder_outputs"]] == [
      n for n, r in zip(lengths, config.get("block_repeats", (1, 1, 1)), strict=True) for _ in range(r)]
  np.testing.assert_allclose(a["sequence_output"].numpy(), b["sequence_output"].numpy(), atol=1e-5)


def test_one_block_funnel_equals_relative_transformer():
  """No pooling: a Funnel of one block is the relative-attention Transformer."""
  funnel = FunnelEncoder(**SMALL, block_sizes=(2,), separate_cls=False, layer_norm_epsilon=1e-12)
  transformer = TransformerEncoder(
      vocab_size=VOCAB, hidden_size=WIDTH, num_layers=2, num_heads=HEADS, intermediate_size=FFN,
      position_encoding="factorized", activation="gelu_approximate", dropout=0.0, attention_dropout=0.0)
  inputs = _inputs()
  transformer(inputs)
  by_name = {w.name: w for w in transformer.weights}
  for weight in funnel.weights:
    name = weight.name.replace("block_0_layer_", "layer_")
    by_name[name].assign(weight)
  np.testing.assert_allclose(funnel(inputs)["sequence_output"].numpy(),
                             transformer(inputs)["sequence_output"].numpy(), atol=1e-5)


def test_residual_reset_with_one_layer_per_block_equals_plain_funnel():
  """With a reset carry, every layer of (1, 1, 1) is layer 0 of its carry: plain Post-LN."""
  plain = FunnelEncoder(**SMALL, block_sizes=(1, 1, 1))
  reset = _same_weights(FunnelEncoder(**SMALL, block_sizes=(1, 1, 1), residual_attention=True,
                                      carry_at_pooling="reset"), plain)
  pooled = _same_weights(FunnelEncoder(**SMALL, block_sizes=(1, 1, 1), residual_attention=True), plain)
  inputs = _inputs()
  np.testing.assert_allclose(reset(inputs)["sequence_output"].numpy(),
                             plain(inputs)["sequence_output"].numpy(), atol=1e-6)
  difference = np.abs(pooled(inputs)["sequence_output"].numpy() - plain(inputs)["sequence_output"].numpy())
  assert difference.max() > 1e-4   # the pooled carry does reach the later blocks


def test_pooled_carry_feeds_the_pool_q_only_layer():
  """Block 1's first layer sees block 0's carry pooled along the query axis."""
  encoder = FunnelEncoder(**SMALL, block_sizes=(1, 1), residual_attention=True, output_attention_probs=True)
  inputs = _inputs(padded=False)
  probs = encoder(inputs)["attention_probs"]
  pooling = encoder.get_layer("pooling")
  layer0, layer1 = encoder.get_layer("block_0_layer_0"), encoder.get_layer("block_1_layer_0")
  embedded = encoder.get_layer("embeddings")(inputs["input_word_ids"])
  types = np.where(np.arange(LENGTH) == 0, 2, inputs["input_type_ids"])
  hidden, carry0, _ = layer0(embedded, query_segment_ids=types)
  pooled_types = types[:, [0, 1, 3, 5, 7, 9, 11, 13]]   # [cls], then each window's first token
  expected = layer1(pooling(hidden), hidden, query_positions=[-1, 1, 3, 5, 7, 9, 11, 13],
                    query_segment_ids=pooled_types, key_segment_ids=types,
                    attention_carry=pooling(carry0, axis=2), layer_index=1).probs
  np.testing.assert_allclose(probs[1].numpy(), expected.numpy(), atol=1e-6)


def test_real_positions_do_not_depend_on_padding():
  encoder = FunnelEncoder(**SMALL, block_sizes=(1, 1, 1), num_decoder_layers=1, residual_attention=True)
  inputs = _inputs()
  noisy = dict(inputs, input_word_ids=inputs["input_word_ids"].copy())
  noisy["input_word_ids"][1, 11:] = 3
  a, b = encoder(inputs)["sequence_output"].numpy(), encoder(noisy)["sequence_output"].numpy()
  np.testing.assert_allclose(a[1, :11], b[1, :11], atol=1e-5)


@pytest.mark.slow   # 6 s; the TransformerEncoder's twin of this check runs in `make test-fast`
def test_works_as_model_garden_bert_classifier_network():
  keras.utils.set_random_seed(0)
  encoder = FunnelEncoder(**SMALL, block_sizes=(1, 1), block_repeats=(1, 2))
  classifier = nlp_models.BertClassifier(encoder, num_classes=2, dropout_rate=0.0)
  classifier.compile(optimizer=keras.optimizers.Adam(1e-2),
                     loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  inputs = _inputs()
  history = classifier.fit(inputs, np.array([0, 1]), epochs=4, verbose=0)
  assert history.history["loss"][-1] < history.history["loss"][0]


@pytest.mark.parametrize("bad,message", [
    (dict(pooling_type="avg"), r"pooling_type must be one of \('mean', 'max'\), got 'avg'"),
    (dict(carry_at_pooling="keep"), r"carry_at_pooling must be one of \('pool', 'reset'\)"),
    (dict(position_encoding="absolute"), r"position_encoding must be one of \('factorized', 'shift'\)"),
    (dict(block_repeats=(1, 2)), "must have one entry per block"),
    (dict(seq_length=4, block_sizes=(1, 1, 1, 1)), "too short"),
    (dict(decoder_residual_layer=7), r"decoder_residual_layer must be in \[0, 3\)"),
    (dict(position_rules="tf"), r"position_rules must be one of \('window_start', 'authors_tf'\)"),
    (dict(pooling_semantics="authors"), "'authors' is ambiguous: it named Hugging Face's semantics"),
])
def test_config_errors(bad, message):
  with pytest.raises(ValueError, match=message):
    FunnelEncoder(**{**SMALL, "block_sizes": (1, 1, 1), **bad})


@pytest.mark.parametrize("flags", [
    pytest.param(dict(num_decoder_layers=1, block_repeats=(1, 2)), marks=pytest.mark.slow),
    dict(position_encoding="shift", residual_attention=True, embedding_width=8),
    pytest.param(dict(pooling_semantics="funnel_authors", position_rules="authors_tf", separate_cls=False,
                      position_encoding="shift", num_decoder_layers=1), marks=pytest.mark.slow),
], ids=["decoder_repeats", "shift_residual", "authors_tf_nocls"])
def test_save_reload_xla_and_mixed_precision(flags, tmp_path):
  config = dict(SMALL, block_sizes=(1, 1), **flags)
  run_encoder_checks(FunnelEncoder, config, _inputs(), tmp_path)


def test_a_config_recorded_with_the_old_name_loads_as_hugging_faces_semantics():
  config = dict(SMALL, block_sizes=(1, 1), pooling_semantics="huggingface")
  current = FunnelEncoder(**config)
  recorded = dict(current.get_config(), pooling_semantics="authors")
  loaded = _same_weights(FunnelEncoder.from_config(recorded), current)
  assert loaded.get_config()["pooling_semantics"] == "huggingface"
  inputs = _inputs()
  np.testing.assert_array_equal(loaded(inputs)["sequence_output"].numpy(),
                                current(inputs)["sequence_output"].numpy())


def test_the_position_rules_only_differ_without_separate_cls():
  inputs = _inputs(padded=False)
  cases = ((True, "shift", False), (False, "factorized", True), (False, "shift", True))
  for separate_cls, form, differs in cases:
    config = dict(SMALL, block_sizes=(1, 1), separate_cls=separate_cls, position_encoding=form)
    window_start = FunnelEncoder(**config)
    authors_tf = _same_weights(FunnelEncoder(**config, position_rules="authors_tf"), window_start)
    difference = np.abs(window_start(inputs)["sequence_output"].numpy()
                        - authors_tf(inputs)["sequence_output"].numpy()).max()
    assert (difference > 1e-3) if differs else (difference < 1e-5), (separate_cls, form, difference)


def test_building_an_encoder_converts_none_of_the_zoos_layers_with_autograph(monkeypatch):
  """tf_keras hands a subclassed layer's `call` to AutoGraph (`tf_convert`) when it builds a functional
  model, unless the layer says not to (`zoo.layers.base.WithoutAutograph`). Watched at tf_keras's own
  call: the zoo's layers are never handed over, so a hook that tf_keras renamed fails here."""
  from tf_keras.src.engine import base_layer
  autograph = base_layer.tf.__internal__.autograph   # the module tf_keras calls
  converted = []
  convert = autograph.tf_convert

  def watched(function, *args, **kwargs):
    converted.append(type(getattr(function, "__self__", None)).__module__)
    return convert(function, *args, **kwargs)

  monkeypatch.setattr(autograph, "tf_convert", watched)
  FunnelEncoder(**SMALL, block_sizes=(1, 1), num_decoder_layers=1, residual_attention=True)
  assert not [module for module in converted if module.startswith("zoo.")], converted

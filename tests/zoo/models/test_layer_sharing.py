"""Cross-layer parameter sharing (ALBERT, Lan et al., 2020, Sec. 3.1) in both encoder families."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from zoo.models import FunnelEncoder
from zoo.models import TransformerEncoder
from zoo.presets import cost

TRANSFORMER = dict(vocab_size=50, hidden_size=16, num_layers=3, num_heads=2, intermediate_size=32,
                   embedding_width=8, max_sequence_length=16, dropout=0.0, attention_dropout=0.0)
FUNNEL = dict(vocab_size=50, hidden_size=16, block_sizes=(2, 1), num_heads=2, intermediate_size=32,
              num_decoder_layers=1, seq_length=8, residual_attention=True, dropout=0.0, attention_dropout=0.0)
SHARING = ("none", "all", "attention", "ffn")


def _inputs(length, seed=0):
  rng = np.random.default_rng(seed)
  lengths = np.array([length, length // 2 + 1])
  mask = (np.arange(length)[None, :] < lengths[:, None]).astype(np.int32)
  return dict(input_word_ids=rng.integers(1, 50, size=(2, length)).astype(np.int32), input_mask=mask,
              input_type_ids=np.zeros([2, length], np.int32))


def _encoder(family, sharing, **overrides):
  if family == "transformer":
    return TransformerEncoder(**{**TRANSFORMER, **overrides}, layer_sharing=sharing)
  return FunnelEncoder(**{**FUNNEL, **overrides}, layer_sharing=sharing)


def _unique_weights(encoder):
  return {id(weight): weight for weight in encoder.weights}.values()


# `make test-fast` checks the Transformer; the full suite both families.
@pytest.mark.parametrize("family", ["transformer", pytest.param("funnel", marks=pytest.mark.slow)])
@pytest.mark.parametrize("sharing", SHARING)
def test_each_sharing_holds_the_counted_weights_once(family, sharing):
  encoder = _encoder(family, sharing)
  config = {**(TRANSFORMER if family == "transformer" else FUNNEL), "layer_sharing": sharing}
  assert encoder.count_params() == cost.parameter_count(family, config)
  assert sum(int(np.prod(w.shape)) for w in _unique_weights(encoder)) == encoder.count_params()
  assert len({w.name for w in encoder.weights}) == len(encoder.weights)   # one name per weight
  layers = [layer for layer in encoder.layers
            if "layer_" in layer.name and not layer.name.startswith("decoder")]
  first, others = layers[0], layers[1:]
  if sharing == "all":
    assert others == []   # one block, applied at every depth
  else:
    assert len(others) == 2
    for layer in others:
      assert (layer.attention is first.attention) == (sharing == "attention")
      assert (layer.intermediate_dense is first.intermediate_dense) == (sharing == "ffn")
      assert (layer.output_dense is first.output_dense) == (sharing == "ffn")
      assert layer.attention_norm is not first.attention_norm   # layer norms stay each layer's own
  if family == "funnel":   # the decoder's layers are never shared
    decoder = encoder.get_layer("decoder_layer_0")
    assert decoder.attention is not first.attention and decoder.output_dense is not first.output_dense


def _as_unshared(shared, unshared, first):
  """Gives `unshared` the values of `shared`: a layer that `shared` has no weight of takes the first
  layer's (`first`). Returns `{shared weight name: [its copies in unshared]}`."""
  by_name = {w.name: w for w in shared.weights}
  copies = {}
  for weight in unshared.weights:
    name = weight.name if weight.name in by_name else f"{first}/{weight.name.partition('/')[2]}"
    weight.assign(by_name[name])
    copies.setdefault(name, []).append(weight)
  return by_name, copies


def test_all_shared_equals_one_block_applied_at_every_depth():
  """The reference: the unshared encoder whose every layer holds the first layer's weights."""
  shared, unshared = _encoder("transformer", "all"), _encoder("transformer", "none")
  _, copies = _as_unshared(shared, unshared, "layer_0")
  assert max(len(group) for group in copies.values()) == 3
  inputs = _inputs(16)
  expected, actual = unshared(inputs), shared(inputs)
  for key in ("sequence_output", "pooled_output"):
    np.testing.assert_allclose(actual[key], expected[key], atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["transformer", "funnel"])
@pytest.mark.parametrize("sharing", ["all", "attention", "ffn"])
def test_a_shared_weight_takes_the_sum_of_its_layers_gradients(family, sharing):
  """The gradient of a shared weight is the sum over the layers that use it: the unshared twin with
  the same values gives the same loss and, summed over its copies, the same gradient."""
  shared, unshared = _encoder(family, sharing), _encoder(family, "none")
  first = "layer_0" if family == "transformer" else "block_0_layer_0"
  by_name, copies = _as_unshared(shared, unshared, first)
  inputs = _inputs(16 if family == "transformer" else 8)

  def loss_and_gradients(encoder, variables):
    with tf.GradientTape() as tape:
      outputs = encoder(inputs, training=True)
      loss = tf.reduce_sum(outputs["sequence_output"] ** 2) + tf.reduce_sum(outputs["pooled_output"])
    return loss, dict(zip([v.name for v in variables], tape.gradient(loss, variables), strict=True))

  loss_shared, gradients = loss_and_gradients(shared, list(by_name.values()))
  loss_unshared, per_copy = loss_and_gradients(unshared, unshared.weights)
  np.testing.assert_allclose(loss_shared, loss_unshared, rtol=1e-6)
  shared_names = [name for name, group in copies.items() if len(group) > 1]
  assert shared_names   # the check has something to check
  for name, group in copies.items():
    total = sum(tf.convert_to_tensor(per_copy[w.name]).numpy() for w in group)
    np.testing.assert_allclose(tf.convert_to_tensor(gradients[name]).numpy(), total, atol=2e-5, rtol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("sharing", ["all", "attention"])
def test_shared_encoders_round_trip_keras_files_and_checkpoints(sharing, tmp_path):
  encoder = _encoder("funnel", sharing)
  for weight in encoder.weights:
    weight.assign(weight + 0.1)
  inputs = _inputs(8)
  expected = encoder(inputs)["sequence_output"].numpy()
  assert encoder.get_config()["layer_sharing"] == sharing
  path = str(tmp_path / "encoder.keras")
  encoder.save(path)
  loaded = keras.models.load_model(path)
  np.testing.assert_allclose(loaded(inputs)["sequence_output"], expected, atol=1e-6)
  fresh = _encoder("funnel", sharing)
  prefix = tf.train.Checkpoint(encoder=encoder).save(str(tmp_path / "ckpt"))
  tf.train.Checkpoint(encoder=fresh).read(prefix).assert_existing_objects_matched()
  np.testing.assert_allclose(fresh(inputs)["sequence_output"], expected, atol=1e-6)


def test_an_unknown_sharing_lists_the_choices():
  with pytest.raises(ValueError, match=r"layer_sharing must be one of \('none', 'all', 'attention', 'ffn'\)"):
    _encoder("transformer", "blocks")
  with pytest.raises(ValueError, match=r"layer_sharing must be one of"):
    _encoder("funnel", "blocks")

"""Pretrainers: outputs, losses against numpy, ELECTRA's replaced-token labels, training and save/load."""

import doctest

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from tests.zoo.models.test_heads import SMALL
from tests.zoo.models.test_heads import VOCAB
from tests.zoo.models.test_heads import masked_lm_reference
from tests.zoo.models.test_heads import small_encoder
from zoo.models import TransformerEncoder
from zoo.models import pretrainers
from zoo.models.losses import replaced_token_loss
from zoo.models.pretrainers import ElectraPretrainer
from zoo.models.pretrainers import MaskedLMPretrainer
from zoo.models.pretrainers import masked_lm_loss

LENGTH, MASK_ID = SMALL["max_sequence_length"], 3
# Row 1 has two padded tokens and one padded prediction (weight 0 at position 0).
POSITIONS = np.array([[1, 3, 6], [2, 4, 0]], np.int32)
WEIGHTS = np.array([[1, 1, 1], [1, 1, 0]], np.float32)


def features(seed=0):
  rng = np.random.default_rng(seed)
  original = rng.integers(4, VOCAB, size=(2, LENGTH)).astype(np.int32)
  masked_ids = np.take_along_axis(original, POSITIONS, axis=1) * (WEIGHTS > 0)
  word_ids = original.copy()
  np.put_along_axis(word_ids, POSITIONS[:, :2], MASK_ID, axis=1)
  word_ids[0, 6] = MASK_ID
  mask = np.ones([2, LENGTH], np.int32)
  mask[1, 6:] = 0
  return dict(input_word_ids=word_ids, input_mask=mask, input_type_ids=np.zeros([2, LENGTH], np.int32),
              masked_lm_positions=POSITIONS, masked_lm_ids=masked_ids.astype(np.int32),
              masked_lm_weights=WEIGHTS)


def mlm_features(seed=0):
  return {k: v for k, v in features(seed).items() if k not in ("masked_lm_ids", "masked_lm_weights")}


def electra(**kwargs):
  generator = small_encoder(hidden_size=8, intermediate_size=16, embedding_width=SMALL["hidden_size"])
  return ElectraPretrainer(generator, small_encoder(), **kwargs)


def log_softmax(x):
  x = x - x.max(-1, keepdims=True)
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


def numpy_masked_lm_loss(labels, logits, weights):
  losses = -np.take_along_axis(log_softmax(np.asarray(logits, np.float64)), labels[:, :, None], -1)[..., 0]
  return (losses * weights).sum() / weights.sum()


def numpy_replaced_token_loss(labels, logits, mask):
  x = np.asarray(logits, np.float64)
  losses = np.maximum(x, 0) - x * labels + np.log1p(np.exp(-np.abs(x)))
  return (losses * mask).sum() / mask.sum()


def test_losses_match_numpy():
  rng = np.random.default_rng(0)
  logits, labels = rng.normal(size=(2, 3, VOCAB)), rng.integers(0, VOCAB, size=(2, 3))
  np.testing.assert_allclose(masked_lm_loss(labels, logits, WEIGHTS).numpy(),
                             numpy_masked_lm_loss(labels, logits, WEIGHTS), rtol=1e-6)
  disc_logits, disc_labels = rng.normal(size=(2, LENGTH)) * 3, rng.integers(0, 2, size=(2, LENGTH))
  mask = features()["input_mask"]
  np.testing.assert_allclose(replaced_token_loss(disc_labels, disc_logits, mask).numpy(),
                             numpy_replaced_token_loss(disc_labels, disc_logits, mask), rtol=1e-6)
  assert masked_lm_loss(labels, logits, np.zeros_like(WEIGHTS)).numpy() == 0.0   # no prediction, no NaN


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_masked_lm_pretrainer_outputs(policy):
  keras.mixed_precision.set_global_policy(policy)
  try:
    encoder = small_encoder()
    pretrainer = MaskedLMPretrainer(encoder)
    outputs = pretrainer(mlm_features())
  finally:
    keras.mixed_precision.set_global_policy("float32")
  assert outputs["mlm_logits"].shape == (2, 3, VOCAB) and outputs["mlm_logits"].dtype == tf.float32
  assert outputs["sequence_output"].shape == (2, LENGTH, 16) and outputs["pooled_output"].shape == (2, 16)
  if policy == "float32":   # the tied output embedding, against numpy
    expected = masked_lm_reference(pretrainer.masked_lm, outputs["sequence_output"].numpy(), POSITIONS,
                                   encoder.get_embedding_table().numpy())
    np.testing.assert_allclose(outputs["mlm_logits"].numpy(), expected, atol=1e-5, rtol=0)
  else:
    assert outputs["sequence_output"].dtype == tf.bfloat16


def train_steps(model, inputs, steps=4):
  """Eager Adam steps on `model.compute_loss`; returns the losses."""
  optimizer, losses = keras.optimizers.Adam(1e-2), []
  model_inputs = {name: value for name, value in inputs.items() if name in model.input}
  for _ in range(steps):
    with tf.GradientTape() as tape:
      loss = model.compute_loss(inputs, y_pred=model(model_inputs, training=True))
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_weights), model.trainable_weights,
                                  strict=True))
    losses.append(float(loss))
  return losses


def test_masked_lm_pretrainer_trains_and_reloads(tmp_path):
  keras.utils.set_random_seed(0)
  pretrainer = MaskedLMPretrainer(small_encoder())
  inputs = mlm_features()
  losses = train_steps(pretrainer, features())   # the labels come with the features
  assert losses[-1] < losses[0]
  np.testing.assert_allclose(   # compute_loss is the masked-LM loss of the outputs
      pretrainer.compute_loss(features(), y_pred=pretrainer(inputs)).numpy(),
      numpy_masked_lm_loss(features()["masked_lm_ids"], pretrainer(inputs)["mlm_logits"].numpy(), WEIGHTS),
      rtol=1e-5)

  pretrainer.save(tmp_path / "mlm.keras")
  loaded = keras.models.load_model(tmp_path / "mlm.keras", safe_mode=True)   # through from_config
  assert loaded.get_config() == pretrainer.get_config()
  assert loaded.masked_lm.embedding_table is loaded.encoder.get_embedding_table()
  expected, actual = pretrainer(inputs), loaded(inputs)
  for key in expected:
    np.testing.assert_array_equal(actual[key].numpy(), expected[key].numpy())


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_electra_outputs_and_shared_embeddings(policy):
  keras.mixed_precision.set_global_policy(policy)
  try:
    model = electra()
    outputs = model(features())
  finally:
    keras.mixed_precision.set_global_policy("float32")
  expected = dict(mlm_logits=((2, 3, VOCAB), tf.float32), sampled_ids=((2, 3), tf.int32),
                  corrupted_word_ids=((2, LENGTH), tf.int32), disc_logits=((2, LENGTH), tf.float32),
                  disc_labels=((2, LENGTH), tf.int32))
  assert {key: (value.shape, value.dtype) for key, value in outputs.items()} == expected
  assert np.all(np.isfinite(outputs["disc_logits"].numpy()))
  # One word-embedding table for the generator, its MLM output layer and the discriminator.
  table = model.discriminator.get_embedding_table()
  assert model.generator.get_embedding_table() is table and model.masked_lm.embedding_table is table
  assert sum(weight is table for weight in model.trainable_weights) == 1


def test_electra_embedding_sharing_options():
  narrow = small_encoder(hidden_size=8, intermediate_size=16)   # embedding width 8 != 16
  with pytest.raises(ValueError, match="build the generator with embedding_width=16"):
    ElectraPretrainer(narrow, small_encoder())
  model = ElectraPretrainer(narrow, small_encoder(), share_embeddings=False)
  assert model.generator.get_embedding_table() is not model.discriminator.get_embedding_table()
  with pytest.raises(ValueError, match="same vocabulary"):
    ElectraPretrainer(small_encoder(vocab_size=60), small_encoder(), share_embeddings=False)


def _check_replacements(inputs, outputs):
  """Labels are exactly `sampled != original` at the predicted positions and 0 elsewhere."""
  sampled, corrupted = outputs["sampled_ids"].numpy(), outputs["corrupted_word_ids"].numpy()
  labels = outputs["disc_labels"].numpy()
  expected_ids, expected_labels = inputs["input_word_ids"].copy(), np.zeros([2, LENGTH], np.int32)
  for b, p in zip(*np.nonzero(WEIGHTS), strict=True):
    position = POSITIONS[b, p]
    expected_ids[b, position] = sampled[b, p]
    expected_labels[b, position] = int(sampled[b, p] != inputs["masked_lm_ids"][b, p])
  np.testing.assert_array_equal(corrupted, expected_ids)
  np.testing.assert_array_equal(labels, expected_labels)
  assert corrupted[1, 0] == inputs["input_word_ids"][1, 0]   # the padded prediction replaced nothing


def test_electra_replaced_token_labels():
  model = electra()
  inputs = features()
  for _ in range(2):
    _check_replacements(inputs, model(inputs))
  # A generator sure of token 7: it "replaces" an original 7 by 7, which is labelled original.
  bias = np.zeros(VOCAB, np.float32)
  bias[7] = 100.0
  model.masked_lm.bias.assign(bias)
  inputs["masked_lm_ids"][0] = [7, 7, 8]
  outputs = model(inputs)
  assert np.all(outputs["sampled_ids"].numpy() == 7)
  _check_replacements(inputs, outputs)
  np.testing.assert_array_equal(outputs["disc_labels"].numpy()[0, [1, 3, 6]], [0, 0, 1])
  compiled = tf.function(lambda x: model(x), jit_compile=True)   # sampling compiles with XLA
  _check_replacements(inputs, compiled(inputs))


@pytest.mark.parametrize("weight", [50.0, 2.0])
def test_electra_loss_weighting_matches_numpy(weight):
  model = electra() if weight == 50.0 else electra(discriminator_weight=weight)
  inputs = features()
  outputs = model(inputs)
  losses = model.compute_losses(inputs, outputs)
  mlm = numpy_masked_lm_loss(inputs["masked_lm_ids"], outputs["mlm_logits"].numpy(), WEIGHTS)
  disc = numpy_replaced_token_loss(outputs["disc_labels"].numpy(), outputs["disc_logits"].numpy(),
                                   inputs["input_mask"])
  np.testing.assert_allclose(losses["mlm_loss"].numpy(), mlm, rtol=1e-5)
  np.testing.assert_allclose(losses["disc_loss"].numpy(), disc, rtol=1e-5)
  np.testing.assert_allclose(losses["loss"].numpy(), mlm + weight * disc, rtol=1e-5)
  np.testing.assert_allclose(model.compute_loss(inputs, y_pred=outputs).numpy(), mlm + weight * disc,
                             rtol=1e-5)


def test_electra_no_gradient_through_sampling():
  model = electra()
  inputs = features()
  with tf.GradientTape(persistent=True) as tape:
    losses = model.compute_losses(inputs, model(inputs, training=True))
  generator_blocks = [w for w in model.generator.trainable_weights if "layer_" in w.name]
  assert generator_blocks
  # The discriminator's loss reaches the generator only through the shared embedding table.
  assert all(g is None for g in tape.gradient(losses["disc_loss"], generator_blocks))
  assert tape.gradient(losses["disc_loss"], model.generator.get_embedding_table()) is not None
  discriminator_blocks = [w for w in model.discriminator.trainable_weights if "layer_" in w.name]
  assert all(g is None for g in tape.gradient(losses["mlm_loss"], discriminator_blocks))


def test_electra_train_steps_lower_the_loss_and_reload(tmp_path):
  keras.utils.set_random_seed(0)
  model = electra()
  inputs = features()
  losses = train_steps(model, inputs)
  assert losses[-1] < losses[0]

  model.save(tmp_path / "electra.keras")
  loaded = keras.models.load_model(tmp_path / "electra.keras", safe_mode=True)   # through from_config
  assert loaded.get_config() == model.get_config()
  assert loaded.generator.get_embedding_table() is loaded.discriminator.get_embedding_table()
  tf.random.set_seed(1)   # the same samples from the same logits
  expected = model(inputs)
  tf.random.set_seed(1)
  actual = loaded(inputs)
  for key in expected:
    np.testing.assert_array_equal(actual[key].numpy(), expected[key].numpy())


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Input dict contained keys")   # MLM labels ride along in the features
@pytest.mark.parametrize("name", ["masked_lm", "electra"])
def test_fit_trains_with_the_overridden_compute_loss(name):
  keras.utils.set_random_seed(0)
  model = MaskedLMPretrainer(small_encoder()) if name == "masked_lm" else electra()
  model.compile(optimizer=keras.optimizers.Adam(1e-2))
  history = model.fit(features(), epochs=4, verbose=0).history
  assert history["loss"][-1] < history["loss"][0]
  if name == "electra":
    total = np.array(history["mlm_loss"]) + 50 * np.array(history["disc_loss"])
    np.testing.assert_allclose(history["loss"], total, rtol=1e-5)


def test_docstring_examples_run():
  keras.utils.set_random_seed(0)
  result = doctest.testmod(pretrainers, extraglobs=dict(tf=tf, np=np, TransformerEncoder=TransformerEncoder),
                           optionflags=doctest.NORMALIZE_WHITESPACE)
  assert result.attempted > 0 and result.failed == 0

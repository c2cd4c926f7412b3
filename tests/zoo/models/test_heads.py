"""Task heads: the tied masked-LM layer against numpy, shapes, float32 logits, training and save/load."""

import doctest

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from tests.zoo.layers import reference
from zoo.graphs.kit import encoder_inputs
from zoo.models import TransformerEncoder
from zoo.models import heads
from zoo.models.heads import MaskedLMHead
from zoo.models.heads import SequenceClassifier
from zoo.models.heads import SpanQA
from zoo.models.heads import TokenClassifier

VOCAB, WIDTH, LENGTH = 50, 16, 8
SMALL = dict(vocab_size=VOCAB, hidden_size=WIDTH, num_layers=2, num_heads=2, intermediate_size=32,
             max_sequence_length=LENGTH)


def small_encoder(**overrides):
  return TransformerEncoder(**dict(SMALL, dropout=0.0, attention_dropout=0.0, **overrides))


def encoder_features(seed=0):
  rng = np.random.default_rng(seed)
  mask = np.ones([2, LENGTH], np.int32)
  mask[1, 6:] = 0
  return dict(input_word_ids=rng.integers(1, VOCAB, size=(2, LENGTH)).astype(np.int32), input_mask=mask,
              input_type_ids=np.array([[0] * 4 + [1] * 4] * 2, np.int32))


def masked_lm_reference(head, sequence_output, positions, table):
  """BERT's MLM output in numpy: gather, dense + gelu, layer norm, tied output embedding."""
  gathered = np.take_along_axis(np.asarray(sequence_output, np.float64), positions[:, :, None], axis=1)
  hidden = reference.gelu(gathered @ head.dense.kernel.numpy() + head.dense.bias.numpy())
  hidden = reference.layer_norm(hidden, head.layer_norm.gamma.numpy(), head.layer_norm.beta.numpy(), 1e-12)
  return hidden @ np.asarray(table, np.float64).T + head.bias.numpy()


def randomize(weights, seed=1, scale=0.3):
  rng = np.random.default_rng(seed)
  for weight in weights:
    weight.assign(rng.normal(scale=scale, size=weight.shape))


POSITIONS = np.array([[1, 3, 0], [2, 4, 5]], np.int32)


def test_masked_lm_head_is_tied_to_the_encoder_embedding_table():
  encoder = small_encoder()
  head = MaskedLMHead(encoder.get_embedding_table())
  sequence_output = encoder(encoder_features())["sequence_output"].numpy()
  head(sequence_output, masked_positions=POSITIONS)
  assert head.embedding_table is encoder.get_embedding_table()
  randomize([head.dense.kernel, head.dense.bias, head.layer_norm.gamma, head.layer_norm.beta, head.bias])

  logits = head(sequence_output, masked_positions=POSITIONS)
  assert logits.shape == (2, 3, VOCAB) and logits.dtype == tf.float32
  table = encoder.get_embedding_table().numpy()
  np.testing.assert_allclose(logits.numpy(), masked_lm_reference(head, sequence_output, POSITIONS, table),
                             atol=1e-5, rtol=0)

  # The output embedding is the encoder's table itself: changing one changes the other.
  randomize([encoder.get_embedding_table()], seed=2)
  new_table = encoder.get_embedding_table().numpy()
  assert np.abs(new_table - table).max() > 0.1
  expected = masked_lm_reference(head, sequence_output, POSITIONS, new_table)
  np.testing.assert_allclose(head(sequence_output, masked_positions=POSITIONS).numpy(), expected,
                             atol=1e-5, rtol=0)


def test_masked_lm_head_logits_stay_float32_under_mixed_precision():
  encoder = small_encoder()
  expected_head = MaskedLMHead(encoder.get_embedding_table())
  sequence_output = encoder(encoder_features())["sequence_output"]
  expected = expected_head(sequence_output, masked_positions=POSITIONS).numpy()
  keras.mixed_precision.set_global_policy("mixed_bfloat16")
  try:
    head = MaskedLMHead(encoder.get_embedding_table())
    head(tf.cast(sequence_output, tf.bfloat16), masked_positions=POSITIONS)
    head.set_weights(expected_head.get_weights())
    logits = head(tf.cast(sequence_output, tf.bfloat16), masked_positions=POSITIONS)
  finally:
    keras.mixed_precision.set_global_policy("float32")
  assert logits.dtype == tf.float32
  assert np.abs(logits.numpy() - expected).max() < 0.1   # only the input was rounded to bfloat16


def test_masked_lm_head_config_round_trip_and_missing_table():
  encoder = small_encoder()
  head = MaskedLMHead(encoder.get_embedding_table(), activation="relu", initializer="he_normal",
                      output="predictions", name="mlm")
  config = head.get_config()
  assert "embedding_table" not in config and config["dtype"] == "float32"
  clone = MaskedLMHead.from_config(dict(config, embedding_table=encoder.get_embedding_table()))
  assert clone.get_config() == config
  with pytest.raises(ValueError, match="needs the encoder's word-embedding table"):
    MaskedLMHead.from_config(config)(tf.zeros([1, LENGTH, WIDTH]), masked_positions=POSITIONS[:1])


# name -> (build the head on an encoder, training targets, Keras loss, output shapes)
HEADS = {
    "classifier": (lambda encoder: SequenceClassifier(encoder, num_classes=3, dropout=0.0),
                   np.array([0, 2]), keras.losses.SparseCategoricalCrossentropy(from_logits=True), (2, 3)),
    "regression": (lambda encoder: SequenceClassifier(encoder, num_classes=1, dropout=0.0),
                   np.array([[0.5], [-1.0]], np.float32), keras.losses.MeanSquaredError(), (2, 1)),
    "token_classifier": (lambda encoder: TokenClassifier(encoder, num_classes=4, dropout=0.0),
                         np.arange(2 * LENGTH).reshape(2, LENGTH) % 4,
                         keras.losses.SparseCategoricalCrossentropy(from_logits=True), (2, LENGTH, 4)),
    "span_qa": (lambda encoder: SpanQA(encoder),
                dict(start_logits=np.array([1, 2]), end_logits=np.array([3, 5])),
                dict(start_logits=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                     end_logits=keras.losses.SparseCategoricalCrossentropy(from_logits=True)),
                dict(start_logits=(2, LENGTH), end_logits=(2, LENGTH))),
}


def _as_dict(outputs):
  return outputs if isinstance(outputs, dict) else {"logits": outputs}


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("name", HEADS)
def test_head_shapes_and_float32_logits(name, policy):
  make_head, _, _, shapes = HEADS[name]
  inputs = encoder_features()
  keras.mixed_precision.set_global_policy(policy)
  try:
    encoder = small_encoder()
    head = make_head(encoder)
    outputs = _as_dict(head(inputs))
    sequence_dtype = encoder(inputs)["sequence_output"].dtype
  finally:
    keras.mixed_precision.set_global_policy("float32")
  assert sequence_dtype == (tf.bfloat16 if policy == "mixed_bfloat16" else tf.float32)
  for key, value in outputs.items():
    assert value.shape == _as_dict(shapes)[key]
    assert value.dtype == tf.float32, f"{key} must be float32 under {policy}"
    assert np.all(np.isfinite(value.numpy()))


def _loss(loss, targets, outputs):
  if isinstance(loss, dict):
    return sum(loss[key](targets[key], outputs[key]) for key in loss)
  return loss(targets, outputs)


@pytest.mark.parametrize("name", HEADS)
def test_head_train_steps_lower_the_loss(name):
  keras.utils.set_random_seed(0)
  make_head, targets, loss, _ = HEADS[name]
  head = make_head(small_encoder())
  inputs, optimizer, losses = encoder_features(), keras.optimizers.Adam(1e-2), []
  for _ in range(4):
    with tf.GradientTape() as tape:
      value = _loss(loss, targets, head(inputs, training=True))
    gradients = tape.gradient(value, head.trainable_weights)
    optimizer.apply_gradients(zip(gradients, head.trainable_weights, strict=True))
    losses.append(float(value))
  assert losses[-1] < losses[0]
  assert gradients[0] is not None   # the encoder's embedding table is trained too


@pytest.mark.parametrize("name", HEADS)
def test_head_keras_save_reload_and_xla(name, tmp_path):
  make_head, _, _, _ = HEADS[name]
  head = make_head(small_encoder(norm_first=True))
  randomize(head.trainable_weights, scale=0.1)   # a non-trivial output layer
  inputs = encoder_features()
  expected = _as_dict(head(inputs))
  config = head.get_config()
  assert config["encoder"]["config"]["norm_first"]

  head.save(tmp_path / "head.keras")
  loaded = keras.models.load_model(tmp_path / "head.keras", safe_mode=True)   # through from_config
  assert loaded.get_config() == config
  assert type(loaded) is type(head) and isinstance(loaded.encoder, TransformerEncoder)
  for key, value in _as_dict(loaded(inputs)).items():
    np.testing.assert_array_equal(value.numpy(), expected[key].numpy())

  if name in ("token_classifier", "span_qa"):   # with the run-time length check in the graph
    compiled = tf.function(lambda x: loaded(x, training=False), jit_compile=True)
    for key, value in _as_dict(compiled(inputs)).items():
      np.testing.assert_allclose(value.numpy(), expected[key].numpy(), atol=1e-5, rtol=0)


def _pooling_encoder(seq_length):
  """A stand-in for a Funnel encoder without decoder: `sequence_output` is half as long."""
  inputs = encoder_inputs(keras, seq_length)
  hidden = keras.layers.Embedding(VOCAB, WIDTH)(inputs["input_word_ids"])
  pooled = keras.layers.AveragePooling1D(2)(hidden)   # [B, T, D] -> [B, T/2, D]
  return keras.Model(inputs, dict(sequence_output=pooled, pooled_output=pooled[:, 0]))


@pytest.mark.parametrize("head_class", [TokenClassifier, SpanQA], ids=["token_classifier", "span_qa"])
def test_per_token_heads_need_full_length_sequence_output(head_class):
  args = (4,) if head_class is TokenClassifier else ()
  with pytest.raises(ValueError, match="needs one encoder output per input token"):
    head_class(_pooling_encoder(LENGTH), *args)
  head = head_class(_pooling_encoder(None), *args)   # lengths unknown until run time
  with pytest.raises(tf.errors.InvalidArgumentError, match="needs a full-length sequence_output"):
    head(encoder_features())
  # A pooled-only head does not care.
  assert SequenceClassifier(_pooling_encoder(LENGTH), 2)(encoder_features()).shape == (2, 2)


def test_argument_errors():
  with pytest.raises(ValueError, match="num_classes must be >= 1"):
    SequenceClassifier(small_encoder(), num_classes=0)
  with pytest.raises(ValueError, match="num_classes must be >= 1"):
    TokenClassifier(small_encoder(), num_classes=0)


def test_docstring_examples_run():
  keras.utils.set_random_seed(0)
  result = doctest.testmod(heads, extraglobs=dict(tf=tf, np=np, TransformerEncoder=TransformerEncoder),
                           optionflags=doctest.NORMALIZE_WHITESPACE)
  assert result.attempted > 0 and result.failed == 0

"""TransformerEncoder against Model Garden's BertEncoderV2 and its own variants."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from official.nlp.modeling import models as nlp_models
from official.nlp.modeling import networks

from tests.conftest import fast_or_slow
from tests.layer_checks import run_encoder_checks
from tests.zoo.layers import reference
from zoo.models import TransformerEncoder

VOCAB, WIDTH, LAYERS, HEADS, FFN, LENGTH = 50, 16, 2, 2, 32, 8
SMALL = dict(vocab_size=VOCAB, hidden_size=WIDTH, num_layers=LAYERS, num_heads=HEADS,
             intermediate_size=FFN, max_sequence_length=LENGTH)

# Our weight names -> Model Garden's BertEncoderV2 names (after the model prefix).
TO_MODEL_GARDEN = [
    ("embeddings/word_embeddings/", "word_embeddings/"),
    ("embeddings/position_embeddings/", "position_embedding/"),
    ("embeddings/type_embeddings/", "type_embeddings/"),
    ("embeddings/norm/", "embeddings/layer_norm/"),
    ("/attention/", "/self_attention/"),
    ("/attention_norm/", "/self_attention_layer_norm/"),
    ("/output_norm/", "/output_layer_norm/"),
    ("pooler/", "pooler_transform/"),
]


def _inputs(seed=0):
  rng = np.random.default_rng(seed)
  mask = np.ones([2, LENGTH], np.int32)
  mask[1, 5:] = 0
  return dict(input_word_ids=rng.integers(1, VOCAB, size=(2, LENGTH)).astype(np.int32), input_mask=mask,
              input_type_ids=np.array([[0] * 4 + [1] * 4] * 2, np.int32))


def _strip(name):
  name = name.split(":")[0]
  return name.split("/", 1)[1] if name.startswith("bert_encoder_v2/") else name


def _copy_into_model_garden(ours, theirs):
  by_name = {_strip(w.name).replace("transformer/", ""): w for w in theirs.weights}
  for weight in ours.weights:
    name = _strip(weight.name)
    if name.startswith("final_norm/"):
      continue
    for old, new in TO_MODEL_GARDEN:
      name = name.replace(old, new)
    by_name.pop(name).assign(weight)
  assert not by_name, f"Model Garden weights left unset: {sorted(by_name)}"


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
def test_matches_model_garden_bert_encoder(norm_first):
  inputs = _inputs()
  ours = TransformerEncoder(**SMALL, norm_first=norm_first, activation="gelu_approximate")
  theirs = networks.BertEncoderV2(
      vocab_size=VOCAB, hidden_size=WIDTH, num_layers=LAYERS, num_attention_heads=HEADS, inner_dim=FFN,
      max_sequence_length=LENGTH, type_vocab_size=2, norm_first=norm_first)
  expected = theirs(inputs)
  rng = np.random.default_rng(1)
  for weight in ours.weights:   # non-trivial LN parameters and biases
    weight.assign(rng.normal(scale=0.2, size=weight.shape))
  final_norm = [w.numpy() for w in ours.weights if "final_norm" in w.name]
  _copy_into_model_garden(ours, theirs)
  expected, actual = theirs(inputs), ours(inputs)
  for a, e in zip(actual["encoder_outputs"], expected["encoder_outputs"], strict=True):
    np.testing.assert_allclose(a.numpy(), e.numpy(), atol=1e-5, rtol=0)
  expected_sequence = expected["sequence_output"].numpy()
  if norm_first:   # Model Garden's Pre-LN stack has no final layer norm; ours does.
    expected_sequence = reference.layer_norm(expected_sequence, *final_norm, 1e-12)
  else:
    np.testing.assert_allclose(actual["pooled_output"].numpy(), expected["pooled_output"].numpy(),
                               atol=1e-5, rtol=0)
  np.testing.assert_allclose(actual["sequence_output"].numpy(), expected_sequence, atol=1e-5, rtol=0)


@pytest.mark.parametrize("position_encoding", ["absolute", "factorized"])
def test_one_layer_realformer_equals_post_ln(position_encoding):
  inputs = _inputs()
  config = dict(SMALL, num_layers=1, position_encoding=position_encoding)
  post_ln = TransformerEncoder(**config)
  realformer = TransformerEncoder(**config, residual_attention=True)
  realformer.set_weights(post_ln.get_weights())
  np.testing.assert_array_equal(realformer(inputs)["sequence_output"].numpy(),
                                post_ln(inputs)["sequence_output"].numpy())


def test_realformer_differs_from_post_ln_above_layer_zero():
  inputs = _inputs()
  # A wide initializer gives scores large enough for the carry to matter.
  post_ln = TransformerEncoder(**SMALL, initializer_range=0.5)
  realformer = TransformerEncoder(**SMALL, initializer_range=0.5, residual_attention=True)
  realformer.set_weights(post_ln.get_weights())
  a, b = realformer(inputs)["encoder_outputs"], post_ln(inputs)["encoder_outputs"]
  np.testing.assert_array_equal(a[0].numpy(), b[0].numpy())
  assert np.abs(a[1].numpy() - b[1].numpy()).max() > 1e-3


def test_attention_probs_on_request():
  encoder = TransformerEncoder(**SMALL, residual_attention=True, output_attention_probs=True)
  probs = encoder(_inputs())["attention_probs"]
  assert len(probs) == LAYERS and probs[0].shape == (2, HEADS, LENGTH, LENGTH)
  assert probs[0].dtype == tf.float32
  np.testing.assert_allclose(probs[1].numpy().sum(-1), 1.0, atol=1e-5)
  assert probs[1].numpy()[1, :, :, 5:].max() < 1e-6   # padded keys get no attention


# `make test-fast` runs the first of each list (the others: `make test`).
@pytest.mark.parametrize("position_encoding", ["absolute", *(pytest.param(name, marks=pytest.mark.slow)
                                                            for name in ("factorized", "shift"))])
def test_works_as_model_garden_bert_classifier_network(position_encoding):
  keras.utils.set_random_seed(0)
  encoder = TransformerEncoder(**SMALL, position_encoding=position_encoding, seq_length=LENGTH,
                               dropout=0.0, attention_dropout=0.0)
  classifier = nlp_models.BertClassifier(encoder, num_classes=3, dropout_rate=0.0)
  inputs = _inputs()
  logits = classifier(inputs)
  assert logits.shape == (2, 3)
  classifier.compile(optimizer=keras.optimizers.Adam(1e-2),
                     loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  history = classifier.fit(inputs, np.array([0, 2]), epochs=3, verbose=0)
  assert history.history["loss"][-1] < history.history["loss"][0]


def test_padding_does_not_change_real_positions():
  encoder = TransformerEncoder(**SMALL, position_encoding="factorized")
  inputs = _inputs()
  other = dict(inputs, input_word_ids=inputs["input_word_ids"].copy())
  other["input_word_ids"][1, 5:] = 7
  a, b = encoder(inputs)["sequence_output"].numpy(), encoder(other)["sequence_output"].numpy()
  np.testing.assert_allclose(a[1, :5], b[1, :5], atol=1e-6)


def test_config_errors():
  with pytest.raises(ValueError, match="must be a multiple of num_heads"):
    TransformerEncoder(**dict(SMALL, num_heads=3))
  with pytest.raises(ValueError, match="needs a static seq_length"):
    TransformerEncoder(**SMALL, position_encoding="shift")
  with pytest.raises(ValueError, match="seq_length 1024 exceeds max_sequence_length 512"):
    TransformerEncoder(**dict(SMALL, max_sequence_length=512), seq_length=1024)


VARIANTS = {
    "post_ln": dict(),
    "pre_ln": dict(norm_first=True),
    "realformer_mean": dict(residual_attention=True, running_mean=True, embedding_width=8),
    "relative_shift": dict(position_encoding="shift", seq_length=LENGTH, residual_attention=True),
}


@pytest.mark.parametrize("variant", fast_or_slow(VARIANTS, ("realformer_mean",)))
def test_save_reload_xla_and_mixed_precision(variant, tmp_path):
  config = dict(SMALL, **VARIANTS[variant])
  run_encoder_checks(TransformerEncoder, config, _inputs(), tmp_path)

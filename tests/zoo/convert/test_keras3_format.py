"""`python -m zoo.convert keras3`: a weights directory (as `zoo.keras3.weights_dir.save_weights_dir` writes
it) into a tf_keras model directory, and the errors of directories that do not fit."""

import json

import numpy as np
import pytest
from safetensors.numpy import save_file

from zoo.convert.__main__ import main
from zoo.convert.errors import ConversionError
from zoo.convert.model_dir_writer import convert_to_model_dir
from zoo.model_dir import ModelDir
from zoo.models import FunnelEncoder
from zoo.models.pretrainers import MaskedLMPretrainer
from zoo.named_weights import named_arrays

CONFIG = dict(vocab_size=40, hidden_size=16, num_heads=2, intermediate_size=32, block_sizes=[1, 1],
              num_decoder_layers=1, seq_length=8, residual_attention=True)
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(35)]


def _weights_dir(path, arrays, **changes):
  path.mkdir()
  config = dict(format="zoo-keras3-weights/1", family="funnel", encoder_config=CONFIG,
                heads={"masked_lm": dict(activation="gelu", mlm_transform=True)},
                tokenizer=dict(lower_case=True, special_tokens=dict(pad="[PAD]", unk="[UNK]", cls="[CLS]",
                                                                    sep="[SEP]", mask="[MASK]")))
  config.update(changes)
  (path / "config.json").write_text(json.dumps(config))
  (path / "vocab.txt").write_text("".join(f"{token}\n" for token in VOCAB))
  save_file({key: np.asarray(value, np.float32) for key, value in arrays.items()},
            str(path / "model.safetensors"))
  return str(path)


@pytest.fixture(scope="module")
def trained():
  """A tf_keras masked-LM model with random weights, and its weights by the names both editions use."""
  encoder = FunnelEncoder(**{**CONFIG, "block_sizes": (1, 1)})
  model = MaskedLMPretrainer(encoder, activation="gelu")
  rng = np.random.default_rng(0)
  for weight in model.weights:
    weight.assign(rng.normal(0, 0.2, weight.shape).astype(np.float32))
  arrays = named_arrays(encoder)
  arrays.update({weight.name.split(":")[0]: weight.numpy() for weight in model.masked_lm.weights
                 if weight is not encoder.get_embedding_table()})
  return model, arrays


def test_a_weights_directory_becomes_a_masked_lm_run_that_computes_the_same(trained, tmp_path):
  model, arrays = trained
  out = tmp_path / "model_dir"
  assert main(["keras3", _weights_dir(tmp_path / "k3", arrays), "--out", str(out)]) == 0
  settings = ModelDir(str(out)).read_config()
  assert [settings[key] for key in ("task", "mlm_transform", "head_activation", "seq_length")] == [
      "mlm", True, "gelu", 8]
  from tpu.config import TrainConfig
  from tpu.serving import restore_model
  model_dir = ModelDir(str(out))
  restored = restore_model(TrainConfig.from_model_dir(model_dir), model_dir.latest_checkpoint())
  ids = np.array([[2, 7, 8, 9, 3, 0, 0, 0], [2, 10, 11, 12, 13, 14, 15, 3]], np.int32)
  features = dict(input_word_ids=ids, input_mask=(ids > 0).astype(np.int32), input_type_ids=0 * ids,
                  masked_lm_positions=np.array([[1, 2], [3, 6]], np.int32))
  np.testing.assert_allclose(restored(features)["mlm_logits"], model(features)["mlm_logits"], atol=1e-6)


def test_directories_that_do_not_fit_are_refused_naming_what(trained, tmp_path):
  _, arrays = trained
  cases = [
      (dict(format="something/2"), {}, r"format 'something/2' is not 'zoo-keras3-weights/1'"),
      (dict(family="lstm"), {}, r"family 'lstm' is not one of \['funnel', 'transformer'\]"),
      (dict(heads={"classifier": {}}), {}, r"heads \['classifier'\] have no tf_keras counterpart"),
      ({}, dict(drop="embeddings/norm/gamma"), r"missing \['embeddings/norm/gamma'\]"),
      ({}, dict(drop="masked_lm/output_bias/bias"), r"the masked-LM head's weights"),
  ]
  for index, (changes, edit, message) in enumerate(cases):
    given = {key: value for key, value in arrays.items() if key != edit.get("drop")}
    source = _weights_dir(tmp_path / f"k3_{index}", given, **changes)
    with pytest.raises(ConversionError, match=message):
      convert_to_model_dir("keras3", source, str(tmp_path / f"out_{index}"))


@pytest.mark.slow
def test_an_electra_weights_directory_becomes_an_electra_run_the_training_job_restores(tmp_path):
  from tpu.config import TrainConfig
  from tpu.serving import restore_model
  from zoo.models.pretrainers import ElectraPretrainer
  generator_config = dict(CONFIG, hidden_size=8, num_heads=1, intermediate_size=16, embedding_width=16)
  generator = FunnelEncoder(**{**generator_config, "block_sizes": (1, 1)})
  discriminator = FunnelEncoder(**{**CONFIG, "block_sizes": (1, 1)})
  model = ElectraPretrainer(generator, discriminator, discriminator_weight=20.0, activation="gelu")
  rng = np.random.default_rng(1)
  for weight in model.weights:
    weight.assign(rng.normal(0, 0.2, weight.shape).astype(np.float32))
  arrays = named_arrays(discriminator)
  arrays.update({f"generator/{key}": value for key, value in named_arrays(generator).items()})
  arrays.update({weight.name.split(":")[0]: weight.numpy() for weight in model.masked_lm.weights
                 if weight is not discriminator.get_embedding_table()})
  for part, layer in (("transform", model.disc_transform), ("logits", model.disc_scores)):
    arrays.update({f"discriminator_head/{part}/kernel": layer.kernel.numpy(),
                   f"discriminator_head/{part}/bias": layer.bias.numpy()})
  heads = {"generator_masked_lm": dict(activation="gelu", mlm_transform=True),
           "discriminator_head": dict(activation="gelu")}
  source = _weights_dir(tmp_path / "k3", arrays, heads=heads, generator_config=generator_config,
                        discriminator_weight=20.0)
  out = tmp_path / "model_dir"
  assert main(["keras3", source, "--out", str(out)]) == 0
  settings = ModelDir(str(out)).read_config()
  assert [settings[key] for key in ("task", "discriminator_weight", "head_activation")] == [
      "electra", 20.0, "gelu"]
  model_dir = ModelDir(str(out))
  restored = restore_model(TrainConfig.from_model_dir(model_dir), model_dir.latest_checkpoint())
  ids = np.array([[2, 7, 8, 9, 3, 0, 0, 0], [2, 10, 11, 12, 13, 14, 15, 3]], np.int32)
  features = dict(input_word_ids=ids, input_mask=(ids > 0).astype(np.int32), input_type_ids=0 * ids)
  masked = dict(features, masked_lm_positions=np.array([[1, 2], [3, 6]], np.int32),
                masked_lm_ids=np.array([[7, 8], [12, 15]], np.int32),
                masked_lm_weights=np.ones([2, 2], np.float32))
  np.testing.assert_allclose(restored(masked)["mlm_logits"], model(masked)["mlm_logits"], atol=1e-6)

  def discriminator_logits(electra):   # the discriminator and its head on the same (uncorrupted) ids
    return electra.disc_scores(electra.disc_transform(electra.discriminator(features)["sequence_output"]))

  np.testing.assert_allclose(discriminator_logits(restored), discriminator_logits(model), atol=1e-6)

  del arrays["discriminator_head/logits/bias"]
  source = _weights_dir(tmp_path / "k3_missing", arrays, heads=heads, generator_config=generator_config)
  with pytest.raises(ConversionError, match="holds no discriminator_head/logits/bias"):
    convert_to_model_dir("keras3", source, str(tmp_path / "out_missing"))

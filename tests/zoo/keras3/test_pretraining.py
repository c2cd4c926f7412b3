"""Masked-LM pre-training in the Keras 3 edition (JAX, data-parallel over two devices) and back into
tf_keras: `python -m zoo.convert keras3`, the tf_keras pre-training model and the SavedModel export."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from tests.zoo.keras3.conftest import run_in_backend
from tests.zoo.keras3.pretrain_run import CASES
from zoo import presets
from zoo.convert.model_dir_writer import convert_to_model_dir
from zoo.model_dir import ENCODER_ROOT
from zoo.model_dir import MASKED_LM_ROOT
from zoo.model_dir import MODEL_ROOT
from zoo.model_dir import ModelDir


def _tf_keras_pretrainer(model_dir):
  """The tf_keras masked-LM pre-training model of a model directory, restored from its checkpoint."""
  from zoo.models import FunnelEncoder
  from zoo.models import TransformerEncoder
  from zoo.models.pretrainers import MaskedLMPretrainer
  settings = ModelDir(model_dir).read_config()
  config = presets.encoder_config(settings)
  encoder = {"funnel": FunnelEncoder, "transformer": TransformerEncoder}[config.family](config)
  pretrainer = MaskedLMPretrainer(encoder, activation=settings["head_activation"],
                                  mlm_transform=settings["mlm_transform"])
  checkpoint = tf.train.Checkpoint(**{ENCODER_ROOT: encoder, MASKED_LM_ROOT: pretrainer.masked_lm})
  checkpoint.read(ModelDir(model_dir).latest_checkpoint()).assert_existing_objects_matched()
  return pretrainer


def _tf_keras_electra(model_dir):
  """The tf_keras ELECTRA model of a model directory, its generator rebuilt as the training job does
  (`generator_overrides`), restored from the checkpoint (every object of the model matched)."""
  from tpu.config import TrainConfig
  from tpu.tasks.base import build_encoder
  from tpu.tasks.pretraining import generator_overrides
  from zoo.models.pretrainers import ElectraPretrainer
  settings = ModelDir(model_dir).read_config()
  names = ("model", "model_overrides", "seq_length", "vocab_size", "task", "generator_overrides")
  config = TrainConfig(**{key: settings[key] for key in names})
  generator = build_encoder(config, **generator_overrides(config))
  electra = ElectraPretrainer(generator, build_encoder(config), activation=settings["head_activation"],
                              discriminator_weight=settings["discriminator_weight"],
                              mlm_transform=settings["mlm_transform"])
  checkpoint = tf.train.Checkpoint(**{MODEL_ROOT: electra}, **electra.checkpoint_items)
  checkpoint.read(ModelDir(model_dir).latest_checkpoint()).assert_existing_objects_matched()
  return electra


def _hugging_face_masked_lm(tmp_path):
  """A FunnelForMaskedLM directory as transformers saves it (random weights, WordPiece tokenizer files),
  and masked inputs of every padding, in OUT_DIR/hf_inputs.npz."""
  import torch
  import transformers
  directory = str(tmp_path / "hf_funnel_mlm")
  config = transformers.FunnelConfig(vocab_size=120, block_sizes=[1, 1], d_model=32, n_head=2, d_head=16,
                                     d_inner=64, num_decoder_layers=1)
  torch.manual_seed(0)
  transformers.FunnelForMaskedLM(config).save_pretrained(directory)
  vocab = tmp_path / "funnel_vocab.txt"
  vocab.write_text("\n".join(["<pad>", "<unk>", "<cls>", "<sep>", "<mask>"] + [f"w{i}" for i in range(115)]))
  transformers.FunnelTokenizer(str(vocab)).save_pretrained(directory)
  rng = np.random.default_rng(0)
  lengths = np.arange(3, 11)   # every padding of length 10
  ids = np.where(np.arange(10) < lengths[:, None], rng.integers(5, 120, (8, 10)), 0).astype(np.int32)
  ids[:, 0] = 2
  ids[np.arange(8), lengths - 1] = 3
  positions = np.stack([rng.permutation(np.arange(1, 10))[:4] for _ in range(8)]).astype(np.int32)
  inputs = dict(token_ids=ids, segment_ids=np.zeros_like(ids), padding_mask=(ids != 0).astype(np.int32),
                mask_positions=positions)
  np.savez(tmp_path / "hf_inputs.npz", **inputs)
  return directory, dict(inputs, real=positions < lengths[:, None])


def _check_hugging_face_masked_lm(tmp_path, report, hf_dir, hf_inputs):
  """A Hugging Face FunnelForMaskedLM through keras-hub's MaskedLM.from_preset (its head included) gives
  transformers' logits at the masked positions."""
  import torch
  import transformers
  assert report["hf_classes"] == ["FunnelMaskedLM", "FunnelMaskedLMPreprocessor"]
  model = transformers.FunnelForMaskedLM.from_pretrained(hf_dir).eval()
  with torch.no_grad():
    expected = model(input_ids=torch.tensor(hf_inputs["token_ids"], dtype=torch.long),
                     attention_mask=torch.tensor(hf_inputs["padding_mask"]),
                     token_type_ids=torch.tensor(hf_inputs["segment_ids"])).logits.numpy()
  expected = np.take_along_axis(expected, hf_inputs["mask_positions"][..., None].astype(np.int64), axis=1)
  difference = np.abs(np.load(tmp_path / "hf_logits.npy") - expected)[hf_inputs["real"]].max()
  print(f"FunnelForMaskedLM via MaskedLM.from_preset vs transformers: max |diff| {difference:.2e}")
  assert difference < 1e-4


def _check_masked_lm_run(tmp_path, report, name, transform):
  """A masked-LM run of `CASES`: it learned; converted, it loads into the tf_keras pre-training model with
  the Keras 3 logits, and its SavedModel export gives the Keras 3 encoder outputs."""
  from export.saved_model import export
  losses = report[name]["losses"]
  assert report[name]["masked"] > 0 and losses[-1] < losses[0] - 0.05, (name, losses)

  model_dir = str(tmp_path / f"{name}_model_dir")
  convert_to_model_dir("keras3", str(tmp_path / name), model_dir)
  settings = ModelDir(model_dir).read_config()
  assert settings["mlm_transform"] is transform and settings["seq_length"] == 32
  saved = dict(np.load(tmp_path / f"{name}.npz"))
  features = dict(input_word_ids=saved["token_ids"], input_mask=saved["padding_mask"].astype(np.int32),
                  input_type_ids=saved["segment_ids"])
  outputs = _tf_keras_pretrainer(model_dir)(dict(features, masked_lm_positions=saved["mask_positions"]))
  difference = np.abs(outputs["mlm_logits"].numpy() - saved["logits"]).max()
  print(f"{name}: masked-LM logits, tf_keras vs Keras 3 (JAX): max |diff| {difference:.2e}")
  assert difference < 1e-4

  version = export(model_dir, str(tmp_path / f"{name}_export"))
  served = tf.saved_model.load(version).signatures["from_token_ids"](
      **{key: tf.constant(value) for key, value in features.items()})
  for key in ("sequence_output", "pooled_output"):
    difference = np.abs(served[key].numpy() - saved[key]).max()
    print(f"{name}: exported {key} vs Keras 3: max |diff| {difference:.2e}")
    assert difference < 1e-4
  assert os.path.exists(os.path.join(version, "saved_model.pb"))


def _check_electra_run(tmp_path, report):
  """ELECTRA: the generator shares the discriminator's word embeddings; the run loads into the tf_keras
  ElectraPretrainer (the generator rebuilt from the run's settings) and exports the discriminator."""
  from export.saved_model import export
  electra = report["electra"]
  assert electra["shared"] == [True, True] and electra["generator_width"] == 8
  assert electra["reloaded_class"] == "FunnelElectra"   # from its .keras file, equal outputs
  assert electra["reloaded_difference"] == 0.0
  assert electra["masked"] > 0 and electra["losses"][-1] < electra["losses"][0], electra["losses"]
  model_dir = str(tmp_path / "electra_model_dir")
  convert_to_model_dir("keras3", str(tmp_path / "electra"), model_dir)
  settings = ModelDir(model_dir).read_config()
  assert settings["task"] == "electra" and settings["generator_overrides"]["hidden_size"] == 8
  model = _tf_keras_electra(model_dir)
  saved = dict(np.load(tmp_path / "electra.npz"))
  features = dict(input_word_ids=saved["token_ids"], input_mask=saved["padding_mask"].astype(np.int32),
                  input_type_ids=saved["segment_ids"])
  outputs = model(dict(features, masked_lm_positions=saved["mask_positions"], masked_lm_ids=saved["mask_ids"],
                       masked_lm_weights=saved["mask_weights"]))
  difference = np.abs(outputs["mlm_logits"].numpy() - saved["mlm_logits"]).max()
  print(f"electra: generator's masked-LM logits, tf_keras vs Keras 3 (JAX): max |diff| {difference:.2e}")
  assert difference < 1e-4
  # The loss: Keras 3's compute_losses against the tf_keras edition's electra_losses on the same outputs.
  from zoo.models.losses import electra_losses
  expected = electra_losses(dict(masked_lm_ids=saved["mask_ids"], masked_lm_weights=saved["mask_weights"],
                                 input_mask=features["input_mask"]),
                            dict(mlm_logits=saved["mlm_logits"], disc_logits=saved["disc_logits"],
                                 disc_labels=saved["disc_labels"]), settings["discriminator_weight"])
  for key, value in expected.items():
    assert abs(float(saved[f"{key}_value"]) - float(value)) < 1e-4 * max(1.0, abs(float(value))), key
  corrupted = dict(features, input_word_ids=saved["corrupted_ids"])
  disc_logits = model.disc_scores(model.disc_transform(model.discriminator(corrupted)["sequence_output"]))
  difference = np.abs(disc_logits.numpy()[..., 0] - saved["disc_logits"]).max()
  print(f"electra: discriminator logits, tf_keras vs Keras 3 (JAX): max |diff| {difference:.2e}")
  assert difference < 1e-4
  version = export(model_dir, str(tmp_path / "electra_export"))
  served = tf.saved_model.load(version).signatures["from_token_ids"](
      **{key: tf.constant(value) for key, value in corrupted.items()})
  difference = np.abs(served["sequence_output"].numpy() - saved["sequence_output"]).max()
  print(f"electra: exported discriminator vs Keras 3: max |diff| {difference:.2e}")
  assert difference < 1e-4


@pytest.mark.slow
def test_masked_lm_pretrained_in_keras_3_on_two_devices_loads_into_tf_keras_and_exports(prose_vocab,
                                                                                         tmp_path):
  import tensorflow_text  # noqa: F401  (the exported tokenizer's ops)

  hf_dir, hf_inputs = _hugging_face_masked_lm(tmp_path)
  run_in_backend("jax", "tests.zoo.keras3.pretrain_run", prose_vocab(True), str(tmp_path), hf_dir,
                 cpu_devices=2)
  with open(tmp_path / "report.json") as file:
    report = json.load(file)
  assert report["backend"] == "jax" and len(report["devices"]) == 2, report
  assert "needs the decoder" in report["no_decoder_error"]

  _check_hugging_face_masked_lm(tmp_path, report, hf_dir, hf_inputs)
  for name, (_, _, transform) in CASES.items():
    _check_masked_lm_run(tmp_path, report, name, transform)
  _check_electra_run(tmp_path, report)

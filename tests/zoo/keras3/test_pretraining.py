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
from zoo.model_dir import ModelDir


def _tf_keras_pretrainer(model_dir):
  """The tf_keras masked-LM pre-training model of a model directory, restored from its checkpoint."""
  from zoo.models import FunnelEncoder
  from zoo.models import TransformerEncoder
  from zoo.models.pretrainers import MaskedLMPretrainer
  settings = ModelDir(model_dir).read_config()
  family, arguments = presets.encoder_arguments(settings)
  encoder = {"funnel": FunnelEncoder, "transformer": TransformerEncoder}[family](**arguments)
  pretrainer = MaskedLMPretrainer(encoder, activation=settings["head_activation"],
                                  mlm_transform=settings["mlm_transform"])
  checkpoint = tf.train.Checkpoint(**{ENCODER_ROOT: encoder, MASKED_LM_ROOT: pretrainer.masked_lm})
  checkpoint.read(ModelDir(model_dir).latest_checkpoint()).assert_existing_objects_matched()
  return pretrainer


@pytest.mark.slow
def test_masked_lm_pretrained_in_keras_3_on_two_devices_loads_into_tf_keras_and_exports(prose_vocab,
                                                                                         tmp_path):
  import tensorflow_text  # noqa: F401  (the exported tokenizer's ops)

  from export.saved_model import export
  run_in_backend("jax", "tests.zoo.keras3.pretrain_run", prose_vocab(True), str(tmp_path), cpu_devices=2)
  with open(tmp_path / "report.json") as file:
    report = json.load(file)
  assert report["backend"] == "jax" and len(report["devices"]) == 2, report
  for name, (_, _, transform) in CASES.items():
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

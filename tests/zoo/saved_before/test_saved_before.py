"""What an earlier release saved still loads, through the public loaders, and computes what it computed.

The fixtures (`fixtures/README.md` names the release and the command that wrote them, and what each
holds) are tiny models saved by that release: two model directories as `python -m tpu.train` writes
them, `.keras` files of both editions, tf_keras SavedModels and keras-hub presets of the zoo's
backbones, each beside the outputs the release computed for its inputs (`outputs.npz`). They are
never rewritten by later code. tf_keras loads here; Keras 3 (JAX) loads everything it can in one
process of its own (`keras3_run.py`).
"""

import pathlib
import tarfile

import numpy as np
import pytest

from tests.zoo.keras3.conftest import run_in_backend

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
ARCHIVE = "artefacts.tar.gz"   # the fixtures' folders, when packed into one file
ATOL = 1e-5
ENCODER_OUTPUTS = ("sequence_output", "pooled_output", "encoder_sequence_output")
INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
  """The folder of the fixtures' folders (unpacked first when they are an archive)."""
  archive = FIXTURES / ARCHIVE
  if not archive.exists():
    return FIXTURES
  out = tmp_path_factory.mktemp("saved_before")
  with tarfile.open(archive) as packed:
    packed.extractall(out, filter="data")
  return out


def recorded(saved, folder):
  """The inputs and the release's outputs of the fixture `folder`."""
  with np.load(saved / folder / "outputs.npz") as data:
    return dict(data)


def assert_outputs(actual, expected, names, what):
  checked = [name for name in names if name in expected]
  assert checked, f"{what}: no recorded outputs among {names}"
  for name in checked:
    assert name in actual, f"{what} has no {name}"
    np.testing.assert_allclose(np.asarray(actual[name]), expected[name], atol=ATOL, rtol=0,
                               err_msg=f"{what}: {name}")


@pytest.mark.parametrize("folder", ["run_funnel_classify", "run_transformer_mlm"])
def test_a_model_directory_restores_its_task_model(saved, folder):
  from tpu.config import TrainConfig
  from tpu.serving import restore_model
  from tpu.tasks import get_task
  from zoo.model_dir import ModelDir
  expected = recorded(saved, folder)
  path = str(saved / folder / "model_dir")
  config = TrainConfig.from_model_dir(path)
  model = restore_model(config, ModelDir(path).latest_checkpoint())
  features = {name: expected[name] for name in INPUT_NAMES}
  given = dict(features)
  if "masked_lm_positions" in expected:
    given["masked_lm_positions"] = expected["masked_lm_positions"]
  outputs = model(given, training=False)
  outputs = outputs if isinstance(outputs, dict) else dict(logits=outputs)
  assert_outputs(outputs, expected, ("logits", "mlm_logits"), f"{folder}'s task model")
  encoded = get_task(config).encoder(model)(features, training=False)
  assert_outputs(encoded, expected, ENCODER_OUTPUTS, f"{folder}'s encoder")


@pytest.mark.parametrize("folder,file,cls", [
    ("tf_keras_funnel_encoder", "encoder.keras", "FunnelEncoder"),
    ("tf_keras_funnel_encoder", "saved_model", "FunnelEncoder"),
    ("tf_keras_transformer_encoder", "saved_model", "TransformerEncoder")])
def test_a_tf_keras_file_loads_as_its_encoder(saved, folder, file, cls):
  import tf_keras as keras

  import zoo.models
  expected = recorded(saved, folder)
  model = keras.models.load_model(str(saved / folder / file))
  # A SavedModel whose config no longer builds the class would load as a revived graph, silently.
  assert isinstance(model, getattr(zoo.models, cls)), type(model)
  outputs = model({name: expected[name] for name in INPUT_NAMES}, training=False)
  assert_outputs(outputs, expected, ENCODER_OUTPUTS, f"{folder}/{file}")


# Each check of keras3_run.py: (fixture folder, the class it loads as, the outputs compared).
KERAS3_CHECKS = {
    "keras3_funnel_encoder:load_model": ("FunnelEncoder", ENCODER_OUTPUTS),
    "keras3_transformer_encoder:load_model": ("TransformerEncoder", ENCODER_OUTPUTS),
    "preset_funnel_backbone:from_preset": ("FunnelBackbone", ENCODER_OUTPUTS),
    "preset_transformer_backbone:from_preset": ("TransformerBackbone", ENCODER_OUTPUTS),
    "run_funnel_classify:load_model_dir": ("FunnelEncoder", ENCODER_OUTPUTS),
    "run_funnel_classify:Backbone.from_preset": ("FunnelBackbone", ("sequence_output", "pooled_output")),
    "run_transformer_mlm:load_model_dir": ("TransformerEncoder", ENCODER_OUTPUTS),
    "run_transformer_mlm:Backbone.from_preset": ("TransformerBackbone", ("sequence_output", "pooled_output")),
    "run_transformer_mlm:MaskedLM.from_preset": ("TransformerMaskedLM", ("mlm_logits",)),
}
TOKENIZERS = {
    "preset_funnel_backbone:from_preset": "FunnelTokenizer",
    "preset_transformer_backbone:from_preset": "TransformerTokenizer",
    "run_funnel_classify:Tokenizer.from_preset": "FunnelTokenizer",
    "run_transformer_mlm:Tokenizer.from_preset": "TransformerTokenizer",
}


@pytest.mark.slow
def test_keras_3_loads_the_files_presets_and_model_directories(saved, tmp_path):
  out = tmp_path / "keras3.npz"
  run_in_backend("jax", "tests.zoo.saved_before.keras3_run", str(saved), str(out))
  with np.load(out) as data:
    actual = dict(data)
  assert str(actual.pop("backend")) == "jax"
  for check, (cls, names) in KERAS3_CHECKS.items():
    folder = check.split(":")[0]
    assert str(actual[f"{check}/class"]) == cls, check
    outputs = {key.split("/", 1)[1]: value for key, value in actual.items() if key.startswith(f"{check}/")}
    assert_outputs(outputs, recorded(saved, folder), names, check)
  for check, cls in TOKENIZERS.items():
    expected = recorded(saved, check.split(":")[0])["text_token_ids"]
    assert str(actual[f"{check}/tokenizer_class"]) == cls, check
    np.testing.assert_array_equal(actual[f"{check}/text_token_ids"], expected, err_msg=check)

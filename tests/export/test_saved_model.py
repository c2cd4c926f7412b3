"""export.saved_model: the signatures against the Keras models, version numbers, atomic writes.

The exports are loaded by `serving_box.py` in a separate process that can import
tensorflow and tensorflow_text only (see `conftest.loaded`).
"""

import json
import os
import shutil
import signal

import numpy as np
import pytest
import tensorflow as tf

from export import predict
from export import saved_model
from tests.export.conftest import ODD_BATCHES
from tests.export.conftest import PAIRS
from tests.export.conftest import TEXTS
from tests.export.conftest import keras_logits
from tests.export.conftest import start_python
from tests.export.conftest import strings
from tpu import serving
from zoo.model_dir import ModelDir


@pytest.mark.slow   # the exports loaded in a process of their own (`loaded`)
def test_loads_with_tensorflow_and_tensorflow_text_only(loaded):
  assert loaded["modules_after_loading"] == []
  assert loaded["signatures"] == ["encode", "from_token_ids", "serving_default"]


@pytest.mark.slow   # the exports loaded in a process of their own (`loaded`)
def test_classify_matches_the_keras_model(classify_dir, loaded):
  logits = keras_logits(classify_dir, TEXTS)
  outputs = loaded["texts"]
  np.testing.assert_allclose(outputs["probabilities"]["value"], tf.nn.softmax(logits).numpy(), atol=1e-5)
  np.testing.assert_allclose(outputs["logits"]["value"], logits, atol=1e-5)
  assert outputs["label_ids"]["value"] == logits.argmax(-1).tolist()
  assert loaded["label_names"] == ["negative", "neutral", "positive"]
  assert outputs["labels"]["value"] == [loaded["label_names"][i] for i in logits.argmax(-1)]
  assert len(set(outputs["label_ids"]["value"])) > 1, "perturbed weights should give several classes"
  assert {name: value["dtype"] for name, value in outputs.items()} == dict(
      probabilities="float32", label_ids="int32", labels="string", logits="float32")
  encoder = classify_dir.model.encoder(classify_dir.text_encoder.encode(strings(TEXTS)), training=False)
  np.testing.assert_allclose(loaded["encode"]["pooled_output"]["value"], encoder["pooled_output"], atol=1e-5)
  assert loaded["encode"]["sequence_output"]["shape"] == [len(TEXTS), 4, 32]   # encoder-only Funnel: T/4


@pytest.mark.slow   # the exports loaded in a process of their own (`loaded`)
@pytest.mark.parametrize("name", sorted(ODD_BATCHES))
def test_odd_inputs_give_well_formed_outputs(classify_dir, loaded, name):
  texts = ODD_BATCHES[name]
  outputs = loaded["odd"][name]
  assert outputs["probabilities"]["shape"] == [len(texts), 3]
  assert outputs["label_ids"]["shape"] == outputs["labels"]["shape"] == [len(texts)]
  probabilities = np.array(outputs["probabilities"]["value"], np.float32).reshape(len(texts), 3)
  np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-5)
  assert all(0 <= index < 3 for index in outputs["label_ids"]["value"])
  if texts:
    np.testing.assert_allclose(probabilities, tf.nn.softmax(keras_logits(classify_dir, texts)), atol=1e-5)


@pytest.mark.slow   # the exports loaded in a process of their own (`loaded`)
def test_sentence_pair_regression(regress_pair_dir, loaded):
  pair = loaded["pair"]
  assert pair["inputs"] == ["text", "text_b"]
  assert pair["text"]["predictions"]["shape"] == [len(PAIRS[0])]
  expected = keras_logits(regress_pair_dir, *PAIRS)[:, 0]
  np.testing.assert_allclose(pair["text"]["predictions"]["value"], expected, atol=1e-5)
  np.testing.assert_allclose(pair["token_ids"]["predictions"]["value"], pair["text"]["predictions"]["value"],
                             atol=1e-6)


@pytest.mark.slow   # the exports loaded in a process of their own (`loaded`)
def test_mlm_exports_the_encoder(mlm_dir, loaded):
  outputs = loaded["mlm"]["serving_default"]
  assert sorted(outputs) == ["pooled_output", "sequence_output"]
  assert outputs["sequence_output"]["shape"] == [len(TEXTS), 24, 32]
  assert outputs == loaded["mlm"]["encode"]
  features = mlm_dir.text_encoder.encode(strings(TEXTS))
  expected = mlm_dir.model.encoder(features, training=False)
  # Length buckets (auto: 16 and 24 tokens): the texts' real tokens equal padding to 24; the call runs at 16,
  # so the positions past 16 are zeros (test_length_buckets.py holds the rest).
  served = np.array(outputs["sequence_output"]["value"], np.float32)
  real = features["input_mask"].numpy().astype(bool)
  assert real.sum(-1).max() <= 16
  np.testing.assert_allclose(served[real], expected["sequence_output"].numpy()[real], atol=1e-5)
  assert not np.any(served[:, 16:])


def test_the_cli_writes_version_1_with_its_model_info(classify_export):
  base = os.path.dirname(classify_export)   # `classify_export` is the path the CLI printed
  assert os.path.basename(classify_export) == "1" and os.listdir(base) == ["1"]
  with open(os.path.join(classify_export, serving.MODEL_INFO_FILE)) as file:
    info = json.load(file)
  assert info["task"] == "classify" and info["model"] == "funnel_b4_4_4"
  assert info["label_names"] == ["negative", "neutral", "positive"]
  assert info["seq_length"] == 16 and info["sentence_pair"] is False
  assert info["checkpoint"].endswith("ckpt-1")
  assert info["signatures"]["serving_default"] == dict(
      inputs=dict(text="string [None]"),
      outputs=dict(label_ids="int32 [None]", labels="string [None]", logits="float32 [None, 3]",
                   probabilities="float32 [None, 3]"))
  assert info["signatures"]["from_token_ids"]["inputs"]["input_mask"] == "int32 [None, 16]"


def test_cli_help_and_errors(classify_dir, tmp_path, capsys):
  with pytest.raises(SystemExit) as exit_info:
    saved_model.main(["--help"])
  assert exit_info.value.code == 0 and "--model-dir" in capsys.readouterr().out

  assert saved_model.main(["--model-dir", str(tmp_path / "missing"), "--out", str(tmp_path / "out")]) == 2
  error = capsys.readouterr().err
  assert "export.saved_model: error:" in error and "missing does not exist" in error

  trained, untrained = ModelDir(classify_dir.path), ModelDir(str(tmp_path / "untrained"))
  untrained.write_config(trained.read_config())   # a model dir without checkpoints
  untrained.write_vocab(trained.read_vocab())
  assert saved_model.main(["--model-dir", untrained.path]) == 2
  assert "holds no checkpoint" in capsys.readouterr().err
  assert not os.path.exists(untrained.export_dir)


def _tiny_module():
  module = tf.Module()
  module.scale = tf.Variable(2.0)
  module.double = tf.function(lambda x: module.scale * x, input_signature=[tf.TensorSpec([None], tf.float32)])
  module.signatures = lambda: dict(serving_default=module.double)
  return module


def _numeric(base):
  return sorted(name for name in os.listdir(base) if name.isdigit())


def test_a_failed_save_leaves_nothing(tmp_path, monkeypatch):
  def save_partly_then_fail(obj, path, **kwargs):
    os.makedirs(path)
    with open(os.path.join(path, "saved_model.pb"), "wb") as file:
      file.write(b"partial")
    raise OSError("disk full")

  monkeypatch.setattr(tf.saved_model, "save", save_partly_then_fail)
  with pytest.raises(OSError, match="disk full"):
    serving.write_saved_model(_tiny_module(), str(tmp_path / "serving"), {})
  assert os.listdir(tmp_path / "serving") == []


# The export command, hanging halfway through writing the SavedModel (a saved_model.pb, no variables).
HANGING_EXPORT = """
import os
import sys
import time

import tensorflow as tf


def write_half_and_hang(obj, path, **kwargs):
  os.makedirs(os.path.join(path, "variables"))
  with open(os.path.join(path, "saved_model.pb"), "wb") as file:
    file.write(b"half")
  print("writing", flush=True)
  time.sleep(600)


tf.saved_model.save = write_half_and_hang
from export import saved_model  # noqa: E402

sys.exit(saved_model.main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_a_killed_export_leaves_no_new_version(classify_dir, classify_export, tmp_path, capsys):
  base = tmp_path / "serving"
  shutil.copytree(classify_export, base / "1")
  process = start_python(["-c", HANGING_EXPORT, "--model-dir", classify_dir.path, "--out", str(base)],
                         cwd=tmp_path)
  try:
    line = process.stdout.readline()
  finally:
    process.kill()   # SIGKILL
    _, stderr = process.communicate()
  assert line == b"writing\n", stderr.decode()[-3000:]
  assert process.returncode == -signal.SIGKILL

  temporary = f".tmp-2-{process.pid}"
  assert sorted(os.listdir(base)) == [temporary, "1"]
  assert (base / temporary / "saved_model.pb").exists()   # under a name TF Serving skips
  assert predict.resolve(str(base)) == str(base / "1")

  # The next export takes version 2, and the command prints its path.
  assert saved_model.main(["--model-dir", classify_dir.path, "--out", str(base)]) == 0
  assert capsys.readouterr().out.strip() == str(base / "2")
  assert _numeric(base) == ["1", "2"] and predict.resolve(str(base)) == str(base / "2")
  outputs = tf.saved_model.load(str(base / "2")).signatures["serving_default"](text=strings(TEXTS))
  np.testing.assert_allclose(outputs["logits"], keras_logits(classify_dir, TEXTS), atol=1e-5)


def test_the_checkpoint_must_fit_the_config(classify_dir, mlm_dir, tmp_path):
  with pytest.raises(ValueError, match="does not hold the model"):
    saved_model.export(classify_dir.path, str(tmp_path / "out"), checkpoint=mlm_dir.path)
  assert not (tmp_path / "out").exists()

"""export.predict: the command (arguments, stdin) and the Python API, against the Keras models."""

import io
import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from export import predict
from tests.export.conftest import LABELS
from tests.export.conftest import PAIRS
from tests.export.conftest import ROOT
from tests.export.conftest import TEXTS
from tests.export.conftest import keras_logits
from tests.export.conftest import start_python
from tests.export.conftest import strings
from zoo.model_dir import SAVED_MODEL_FILE
from zoo.model_dir import latest_export


def _check_classified(results, model_dir, texts):
  expected = tf.nn.softmax(keras_logits(model_dir, texts)).numpy()
  assert len(results) == len(texts)
  for result, probabilities in zip(results, expected, strict=True):
    assert list(result["probabilities"]) == LABELS
    np.testing.assert_allclose(list(result["probabilities"].values()), probabilities, atol=1e-5)
    assert result["label"] == LABELS[probabilities.argmax()]


def _lines(output):
  return [json.loads(line) for line in output.splitlines()]


@pytest.mark.slow
def test_cli_with_text_arguments(classify_dir, classify_export):
  texts = ["text one", "the plot was good"]
  base = os.path.dirname(classify_export)   # the model base path: its highest version is used
  process = start_python(["-m", "export.predict", "--saved-model", base, *texts], cwd=ROOT)
  stdout, stderr = process.communicate()
  assert process.returncode == 0, stderr.decode()[-3000:]
  results = _lines(stdout.decode())
  assert [result["text"] for result in results] == texts
  _check_classified(results, classify_dir, texts)


def _stdin(monkeypatch, data):
  monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


@pytest.mark.slow
def test_stdin_lines_in_batches(classify_dir, classify_export, monkeypatch, capsys):
  _stdin(monkeypatch, "\n".join(TEXTS[:3]).encode() + b"\n\n")
  assert predict.main(["--saved-model", classify_export, "--batch-size", "2"]) == 0
  results = _lines(capsys.readouterr().out)
  assert [result["text"] for result in results] == [*TEXTS[:3], ""]
  _check_classified(results, classify_dir, [*TEXTS[:3], ""])


@pytest.mark.slow
def test_stdin_sentence_pairs(regress_pair_dir, regress_pair_export, monkeypatch, capsys):
  texts, texts_b = PAIRS[0][:2] + ["<bad utf-8>"], PAIRS[1]
  lines = [b"\t".join(strings([a, b]).numpy()) for a, b in zip(texts, texts_b, strict=True)]
  _stdin(monkeypatch, b"\r\n".join(lines) + b"\r\n")
  assert predict.main(["--saved-model", regress_pair_export]) == 0
  results = _lines(capsys.readouterr().out)
  assert [result["text_b"] for result in results] == texts_b
  assert results[2]["text"] == "\ufffd\ufffd bad"
  np.testing.assert_allclose([result["prediction"] for result in results],
                             keras_logits(regress_pair_dir, texts, texts_b)[:, 0], atol=1e-5)


@pytest.mark.parametrize("export, args, stdin, message", [
    ("regress_pair_export", ["a text"], b"", "takes sentence pairs: pass --text-b"),
    ("regress_pair_export", [], b"no hypothesis\n", "stdin, line 1: this model takes sentence pairs"),
    ("regress_pair_export", ["one", "two", "--text-b", "three"], b"", "2 TEXT arguments but 1 --text-b"),
    ("classify_export", ["one", "--text-b", "two"], b"", "takes single texts"),
    (None, ["one"], b"", "does not exist"),
])
def test_errors(export, args, stdin, message, request, monkeypatch, capsys, tmp_path):
  path = request.getfixturevalue(export) if export else str(tmp_path / "missing")
  _stdin(monkeypatch, stdin)
  assert predict.main(["--saved-model", path, *args]) == 2
  captured = capsys.readouterr()
  assert captured.out == "" and message in captured.err and captured.err.startswith("export.predict: error:")


def _choice_predictor(num_choices):
  """A `Predictor` as `load` makes it for a multiple-choice export that records `num_choices` (None: an
  export without model_info.json), its `serving_default` a stand-in that chooses each example's longest
  option (tests/tpu/tasks/test_multiple_choice.py holds a real export's outputs to its evaluation's)."""
  def serve(context, question, options):
    lengths = tf.strings.length(options).numpy()
    return dict(choices=tf.constant(lengths.argmax(-1), tf.int32),
                probabilities=tf.constant(lengths / lengths.sum(-1, keepdims=True), tf.float32))

  predictor = object.__new__(predict.Predictor)
  predictor.path, predictor.sentence_pair, predictor.label_names = "BASE/1", False, []
  predictor.inputs, predictor.list_inputs = ["context", "question", "options"], {"options": num_choices}
  predictor.fields = [("choice", "choices", "integer"), ("probabilities", "probabilities", "list")]
  predictor._serve = serve
  return predictor


CHOICE = dict(context="The box is red.", question="The box is _ .", options=["red", "blue", "green"])
TEXT = "must be a text (a JSON string), got"
LIST = "must be a list of texts (JSON strings), got"


@pytest.mark.parametrize("num_choices, lines, message", [
    (3, [CHOICE, dict(CHOICE, options=["red", 5, "green"])], f"stdin, line 2: options[1] {TEXT} 5"),
    (3, [CHOICE, dict(CHOICE, options=None)], f"stdin, line 2: options {LIST} null"),
    (3, [dict(CHOICE, options="red")], f'stdin, line 1: options {LIST} "red"'),
    (3, [CHOICE, CHOICE, dict(CHOICE, context=7)], f"stdin, line 3: context {TEXT} 7"),
    (3, [dict(CHOICE, question=None)], f"stdin, line 1: question {TEXT} null"),
    (3, [{"context": "c", "options": ["a", "b", "c"]}], "stdin, line 1: no question; this model takes"),
    (3, [CHOICE, dict(CHOICE, options=["red", "blue"])], "stdin, line 2: options has 2 texts; the model "
                                                         "takes 3 per example"),
    (3, [dict(CHOICE, options=[])], "stdin, line 1: options has 0 texts; the model takes 3 per example"),
    (None, [dict(CHOICE, options=[])], "stdin, line 1: options has 0 texts; the model takes at least one"),
    (None, [CHOICE, dict(CHOICE, options=["a", "b"])], "stdin, line 2: options has 2 texts, but the call's "
                                                       "first example has 3"),
])
def test_malformed_choice_lines_are_named_by_line_and_field(num_choices, lines, message, monkeypatch, capsys):
  monkeypatch.setattr(predict, "load", lambda path: _choice_predictor(num_choices))
  _stdin(monkeypatch, "\n".join(json.dumps(line) for line in lines).encode() + b"\n")
  assert predict.main(["--saved-model", "BASE"]) == 2
  captured = capsys.readouterr()
  assert captured.err.startswith(f"export.predict: error: {message}"), captured.err
  assert "\n" not in captured.err.rstrip("\n")   # one line


def test_choice_lines_in_batches(monkeypatch, capsys):
  monkeypatch.setattr(predict, "load", lambda path: _choice_predictor(3))
  lines = [CHOICE, dict(CHOICE, options=["a", "bb", "c"]), dict(CHOICE, options=["aaaa", "b", ""])]
  _stdin(monkeypatch, "\n\n".join(json.dumps(line) for line in lines).encode())
  assert predict.main(["--saved-model", "BASE", "--batch-size", "2"]) == 0
  results = _lines(capsys.readouterr().out)
  assert [result["options"] for result in results] == [line["options"] for line in lines]
  assert [result["choice"] for result in results] == [2, 1, 0]   # the longest option of each
  with pytest.raises(ValueError, match=r"^example 2: options\[0\] must be a text"):
    _choice_predictor(3).predict_records([CHOICE, dict(CHOICE, options=[None, "b", "c"])])


def test_the_model_info_file_is_the_exporters():
  from tpu import serving
  assert predict.MODEL_INFO_FILE == serving.MODEL_INFO_FILE


@pytest.mark.slow
def test_python_api_on_a_serving_box(classify_dir, regress_pair_dir, mlm_dir, loaded):
  """`serving_box.py` ran a copy of predict.py with only tensorflow and tensorflow_text importable."""
  assert loaded["modules_after_predict"] == []
  _check_classified(loaded["predict"]["classify"], classify_dir, TEXTS)
  pairs = loaded["predict"]["regress_pair"]
  assert [(result["text"], result["text_b"]) for result in pairs] == list(zip(*PAIRS, strict=True))
  np.testing.assert_allclose([result["prediction"] for result in pairs],
                             keras_logits(regress_pair_dir, *PAIRS)[:, 0], atol=1e-5)
  pooled = mlm_dir.model.encoder(mlm_dir.text_encoder.encode(strings(TEXTS)), training=False)["pooled_output"]
  vectors = [result["pooled_output"] for result in loaded["predict"]["mlm"]]
  np.testing.assert_allclose(vectors, pooled, atol=1e-5)


@pytest.mark.parametrize("versions", [
    {},                                                  # nothing to serve
    {"1": True},
    {"2": True, "10": True, "11": False, "notes": True},  # 11 holds no SavedModel yet
    {".tmp-3-4242": True, "3": False},                    # an export being written, an empty version
])
def test_resolve_follows_the_model_dirs_version_rule(versions, tmp_path):
  """predict.py's own copy of the rule (it imports nothing of the project) agrees with zoo.model_dir's."""
  base = tmp_path / "export"
  base.mkdir()
  for name, complete in versions.items():
    (base / name).mkdir()
    if complete:
      (base / name / predict.SAVED_MODEL_FILE).write_bytes(b"graph")
  expected = latest_export(str(base))
  if expected is None:
    with pytest.raises(FileNotFoundError, match="numeric version directories"):
      predict.resolve(str(base))
  else:
    assert predict.resolve(str(base)) == expected
  assert predict.SAVED_MODEL_FILE == SAVED_MODEL_FILE

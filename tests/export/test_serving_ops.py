"""export.serving_ops: every op of the exports is one that stock TF Serving 2.12+ links.

The op types are read from `saved_model.pb` with protobuf; the checks are shown to
catch what they look for on SavedModels made to fail them (tensorflow-text's trimmer
op, an attribute tensorflow-text 2.12 does not declare).
"""

import json

import pytest
import tensorflow as tf
import tensorflow_text as text

from export import saved_model
from export import serving_ops
from tests.export.conftest import ROOT
from tests.export.conftest import TINY_TRANSFORMER
from tests.export.conftest import make_model_dir
from tests.export.conftest import start_python
from zoo.text import TextEncoder

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "dog", "##s", "run", "."]
TOKENIZER_OPS = {"NormalizeUTF8", "RegexSplitWithOffsets", "FastWordpieceTokenizeWithOffsets"}


def save(tmp_path, function, name="model"):
  """Saves `function` (string [B] -> anything) as the `serving_default` of a SavedModel; returns its path."""
  module = tf.Module()
  module.serve = tf.function(function, input_signature=[tf.TensorSpec([None], tf.string, name="text")])
  path = str(tmp_path / name)
  tf.saved_model.save(module, path, signatures={"serving_default": module.serve})
  return path


def test_the_allow_list():
  core = serving_ops.core_ops()
  assert {"StringLower", "StaticRegexReplace", "UnicodeTranscode", "GatherV2", "RaggedTensorToTensor"} <= core
  assert not serving_ops.TFTEXT_OPS & core, "tensorflow-text ops are not core ops"
  assert TOKENIZER_OPS <= serving_ops.TFTEXT_OPS
  assert {"CaseFoldUTF8", "NormalizeUTF8WithOffsetsMap", "FastBertNormalize", "WordpieceTokenizeWithOffsets",
          "WhitespaceTokenizeWithOffsets", "UnicodeScriptTokenizeWithOffsets"} <= serving_ops.TFTEXT_OPS
  assert not any("RoundRobin" in op or "Trim" in op for op in serving_ops.TFTEXT_OPS)
  assert set(serving_ops.TFTEXT_ATTRS) <= serving_ops.TFTEXT_OPS


@pytest.mark.parametrize("lower_case", [True, False])
def test_text_encoder_exports_use_served_ops_only(tmp_path, lower_case):
  encoder = TextEncoder(VOCAB, seq_length=8, lower_case=lower_case)
  single = save(tmp_path, encoder.encode, "single")
  module = tf.Module()
  texts = [tf.TensorSpec([None], tf.string, name="text_a"), tf.TensorSpec([None], tf.string, name="text_b")]
  module.pairs = tf.function(encoder.encode, input_signature=texts)
  tf.saved_model.save(module, str(tmp_path / "pairs"), signatures={"serving_default": module.pairs})
  for path in (single, str(tmp_path / "pairs")):
    ops = serving_ops.op_types(path)
    assert serving_ops.problems(path) == []
    tokenizer_ops = TOKENIZER_OPS if lower_case else TOKENIZER_OPS - {"NormalizeUTF8"}
    assert set(ops) & serving_ops.TFTEXT_OPS == tokenizer_ops


def trimmed(texts):
  words = tf.strings.split(texts)
  return text.RoundRobinTrimmer(3).trim([words, words])[0].to_tensor()


def test_the_trimmer_op_is_reported(tmp_path):
  path = save(tmp_path, trimmed)
  assert any(op.startswith("TFText>RoundRobin") for op in serving_ops.op_types(path))
  found = serving_ops.problems(path)
  assert found and all("TFText>RoundRobin" in problem for problem in found), found
  assert "neither a core TensorFlow op nor in tensorflow-text 2.12's ops_lib" in found[0]


def test_an_attribute_unknown_to_tensorflow_text_2_12_is_reported(tmp_path):
  normalizer = text.FastBertNormalizer(lower_case_nfd_strip_accents=True)
  plain = save(tmp_path, normalizer.normalize, "plain")   # `get_offsets` left at its default
  assert "FastBertNormalize" in serving_ops.op_types(plain) and serving_ops.problems(plain) == []
  offsets = save(tmp_path, lambda texts: normalizer.normalize_with_offsets(texts)[1].to_tensor(), "offsets")
  found = serving_ops.problems(offsets)
  assert len(found) == 1 and "FastBertNormalize" in found[0] and "['get_offsets']" in found[0], found


def test_the_command_line(tmp_path, capsys):
  path = save(tmp_path, TextEncoder(VOCAB, seq_length=8).encode)
  assert serving_ops.main([path]) == 0
  lines = dict(line.split("\t")[0::2] for line in capsys.readouterr().out.splitlines())
  assert lines["FastWordpieceTokenizeWithOffsets"] == "tensorflow-text" and lines["StringLower"] == "core"


TASK_EXPORTS = ["classify_export", "regress_pair_export", "mlm_export"]


@pytest.mark.slow
def test_the_command_line_checks_every_task_export_without_importing_tensorflow_text(request, tmp_path):
  """`python -m export.serving_ops` (run as `-m` runs it) over the training runs' exports and a
  tokenizer alone, in one process: exit status 0, and tensorflow_text never imported."""
  paths = [request.getfixturevalue(name) for name in TASK_EXPORTS]
  paths.append(save(tmp_path, TextEncoder(VOCAB, seq_length=8).encode))
  code = ("import json, runpy, sys\n"
          "sys.argv = ['serving_ops', *sys.argv[1:]]\n"
          "try:\n"
          "  runpy.run_module('export.serving_ops', run_name='__main__', alter_sys=True)\n"
          "except SystemExit as exit:\n"
          "  code = exit.code\n"
          "text = [name for name in sys.modules if name.startswith('tensorflow_text')]\n"
          "print(json.dumps({'code': code, 'text': text}))")
  process = start_python(["-c", code, *paths], cwd=ROOT)
  stdout, stderr = process.communicate(timeout=300)
  assert process.returncode == 0, stderr.decode()[-3000:]
  lines = stdout.decode().strip().splitlines()
  result = json.loads(lines[-1])
  assert result == {"code": 0, "text": []}, stderr.decode()[-3000:]
  listed = [line[2:] for line in lines if line.startswith("# ")]
  assert listed == paths
  assert TOKENIZER_OPS <= {line.split("\t")[0] for line in lines if line.endswith("\ttensorflow-text")}


def test_the_command_line_names_the_export_that_fails(tmp_path, capsys):
  good = save(tmp_path, TextEncoder(VOCAB, seq_length=8).encode, "good")
  bad = save(tmp_path, trimmed, "trimmed")
  assert serving_ops.main([good, bad]) == 1
  captured = capsys.readouterr()
  assert f"# {good}\n" in captured.out and f"# {bad}\n" in captured.out
  assert f"export.serving_ops: {bad}: op 'TFText>RoundRobin" in captured.err
  assert good + ":" not in captured.err


@pytest.mark.slow
@pytest.mark.parametrize("name", TASK_EXPORTS)
def test_every_task_export_uses_served_ops_only(request, name):
  """The exports of the training runs: single texts (classify, mlm) and sentence pairs (regress_pair)."""
  path = request.getfixturevalue(name)
  assert serving_ops.problems(path) == []
  ops = serving_ops.op_types(path)
  assert TOKENIZER_OPS <= set(ops)
  assert not [op for op in ops if op.startswith("TFText>")]


@pytest.mark.slow
@pytest.mark.parametrize("name, settings", [
    ("classify_pair", dict(model="bert_small", overrides=TINY_TRANSFORMER, label_names=["no", "yes"],
                           sentence_pair=True)),
    ("regress", dict(task="regress")),
    ("electra", dict(model="bert_small", overrides=TINY_TRANSFORMER, task="electra")),
])
def test_the_other_tasks_and_pairings_use_served_ops_only(tmp_path, name, settings):
  """The task and pairing combinations the shared exports leave out."""
  model_dir = make_model_dir(tmp_path / name, **settings)
  path = saved_model.export(model_dir.path, str(tmp_path / "export"))
  assert serving_ops.problems(path) == []
  assert TOKENIZER_OPS <= set(serving_ops.op_types(path))

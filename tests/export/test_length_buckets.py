"""Exports with length buckets: a call of short texts runs at a short length, with the outputs of seq_length.

The reference is the run's Keras model on the same texts padded to `seq_length` (what every
export computed before buckets, held to it by test_saved_model.py). Texts are real prose:
sentences of the standard library's docstrings, short ones and ones longer than the trained
length.
"""

import json
import os
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from export import saved_model
from export import serving_ops
from tests.export.conftest import TINY_FUNNEL
from tests.export.conftest import TINY_TRANSFORMER
from tests.export.conftest import make_model_dir
from tests.export.conftest import strings
from tpu import serving

SEQ_LENGTH = 32
WORDS = " ".join(doc for doc in (json.__doc__, os.__doc__) if doc).split()
SHORT = [" ".join(WORDS[start:start + size])
         for start, size in ((0, 3), (40, 7), (90, 1), (20, 5))]   # 6 to 13 tokens
LONG = [" ".join(WORDS[start:start + 60]) for start in (10, 200)]
RUNS = dict(
    bert=dict(model="bert_small", overrides=TINY_TRANSFORMER, label_names=["no", "maybe", "yes"]),
    realformer=dict(model="realformer_small", overrides=TINY_TRANSFORMER, label_names=["no", "yes"]),
    funnel_zoo=dict(overrides=dict(TINY_FUNNEL, pooling_semantics="zoo", num_decoder_layers=1),
                    label_names=["no", "yes"]),
    funnel_hf=dict(overrides=TINY_FUNNEL, label_names=["no", "yes"]),
)


class _Runs(dict):
  """The model dirs of `RUNS`, each written when first asked for."""

  def __init__(self, tmp_path_factory):
    super().__init__()
    self.tmp_path_factory = tmp_path_factory

  def __missing__(self, name):
    self[name] = make_model_dir(self.tmp_path_factory.mktemp(name) / "run", seq_length=SEQ_LENGTH, seed=4,
                                **RUNS[name])
    return self[name]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  return _Runs(tmp_path_factory)


def _model_info(path):
  with open(os.path.join(path, serving.MODEL_INFO_FILE)) as file:
    return json.load(file)


def _branches(path):
  """The ladder lengths of the length branches (`If` ops named `length_<L>`: a sub-batch per ladder length,
  run when not empty) in each function of a SavedModel that has them."""
  with open(os.path.join(path, "saved_model.pb"), "rb") as file:
    graph = saved_model_pb2.SavedModel.FromString(file.read()).meta_graphs[0].graph_def
  found = [sorted(int(match.group(1)) for node in function.node_def if node.op in ("If", "StatelessIf")
                  for match in [re.search(r"/length_(\d+)$", node.name)] if match)
           for function in graph.library.function]
  return sorted({tuple(lengths) for lengths in found if lengths})


def _compare(run, loaded, texts):
  """The loaded export's outputs for `texts` against the Keras model's at seq_length: max differences at real
  positions."""
  features = run.text_encoder.encode(strings(texts))
  real = features["input_mask"].numpy().sum(-1)
  encoded = loaded.signatures["encode"](text=strings(texts))
  expected = run.model.encoder(features, training=False)
  sequence = max(float(np.abs(encoded["sequence_output"][row, :count]
                              - expected["sequence_output"][row, :count])
                       .max()) for row, count in enumerate(real))
  pooled = float(np.abs(encoded["pooled_output"] - expected["pooled_output"]).max())
  outputs = loaded.signatures["serving_default"](text=strings(texts))
  logits = run.model(features, training=False).numpy()
  if logits.ndim == 3:   # a tagger: per token
    head = max(float(np.abs(outputs["logits"][row, :count] - logits[row, :count]).max())
               for row, count in enumerate(real))
  else:
    head = float(np.abs(outputs["logits"] - logits).max())
  return dict(sequence=sequence, pooled=pooled, head=head, encoded=encoded["sequence_output"].numpy(),
              real=real)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bert", "realformer", "funnel_zoo"])
def test_short_and_long_calls_equal_padding_to_seq_length(runs, name, tmp_path):
  run = runs[name]
  ladder = "12,20" if name == "realformer" else None   # named, or "auto"
  path = saved_model.export(run.path, str(tmp_path / "export"), length_buckets=ladder)
  plan = _model_info(path)["length_buckets"]
  assert plan["padding_dependent"] is False and plan["reason"] is None
  if name == "realformer":
    assert plan["lengths"] == plan["capacities"] == [12, 20, 32]
  else:   # "auto": two lengths per doubling from 8
    assert plan["lengths"] == [8, 12, 16, 24, 32]
  if name == "funnel_zoo":   # the decoder upsamples [cls] and 3 vectors of 4 at 16 tokens: 13 hold
    assert plan["capacities"] == [5, 9, 13, 21, 32]
  elif name == "bert":
    assert plan["capacities"] == plan["lengths"]
  assert _branches(path) == [tuple(plan["lengths"])]   # a branch per ladder length where the encoder runs
  assert serving_ops.problems(path) == []
  loaded = tf.saved_model.load(path)
  for texts in (SHORT, LONG, SHORT[:1], SHORT + LONG[:1]):
    result = _compare(run, loaded, texts)
    assert max(result["sequence"], result["pooled"], result["head"]) < 1e-5, (texts, result)
  short = _compare(run, loaded, SHORT)
  for row, count in enumerate(short["real"]):   # each text runs at the shortest length that holds it
    length = next(length for length, capacity in zip(plan["lengths"], plan["capacities"], strict=True)
                  if capacity >= count)
    assert not np.any(short["encoded"][row, length:]), (row, count, length)
    assert np.any(short["encoded"][row, :count])
  assert np.any(_compare(run, loaded, SHORT + LONG[:1])["encoded"][:, 16:])


@pytest.mark.slow
def test_a_funnel_whose_pooling_reads_padding_keeps_seq_length_unless_asked(runs, tmp_path):
  run = runs["funnel_hf"]
  path = saved_model.export(run.path, str(tmp_path / "default"))
  plan = _model_info(path)["length_buckets"]
  assert plan["lengths"] == [] and plan["padding_dependent"] is True
  assert "pooling_semantics='huggingface' pools padding" in plan["reason"]
  assert _branches(path) == []
  assert _compare(run, tf.saved_model.load(path), SHORT)["head"] < 1e-5

  with pytest.raises(ValueError, match="--padding-dependent-buckets"):
    saved_model.export(run.path, str(tmp_path / "named"), length_buckets="16")
  path = saved_model.export(run.path, str(tmp_path / "asked"), length_buckets="16",
                            padding_dependent_buckets=True)
  plan = _model_info(path)["length_buckets"]
  assert plan["lengths"] == [16, 32] and plan["capacities"] == [13, 32]   # [cls] and 3 whole windows of 4
  loaded = tf.saved_model.load(path)
  for texts in (SHORT, SHORT + LONG[:1]):
    result = _compare(run, loaded, texts)
    assert max(result["pooled"], result["head"]) < 1e-5, result

  # A run trained with buckets exports with its own ladder, --padding-dependent-buckets included.
  trained = tmp_path / "trained"
  shutil.copytree(run.path, trained)
  settings = json.loads((trained / "config.json").read_text())
  (trained / "config.json").write_text(json.dumps(dict(settings, length_buckets="16",
                                                       padding_dependent_buckets=True)))
  plan = _model_info(saved_model.export(str(trained), str(tmp_path / "own")))["length_buckets"]
  assert (plan["setting"], plan["lengths"], plan["capacities"]) == ("16", [16, 32], [13, 32])


@pytest.mark.slow
def test_the_command_line_takes_a_ladder_and_refuses_a_bad_one(runs, tmp_path, capsys):
  run = runs["bert"]
  assert saved_model.main(["--model-dir", run.path, "--out", str(tmp_path / "off"),
                           "--length-buckets", "off"]) == 0
  path = capsys.readouterr().out.strip()
  assert _model_info(path)["length_buckets"]["lengths"] == [] and _branches(path) == []
  assert saved_model.main(["--model-dir", run.path, "--out", str(tmp_path / "bad"),
                           "--length-buckets", "8,64"]) == 2
  assert "length buckets [64] are outside 1..32" in capsys.readouterr().err

"""Model directories as `python -m tpu.train` writes them (made without training), and their exports.

`make_model_dir` writes `config.json`, `vocab.txt` and one `CheckpointManager`
checkpoint of a tiny model whose weights are perturbed, so that outputs differ from
example to example and class to class.

The three model dirs, their exports and what `serving_box.py` makes of them are made
once per test session, shared by the pytest-xdist workers through lock files (a worker
that did not make a model dir restores its Keras model from the checkpoint).
"""

import contextlib
import fcntl
import functools
import io
import json
import os
import shutil
import subprocess
import sys

import pytest
import tensorflow as tf

from export import saved_model
from tests.model_dirs import write_run
from tpu.config import TrainConfig
from tpu.tasks import build_model
from zoo import model_dir as layout
from zoo.text import TextEncoder

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "plot", "film", "was", "is", "not",
         "good", "bad", "great", "dull", "actor", "##s", "##ly", "very", "and", "but", ".", "!", ","]
TINY_TRANSFORMER = dict(hidden_size=32, num_heads=2, intermediate_size=64, num_layers=1)
TINY_FUNNEL = dict(hidden_size=32, num_heads=2, intermediate_size=64, block_sizes=[1, 1, 1])
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LABELS = ["negative", "neutral", "positive"]
TEXTS = ["the plot was good", "a very dull film !", "Actors were GREAT, but the plot is not.", ""]
LONG_TEXT = "good " * 2000   # 10,000 characters, far more tokens than seq_length
INVALID_UTF8 = b"\xff\xfe bad"
ODD_BATCHES = dict(empty=[""], long=[LONG_TEXT], invalid_utf8=["<bad utf-8>"], one=["the plot was good"],
                   zero=[], mixed=["", LONG_TEXT, "<bad utf-8>", "the plot"])
PAIRS = (["the plot was good", "a dull film", ""], ["the film was great", "", "bad actors"])
MODEL_DIRS = dict(
    classify=dict(label_names=LABELS, seed=3),   # a three-class Funnel classifier
    regress_pair=dict(model="bert_small", overrides=TINY_TRANSFORMER, task="regress", sentence_pair=True,
                      seed=1),
    mlm=dict(model="bert_small", overrides=TINY_TRANSFORMER, task="mlm", seq_length=24, seed=2))


class ModelDir:
  """A written model dir: `path`, its `config`, `text_encoder` and Keras `model`.

  Without `model`, the model is rebuilt and restored from the checkpoint on first use.
  """

  def __init__(self, path, model=None):
    self.path = str(path)
    self.config = TrainConfig.from_model_dir(self.path)
    self.text_encoder = TextEncoder(VOCAB, seq_length=self.config.seq_length,
                                    lower_case=self.config.lower_case)
    if model is not None:
      self.model = model

  @functools.cached_property
  def model(self):
    model = build_model(self.config)
    checkpoint = layout.ModelDir(self.path).latest_checkpoint()
    restored = tf.train.Checkpoint(**{layout.MODEL_ROOT: model}).restore(checkpoint)
    restored.expect_partial().assert_existing_objects_matched()
    return model


def make_model_dir(path, *, model="funnel_b4_4_4", overrides=TINY_FUNNEL, task="classify", seq_length=16,
                   label_names=None, sentence_pair=False, seed=0):
  """Writes a model dir of a tiny, randomly perturbed model; returns its `ModelDir`."""
  num_classes = {"classify": len(label_names or ()), "regress": 1}.get(task)
  config = TrainConfig(model=model, model_overrides=dict(overrides), task=task, data="demo",
                       model_dir=str(path), seq_length=seq_length, vocab_size=len(VOCAB),
                       num_classes=num_classes, label_names=list(label_names) if label_names else None,
                       sentence_pair=sentence_pair).validate()
  return ModelDir(path, write_run(path, config, VOCAB, seed))


def strings(texts):
  """string `[B]` of `texts`, with `"<bad utf-8>"` standing for `INVALID_UTF8`."""
  return tf.constant([INVALID_UTF8 if text == "<bad utf-8>" else text.encode() for text in texts], tf.string,
                     shape=[len(texts)])


def keras_logits(model_dir, texts, texts_b=None):
  """The Keras model's output for `texts` (and `texts_b`), encoded by the training side's TextEncoder."""
  features = model_dir.text_encoder.encode(strings(texts), None if texts_b is None else strings(texts_b))
  return model_dir.model(features, training=False).numpy()


def start_python(args, *, cwd, project=True):
  """Starts `sys.executable ARGS` with pipes; with `project` the repository is on PYTHONPATH.

  Without `project` nothing of the repository is importable, as on a serving box, and TensorFlow
  runs with its own defaults (the suite's TF_USE_LEGACY_KERAS would load tf_keras there).
  """
  dropped = ("PYTHONPATH",) if project else ("PYTHONPATH", "TF_USE_LEGACY_KERAS")
  env = {key: value for key, value in os.environ.items() if key not in dropped}
  env["TF_CPP_MIN_LOG_LEVEL"] = "2"
  if project:
    env["PYTHONPATH"] = ROOT
  return subprocess.Popen([sys.executable, *args], cwd=cwd, env=env, stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _shared(tmp_path_factory, worker_id, name, make):
  """`make(folder)`'s JSON value, made once per test session, in a fresh folder.

  Under pytest-xdist the first worker to ask makes it, holding a lock file that the
  others wait on, and leaves the value for them in the session's temporary directory.
  """
  if worker_id == "master":   # no xdist
    return make(tmp_path_factory.mktemp(name))
  root = tmp_path_factory.getbasetemp().parent   # this session's, shared by the workers
  with open(root / f"{name}.lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    done = root / f"{name}.json"
    if not done.exists():
      done.write_text(json.dumps(make(tmp_path_factory.mktemp(name))))
    return json.loads(done.read_text())


def _model_dir(name, tmp_path_factory, worker_id):
  made = {}

  def make(folder):
    made["model_dir"] = make_model_dir(folder / "run", **MODEL_DIRS[name])
    return made["model_dir"].path

  path = _shared(tmp_path_factory, worker_id, f"{name}_dir", make)
  return made.get("model_dir") or ModelDir(path)


@pytest.fixture(scope="session")
def classify_dir(tmp_path_factory, worker_id):
  return _model_dir("classify", tmp_path_factory, worker_id)


@pytest.fixture(scope="session")
def regress_pair_dir(tmp_path_factory, worker_id):
  return _model_dir("regress_pair", tmp_path_factory, worker_id)


@pytest.fixture(scope="session")
def mlm_dir(tmp_path_factory, worker_id):
  return _model_dir("mlm", tmp_path_factory, worker_id)


@pytest.fixture(scope="session")
def classify_export(classify_dir, tmp_path_factory, worker_id):
  """The version directory that `python -m export.saved_model` printed for `classify_dir` (`BASE/1`)."""
  def make(base):
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
      assert saved_model.main(["--model-dir", classify_dir.path, "--out", str(base)]) == 0
    return stdout.getvalue().strip()

  return _shared(tmp_path_factory, worker_id, "classify_export", make)


@pytest.fixture(scope="session")
def regress_pair_export(regress_pair_dir, tmp_path_factory, worker_id):
  return _shared(tmp_path_factory, worker_id, "regress_pair_export",
                 lambda base: saved_model.export(regress_pair_dir.path, str(base)))


@pytest.fixture(scope="session")
def mlm_export(mlm_dir, tmp_path_factory, worker_id):
  return _shared(tmp_path_factory, worker_id, "mlm_export",
                 lambda base: saved_model.export(mlm_dir.path, str(base)))


@pytest.fixture(scope="session")
def loaded(request, tmp_path_factory, worker_id):
  """What `serving_box.py` returned for the three exports."""
  def make(box):
    for path in ("tests/export/serving_box.py", "export/predict.py"):
      shutil.copy(os.path.join(ROOT, path), box)
    # Started first, the box imports TensorFlow while the exports are made (if they are not yet).
    process = start_python(["serving_box.py"], cwd=box, project=False)
    try:
      exports = {name: request.getfixturevalue(f"{name}_export") for name in MODEL_DIRS}
      text_encoder = request.getfixturevalue("regress_pair_dir").text_encoder
      pair_ids = text_encoder.encode(strings(PAIRS[0]), strings(PAIRS[1]))
      message = dict(exports, texts=TEXTS, odd_batches=ODD_BATCHES, pairs=PAIRS,
                     pair_token_ids={name: value.numpy().tolist() for name, value in pair_ids.items()})
      stdout, stderr = process.communicate(json.dumps(message).encode())
    finally:
      if process.poll() is None:
        process.kill()
        process.communicate()
    assert process.returncode == 0, stderr.decode()[-3000:]
    return json.loads(stdout)

  return _shared(tmp_path_factory, worker_id, "loaded", make)

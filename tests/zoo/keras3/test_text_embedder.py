"""The Keras 3 text embedder (keras-hub's `TextEmbedder` task) against the tf_keras `embed` task.

Two `embed` runs (`tests.model_dirs.write_run`: perturbed weights, no training) with the prose
vocabulary of the suite: a BERT run that pools by max without normalising, and an encoder-only
Funnel (three blocks, no decoder: its output is the last block's pooled sequence) that pools by
mean and normalises. The reference vectors come from their SavedModel exports' `embed`
signatures (raw text in, the zoo's tokenizer in the graph; one length, no length buckets) and
from the tf_keras `zoo.models.TextEmbedder` on the zoo tokenizer's ids, for English prose of
varied lengths (an empty text, a word, sentences, a paragraph longer than the runs' 32 tokens).
In a process per backend (JAX and PyTorch), `keras_hub.models.TextEmbedder.from_preset(run)` must
give the run's vectors (with the run's own pooling and normalisation, read from its config.json),
and an embedder of another `pooling_mode` on its backbone must give that mode's.
"""

import json

import numpy as np
import pytest

from tests.conftest import shared_file
from tests.zoo.keras3.conftest import BACKENDS
from tests.zoo.keras3.conftest import run_in_backend

TOLERANCE = 1e-5
SEQ_LENGTH = 32
TEXTS = [
    "",
    "Dictionaries.",
    "The function returns a new list.",
    "If the file does not exist, an exception is raised and nothing is written to the disk.",
    "Return the number of seconds since the epoch, as a floating point number; fractions of a second may "
    "be present if the system clock provides them.",
    "This module provides access to some variables used or maintained by the interpreter and to functions "
    "that interact strongly with the interpreter. It is always available, and the values it holds are "
    "read when the program starts, so changing them later has no effect on the running process.",
    "Naïve café owners rarely read the documentation, but the résumé says otherwise!",
]
TINY = dict(hidden_size=32, num_heads=2, intermediate_size=64)
# name: (zoo preset, model overrides, the run's pooling, its normalize).
RUNS = {
    "bert": ("bert_small", dict(TINY, num_layers=2), "max", False),
    "funnel": ("funnel_b4_4_4", dict(TINY, block_sizes=[1, 1, 1]), "mean", True),
}
# (run, pooling_mode, normalize) asked of from_preset; None: the run's own (checked against its export).
CASES = [("bert", None, None), ("bert", "mean", True), ("bert", "cls", True), ("funnel", None, None),
         ("funnel", "max", False)]


def _reference(vocab_path, root):
  """Writes the runs into `root` and returns `{texts, runs, cases}`: each case's tf_keras vectors, and
  the exports' for the runs' own settings."""
  import tensorflow as tf
  import tensorflow_text  # noqa: F401  (the exported tokenizer's ops)

  from export.saved_model import export
  from tests.model_dirs import write_run
  from tpu.config import TrainConfig
  from zoo.models import TextEmbedder
  from zoo.text import TextEncoder
  from zoo.text.vocab import load_vocab
  vocab = load_vocab(vocab_path)
  features = {name: value[:, tf.newaxis] for name, value in
              TextEncoder(vocab, seq_length=SEQ_LENGTH).encode(tf.constant(TEXTS)).items()}
  runs, models, exported = {}, {}, {}
  for seed, (name, (preset, overrides, pooling, normalize)) in enumerate(RUNS.items()):
    path = root / name
    config = TrainConfig(model=preset, model_overrides=overrides, task="embed", data="demo",
                         model_dir=str(path), seq_length=SEQ_LENGTH, vocab_size=len(vocab), pooling=pooling,
                         normalize=normalize).validate()
    models[name] = write_run(path, config, vocab, seed=seed)
    runs[name] = str(path)
    served = tf.saved_model.load(export(str(path), str(path / "export"), length_buckets="off"))
    exported[name] = served.signatures["embed"](text=tf.constant(TEXTS))["embeddings"].numpy()
  cases = {}
  for name, pooling_mode, normalize in CASES:
    _, _, pooling, run_normalize = RUNS[name]
    embedder = TextEmbedder(models[name].encoder, pooling=pooling_mode or pooling,
                            normalize=run_normalize if normalize is None else normalize)
    vectors = embedder(features, training=False).numpy()[:, 0]
    cases[f"{name}_{pooling_mode or 'run'}"] = dict(
        tf_keras=vectors.tolist(), export=exported[name].tolist() if pooling_mode is None else None)
  return dict(texts=TEXTS, runs=runs, cases=cases)


@pytest.fixture(scope="module")
def reference(prose_vocab, tmp_path_factory):
  """The runs and their tf_keras vectors (`_reference`), written once per test run."""
  def make(out):
    with open(out, "w") as file:
      json.dump(_reference(prose_vocab(True), tmp_path_factory.mktemp("keras3_embed_runs")), file)
  with open(shared_file(tmp_path_factory, "keras3_embed_reference.json", make)) as file:
    return json.load(file)


@pytest.mark.slow   # the prose vocabulary: about 13 CPU-s to learn when no other test has
def test_the_tf_keras_embedder_gives_the_exports_vectors(reference):
  for name in RUNS:
    case = reference["cases"][f"{name}_run"]
    assert np.abs(np.array(case["tf_keras"]) - case["export"]).max() < TOLERANCE, name


# JAX (the TPU path) and PyTorch: the encoders' numerics under every backend are `test_twins.py`'s, and
# the pooling here is a few `keras.ops` on their outputs.
@pytest.mark.slow
@pytest.mark.parametrize("backend", [backend for backend in BACKENDS if backend != "tensorflow"])
def test_keras_hub_text_embedders_of_embed_runs_give_the_tf_keras_vectors(reference, backend, tmp_path):
  spec = dict(texts=reference["texts"], runs=reference["runs"], cases=CASES, saved="funnel",
              out_dir=str(tmp_path), presets=backend == "jax")
  spec_path, out_path = tmp_path / "spec.json", tmp_path / "out.json"
  spec_path.write_text(json.dumps(spec))
  run_in_backend(backend, "tests.zoo.keras3.embed_run", str(spec_path), str(out_path))
  report = json.loads(out_path.read_text())
  assert report["backend"] == backend
  differences = {}
  for name, pooling_mode, normalize in CASES:
    key = f"{name}_{pooling_mode or 'run'}"
    actual, expected = report["cases"][key], reference["cases"][key]
    _, _, run_pooling, run_normalize = RUNS[name]
    assert actual["cls"] == {"bert": "TransformerTextEmbedder", "funnel": "FunnelTextEmbedder"}[name]
    assert (actual["pooling_mode"], actual["normalize"]) == (
        pooling_mode or run_pooling, run_normalize if normalize is None else normalize)
    assert actual["sequence_length"] == SEQ_LENGTH and actual["dtype"] == "float32"
    vectors = np.array(actual["vectors"])
    assert vectors.shape == (len(TEXTS), 32)
    differences[key] = float(np.abs(vectors - expected["tf_keras"]).max())
    if expected["export"] is not None:
      differences[f"{key}_export"] = float(np.abs(vectors - expected["export"]).max())
  print(f"{backend}: max |Keras 3 - tf_keras| {json.dumps(differences)}")
  assert max(differences.values()) < TOLERANCE, differences
  assert report["config_round_trip"]
  keras_file = report["keras_file"]
  assert (keras_file["cls"], keras_file["pooling_mode"]) == ("FunnelTextEmbedder", "mean")
  assert keras_file["difference"] < 1e-6
  if backend == "jax":
    assert report["preset"] == dict(cls="FunnelTextEmbedder", pooling_mode="mean", normalize=True,
                                    difference=report["preset"]["difference"])
    assert report["preset"]["difference"] < 1e-6
    assert report["embedder_from_model_dir_config_equal"]
  bad_mode, both_names = report["errors"]
  assert "pooling_mode must be one of cls, mean, max, got 'sum'" in bad_mode
  assert "give one" in both_names

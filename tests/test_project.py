"""Project-wide rules: Keras 2 only, public layers registered and documented."""

import doctest
import importlib
import pathlib
import re

import pytest
import tensorflow as tf
import tf_keras as keras

import zoo.layers

ROOT = pathlib.Path(__file__).resolve().parents[1]
# tf.keras is Keras 3 under TF 2.16+ and does not mix with Model Garden's tf_keras layers: forbidden.
FORBIDDEN_KERAS = re.compile(r"(^|[^_\w])tf\.keras\b|"  # forbidden
                             r"from tensorflow import keras|^\s*import keras\b|^\s*from keras\b", re.M)
DOCUMENTED_MODULES = [
    "zoo.layers.attention", "zoo.layers.relative_attention", "zoo.layers.funnel_pooling",
    "zoo.layers.transformer_block", "zoo.layers.embeddings", "zoo.models.encoder_inputs",
    "zoo.models.transformer_encoder", "zoo.models.funnel_encoder", "zoo.models.heads",
    "zoo.models.pretrainers", "zoo.presets", "zoo.analysis", "tpu.config", "tpu.metrics", "tpu.pipeline",
    "export.saved_model", "export.predict"]


def _project_sources():
  for folder in ("zoo", "tpu", "export", "benchmarks", "notebooks"):
    for path in sorted((ROOT / folder).rglob("*")):
      if path.suffix in (".py", ".ipynb"):
        yield path


def test_no_module_uses_tf_keras():
  sources = list(_project_sources())
  assert sources, "no project sources found"
  offenders = [str(p.relative_to(ROOT)) for p in sources if FORBIDDEN_KERAS.search(p.read_text())]
  assert not offenders, f"use 'import tf_keras as keras'; tf.keras / Keras 3 is forbidden: {offenders}"


def test_the_forbidden_pattern_catches_tf_keras():
  assert FORBIDDEN_KERAS.search("x = tf.keras.layers.Dense(3)")   # forbidden
  assert FORBIDDEN_KERAS.search("import keras\n")
  assert not FORBIDDEN_KERAS.search("import tf_keras as keras\nkeras.layers.Dense(3)")


@pytest.mark.parametrize("name", zoo.layers.__all__)
def test_public_layers_are_registered_and_documented(name):
  obj = getattr(zoo.layers, name)
  assert obj.__doc__ and len(obj.__doc__.strip()) > 40, f"{name} needs a docstring"
  if isinstance(obj, type) and issubclass(obj, keras.layers.Layer):
    assert keras.utils.get_registered_object(f"zoo>{name}") is obj
    assert "Example:" in obj.__doc__


@pytest.mark.parametrize("module_name", DOCUMENTED_MODULES)
def test_docstring_examples_run(module_name):
  import zoo.models
  module = importlib.import_module(module_name)
  keras.utils.set_random_seed(0)
  names = {"tf": tf, "np": __import__("numpy"), **{n: getattr(zoo.models, n) for n in zoo.models.__all__}}
  result = doctest.testmod(module, extraglobs=names, optionflags=doctest.NORMALIZE_WHITESPACE)
  assert result.attempted > 0, f"no docstring examples found in {module_name}"
  assert result.failed == 0, f"{result.failed} docstring example(s) failed in {module_name}"

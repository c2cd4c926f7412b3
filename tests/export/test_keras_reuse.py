"""Zoo layers and encoders inside a user's own functional model: `.keras` save and safe-mode load.

Each case is what a user would write: Keras layers before and after a zoo layer (or a
whole zoo encoder), saved with `model.save("….keras")` and loaded back in a fresh Keras
session with `keras.models.load_model(path, safe_mode=True)`; the outputs must not change.
The README's example ("Reusing the layers in your own model") is run as written.
"""

import inspect
import json
import pathlib
import re
import zipfile

import numpy as np
import pytest
import tf_keras as keras

import zoo.layers
import zoo.models

ROOT = pathlib.Path(__file__).resolve().parents[2]
T, WIDTH, VOCAB = 16, 16, 30


def _features():
  return keras.Input(shape=(T, 12), name="features")


def _mask():
  return keras.Input(shape=(T,), dtype="int32", name="mask")


def _word_ids():
  return keras.Input(shape=(T,), dtype="int32", name="word_ids")


def multi_head_attention():
  features, mask = _features(), _mask()
  hidden = keras.layers.Dense(WIDTH)(features)
  first = zoo.layers.MultiHeadAttention(2, 8, residual_attention=True)(hidden, attention_mask=mask)
  second = zoo.layers.MultiHeadAttention(2, 8, residual_attention=True, running_mean=True)(
      first.output, attention_mask=mask, attention_carry=first.carry, layer_index=1)
  return keras.Model([features, mask], [keras.layers.Dense(3)(second.output), second.carry, second.probs])


def relative_multi_head_attention():
  features, mask = _features(), _mask()
  hidden = keras.layers.Dense(WIDTH)(features)
  attention = zoo.layers.RelativeMultiHeadAttention(2, 8, position_encoding="shift")
  attended = attention(hidden, attention_mask=mask).output
  return keras.Model([features, mask], keras.layers.LayerNormalization()(hidden + attended))


def funnel_pooling():
  features, mask = _features(), _mask()
  pooled = zoo.layers.FunnelPooling("max")(keras.layers.Dense(WIDTH)(features), input_mask=mask)   # [B, 8, D]
  return keras.Model([features, mask], keras.layers.Dense(2)(pooled))


def funnel_upsampling():
  features = keras.Input(shape=(T // 4, 12), name="features")
  upsampled = zoo.layers.FunnelUpsampling(stride=4)(keras.layers.Dense(WIDTH)(features), target_length=T)
  return keras.Model(features, keras.layers.Dense(2)(upsampled))


def transformer_block():
  features, mask = _features(), _mask()
  block = zoo.layers.TransformerBlock(2, 8, 32, position_encoding="factorized", residual_attention=True,
                                      norm_first=True)
  result = block(keras.layers.Dense(WIDTH)(features), attention_mask=mask)
  return keras.Model([features, mask], dict(logits=keras.layers.Dense(2)(result.output[:, 0]),
                                            carry=result.carry))


def encoder_embeddings():
  word_ids, type_ids = _word_ids(), keras.Input(shape=(T,), dtype="int32", name="type_ids")
  embeddings = zoo.layers.EncoderEmbeddings(VOCAB, 8, WIDTH, max_sequence_length=T, type_vocab_size=2)
  return keras.Model([word_ids, type_ids], keras.layers.Dense(2)(embeddings(word_ids, type_ids)))


def cls_segment_ids():
  type_ids = keras.Input(shape=(T,), dtype="int32", name="type_ids")
  segments = zoo.layers.ClsSegmentIds()(type_ids)
  return keras.Model(type_ids, keras.layers.Dense(2)(keras.layers.Embedding(3, 4)(segments)))


def _classifier_on(encoder):
  inputs = {name: keras.Input(shape=(T,), dtype="int32", name=name)
            for name in ("input_word_ids", "input_mask", "input_type_ids")}
  pooled = encoder(inputs)["pooled_output"]
  return keras.Model(inputs, keras.layers.Dense(2, name="my_head")(keras.layers.Dropout(0.1)(pooled)))


def transformer_encoder():
  return _classifier_on(zoo.models.TransformerEncoder(
      vocab_size=VOCAB, hidden_size=WIDTH, num_layers=2, num_heads=2, intermediate_size=32,
      residual_attention=True, seq_length=T))


def funnel_encoder():
  return _classifier_on(zoo.models.FunnelEncoder(
      vocab_size=VOCAB, hidden_size=WIDTH, block_sizes=(1, 1), num_heads=2, intermediate_size=32,
      residual_attention=True, seq_length=T))


CASES = {"MultiHeadAttention": multi_head_attention,
         "RelativeMultiHeadAttention": relative_multi_head_attention,
         "FunnelPooling": funnel_pooling, "FunnelUpsampling": funnel_upsampling,
         "TransformerBlock": transformer_block, "EncoderEmbeddings": encoder_embeddings,
         "ClsSegmentIds": cls_segment_ids,
         "TransformerEncoder": transformer_encoder, "FunnelEncoder": funnel_encoder}


def _random_inputs(model, rng):
  values = {}
  for tensor in model.inputs:
    name, shape = tensor.name.split(":")[0], [2, *tensor.shape[1:]]
    if tensor.dtype == "float32":
      values[name] = rng.normal(size=shape).astype(np.float32)
    elif "word_ids" in name:
      values[name] = rng.integers(0, VOCAB, size=shape).astype(np.int32)
    else:   # masks and type ids: the second example has 5 padding positions
      values[name] = (np.arange(shape[1]) < np.array([[shape[1]], [shape[1] - 5]])).astype(np.int32)
  return values


def _assert_reloads_unchanged(model, path):
  inputs = _random_inputs(model, np.random.default_rng(0))
  expected = [np.asarray(value) for value in _flatten(model(inputs, training=False))]
  model.save(path)
  keras.backend.clear_session()
  loaded = keras.models.load_model(path, safe_mode=True)
  for actual, wanted in zip(_flatten(loaded(inputs, training=False)), expected, strict=True):
    np.testing.assert_allclose(np.asarray(actual), wanted, atol=1e-6, rtol=0)
  return loaded


def _flatten(outputs):
  if isinstance(outputs, dict):
    return [outputs[name] for name in sorted(outputs)]
  return list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]


def test_every_public_layer_has_a_case():
  public = {name: getattr(zoo.layers, name) for name in zoo.layers.__all__}
  layers = {name for name, value in public.items()
            if inspect.isclass(value) and issubclass(value, keras.layers.Layer)}
  assert layers <= set(CASES), f"add a reuse case for {sorted(layers - set(CASES))}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_in_a_user_model_saves_and_loads_in_safe_mode(name, tmp_path):
  keras.utils.set_random_seed(0)
  loaded = _assert_reloads_unchanged(CASES[name](), str(tmp_path / "user_model.keras"))
  zoo_class = getattr(zoo.layers, name, None) or getattr(zoo.models, name)
  assert any(isinstance(layer, zoo_class) for layer in loaded.layers)


def _readme_example():
  readme = (ROOT / "README.md").read_text()
  section = readme.split("## Reusing the layers in your own model", 1)[1].split("\n## ", 1)[0]
  return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_example_runs_as_written(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  keras.utils.set_random_seed(0)
  namespace = {}
  exec(compile(_readme_example(), "README.md", "exec"), namespace)
  model = namespace["model"]
  inputs = _random_inputs(model, np.random.default_rng(0))
  expected = np.asarray(model(inputs, training=False))
  keras.backend.clear_session()
  loaded = keras.models.load_model(tmp_path / "my_model.keras", safe_mode=True)
  np.testing.assert_allclose(np.asarray(loaded(inputs, training=False)), expected, atol=1e-6, rtol=0)


def _rename_config_key(path, registered_name, old, new):
  """Rewrites a `.keras` file as an older version saved it: `old` for `new` in the layers' configs."""
  with zipfile.ZipFile(path) as archive:
    files = {name: archive.read(name) for name in archive.namelist()}
  config = json.loads(files["config.json"])
  renamed = 0
  for layer in config["config"]["layers"]:
    if layer.get("registered_name") == registered_name:
      layer["config"][old] = layer["config"].pop(new)
      renamed += 1
  assert renamed, f"no {registered_name} in {path}"
  files["config.json"] = json.dumps(config).encode()
  with zipfile.ZipFile(path, "w") as archive:
    for name, data in files.items():
      archive.writestr(name, data)


def test_a_file_saved_with_the_old_attention_dropout_name_loads(tmp_path):
  """Attention layers called their attention-probability dropout rate `dropout` before."""
  keras.utils.set_random_seed(0)
  features, mask = _features(), _mask()
  attention = zoo.layers.MultiHeadAttention(2, 8, attention_dropout=0.25, name="attention")
  result = attention(keras.layers.Dense(WIDTH)(features), attention_mask=mask)
  model = keras.Model([features, mask], [result.output, result.carry])
  inputs = _random_inputs(model, np.random.default_rng(0))
  expected = [np.asarray(value) for value in model(inputs, training=False)]
  path = tmp_path / "old.keras"
  model.save(path)
  _rename_config_key(path, "zoo>MultiHeadAttention", "dropout", "attention_dropout")
  keras.backend.clear_session()
  with pytest.warns(FutureWarning, match="attention_dropout"):
    loaded = keras.models.load_model(path, safe_mode=True)
  assert loaded.get_layer("attention").attention_dropout == 0.25
  for actual, wanted in zip(loaded(inputs, training=False), expected, strict=True):
    np.testing.assert_array_equal(np.asarray(actual), wanted)

"""The standard checks every zoo layer must pass, shared by the layer tests.

`run_layer_checks` wraps a layer in a functional model (`build_outputs` says how the
layer is called on the model's named inputs) and checks:
  - `get_config` / `from_config` round-trip (same config, same outputs with the same
    weights);
  - `.keras` save and `keras.models.load_model(safe_mode=True)`: identical outputs;
  - SavedModel save and reload: identical outputs;
  - `tf.function(jit_compile=True)` equals eager;
  - `mixed_bfloat16`: outputs finite, and the outputs named in `float32_outputs`
    stay float32 while the others are bfloat16.
"""

import numpy as np
import tensorflow as tf
import tf_keras as keras


def _model(make_layer, inputs, build_outputs):
  keras_inputs = {
      name: keras.Input(shape=value.shape[1:], batch_size=value.shape[0], dtype=value.dtype, name=name)
      for name, value in inputs.items()
  }
  layer = make_layer()
  outputs = build_outputs(layer, keras_inputs)
  return keras.Model(keras_inputs, outputs), layer


def _as_list(outputs):
  if isinstance(outputs, dict):
    return [outputs[k] for k in sorted(outputs)]
  if isinstance(outputs, (list, tuple)):
    return list(outputs)
  return [outputs]


def assert_outputs_close(actual, expected, atol=1e-6):
  actual, expected = _as_list(actual), _as_list(expected)
  assert len(actual) == len(expected)
  for a, e in zip(actual, expected, strict=True):
    np.testing.assert_allclose(np.asarray(a), np.asarray(e), atol=atol, rtol=0)


def run_layer_checks(make_layer, inputs, build_outputs, tmp_path, float32_outputs=(),
                     check_saved_model=True):
  """Runs the standard checks; `inputs` maps input names to numpy arrays."""
  model, layer = _model(make_layer, inputs, build_outputs)
  expected = model(inputs, training=False)
  for value in _as_list(expected):
    assert np.all(np.isfinite(np.asarray(value, np.float32)))

  # Config round-trip.
  config = layer.get_config()
  clone = type(layer).from_config(config)
  assert clone.get_config() == config
  named_inputs = dict(zip(model.input_names, model.inputs, strict=True))
  clone_model = keras.Model(model.inputs, build_outputs(clone, named_inputs))
  clone_model.set_weights(model.get_weights())
  assert_outputs_close(clone_model(inputs, training=False), expected)

  # .keras file.
  path = str(tmp_path / "model.keras")
  model.save(path)
  loaded = keras.models.load_model(path, safe_mode=True)
  assert_outputs_close(loaded(inputs, training=False), expected)

  # SavedModel.
  if check_saved_model:
    saved_dir = str(tmp_path / "saved_model")
    model.save(saved_dir, save_format="tf")
    reloaded = keras.models.load_model(saved_dir)
    assert_outputs_close(reloaded(inputs, training=False), expected)

  # XLA.
  compiled = tf.function(lambda x: model(x, training=False), jit_compile=True)
  assert_outputs_close(compiled(inputs), expected, atol=1e-5)

  # mixed_bfloat16.
  keras.mixed_precision.set_global_policy("mixed_bfloat16")
  try:
    mixed_model, _ = _model(make_layer, inputs, build_outputs)
    mixed_model.set_weights(model.get_weights())
    mixed = mixed_model(inputs, training=False)
  finally:
    keras.mixed_precision.set_global_policy("float32")
  names = sorted(mixed) if isinstance(mixed, dict) else range(len(_as_list(mixed)))
  for name, value in zip(names, _as_list(mixed), strict=True):
    assert np.all(np.isfinite(np.asarray(tf.cast(value, tf.float32)))), f"output {name} not finite"
    if name in float32_outputs:
      assert value.dtype == tf.float32, f"output {name} must stay float32, got {value.dtype}"
  return model


def run_encoder_checks(encoder_class, config, inputs, tmp_path, bfloat16_tolerance=0.15):
  """The standard checks for a zoo encoder model, on its `sequence_output`.

  Config round-trip, `.keras` (safe mode) and SavedModel reload, XLA, and
  `mixed_bfloat16` (bfloat16, finite and close to the float32 output).
  """
  encoder = encoder_class(**config)
  expected = encoder(inputs)["sequence_output"].numpy()
  assert encoder_class.from_config(encoder.get_config()).get_config() == encoder.get_config()

  encoder.save(tmp_path / "encoder.keras")
  loaded = keras.models.load_model(tmp_path / "encoder.keras", safe_mode=True)
  np.testing.assert_allclose(loaded(inputs)["sequence_output"].numpy(), expected, atol=1e-6)
  encoder.save(tmp_path / "saved_model", save_format="tf")
  restored = keras.models.load_model(tmp_path / "saved_model")
  np.testing.assert_allclose(restored(inputs)["sequence_output"].numpy(), expected, atol=1e-6)

  compiled = tf.function(lambda x: encoder(x, training=False), jit_compile=True)
  np.testing.assert_allclose(compiled(inputs)["sequence_output"].numpy(), expected, atol=1e-5)

  keras.mixed_precision.set_global_policy("mixed_bfloat16")
  try:
    mixed = encoder_class(**config)
    mixed.set_weights(encoder.get_weights())
    outputs = mixed(inputs)
  finally:
    keras.mixed_precision.set_global_policy("float32")
  sequence = tf.cast(outputs["sequence_output"], tf.float32).numpy()
  assert outputs["sequence_output"].dtype == tf.bfloat16
  assert np.all(np.isfinite(sequence)) and np.abs(sequence - expected).max() < bfloat16_tolerance

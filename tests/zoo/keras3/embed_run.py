"""`python -m tests.zoo.keras3.embed_run SPEC.json OUT.json`: `embed` runs as keras-hub text embedders under
this process's Keras backend.

SPEC.json (written by `tests/zoo/keras3/test_text_embedder.py`) names the texts, the run directories
and the cases: a run and a pooling mode and normalisation, or none for the run's own. OUT.json holds,
per case, the class and settings of the embedder and its vectors of the texts: the run's
`TextEmbedder.from_preset(run)` on the raw texts, or an embedder of the other mode on its backbone,
on the preprocessor's features. Then, for the run SPEC.json names `saved`: the config round trip, a
`.keras` file (safe mode) and, when SPEC.json asks, `save_to_preset` read back by
`TextEmbedder.from_preset` and `zoo.keras3.hub.embedder_from_model_dir`; and the errors of bad
pooling arguments.
"""

import json
import os
import sys

import numpy as np


def _vectors(embedder, inputs):
  """The embedder's vectors of `inputs` (texts, or token-id features), in one batch."""
  return np.asarray(embedder.predict(inputs, batch_size=len(inputs) if isinstance(inputs, list) else None,
                                     verbose=0))


def _unnamed(config):
  """A config without its layers' names (a second model built in a process gets `_1` names)."""
  if isinstance(config, dict):
    return {key: _unnamed(value) for key, value in config.items() if key != "name"}
  return config


def main(spec_path, out_path):
  import keras
  import keras_hub

  import zoo.keras3.hub as zoo_hub
  with open(spec_path) as file:
    spec = json.load(file)
  texts, runs = spec["texts"], spec["runs"]
  report = dict(backend=keras.backend.backend(), cases={})
  loaded, own = {}, {}   # the run's own embedder and its vectors, by run
  for name, pooling_mode, normalize in spec["cases"]:
    if name not in loaded:
      loaded[name] = keras_hub.models.TextEmbedder.from_preset(runs[name])
    embedder = loaded[name]
    if pooling_mode is None:   # raw strings through the whole task: its preprocessor, backbone and pooling
      vectors = own[name] = _vectors(embedder, texts)
    else:   # another mode on the same backbone, on the preprocessor's features (tracing it costs a second)
      features = {key: np.asarray(value) for key, value in embedder.preprocessor(texts).items()}
      embedder = type(embedder)(embedder.backbone, pooling_mode=pooling_mode, normalize=normalize)
      vectors = _vectors(embedder, features)
    report["cases"][f"{name}_{pooling_mode or 'run'}"] = dict(
        cls=type(embedder).__name__, pooling_mode=embedder.pooling_mode, normalize=embedder.normalize,
        sequence_length=loaded[name].preprocessor.sequence_length, dtype=str(vectors.dtype),
        vectors=vectors.tolist())

  # The config round trip and a .keras file (safe mode) of one run's embedder.
  embedder, expected = loaded[spec["saved"]], own[spec["saved"]]
  config = embedder.get_config()   # from_config deserializes the backbone in the dict it is given
  report["config_round_trip"] = type(embedder).from_config(embedder.get_config()).get_config() == config
  path = os.path.join(spec["out_dir"], f"embedder_{report['backend']}.keras")
  embedder.save(path)
  restored = keras.saving.load_model(path, safe_mode=True)
  report["keras_file"] = dict(cls=type(restored).__name__, pooling_mode=restored.pooling_mode,
                              difference=float(np.abs(_vectors(restored, texts) - expected).max()))
  if spec.get("presets"):
    preset = os.path.join(spec["out_dir"], "preset")
    embedder.save_to_preset(preset)
    restored = keras_hub.models.TextEmbedder.from_preset(preset)
    report["preset"] = dict(cls=type(restored).__name__, pooling_mode=restored.pooling_mode,
                            normalize=restored.normalize, difference=float(np.abs(_vectors(restored, texts)
                                                                                  - expected).max()))
    direct = zoo_hub.embedder_from_model_dir(runs[spec["saved"]])
    report["embedder_from_model_dir_config_equal"] = _unnamed(direct.get_config()) == _unnamed(config)

  errors = report["errors"] = []
  for arguments in (dict(pooling_mode="sum"), dict(pooling_mode="cls", pooling="max")):
    try:
      type(embedder)(embedder.backbone, **arguments)
    except ValueError as error:
      errors.append(str(error))
  with open(out_path, "w") as file:
    json.dump(report, file)


if __name__ == "__main__":
  main(*sys.argv[1:])

"""`python -m tests.zoo.saved_before.keras3_run FIXTURES OUT.npz`: the saved-before fixtures (see
`fixtures/README.md`) loaded by Keras 3 under this process's backend, through its public loaders.

- `.keras` files of `zoo.keras3` encoders: `keras.saving.load_model` (safe mode).
- keras-hub presets the zoo saved: `keras_hub.models.Backbone.from_preset` and
  `keras_hub.models.Tokenizer.from_preset`.
- Model directories: `zoo.keras3.load_model_dir`, and keras-hub's `Backbone`, `Tokenizer` and (an
  mlm run) `MaskedLM` `from_preset`. (A classify run's `TextClassifier.from_preset` is left out: its
  first prediction rebuilds the Funnel's graph, 3 CPU-seconds.)

OUT.npz holds, per check `NAME` (`FOLDER:loader`), its outputs as `NAME/output`, the class it loaded
as `NAME/class`, and for tokenizers the ids of the fixture's texts as `NAME/text_token_ids`
(-1 after each text's end): what `test_saved_before.py` compares with the release's.
"""

import os
import sys

import numpy as np


def _padded(rows):
  rows = [list(np.asarray(row).reshape(-1)) for row in rows]
  ids = np.full([len(rows), max(1, *map(len, rows))], -1, np.int32)
  for index, row in enumerate(rows):
    ids[index, :len(row)] = row
  return ids


def main(fixtures, out_path):
  import keras
  import keras_hub

  import zoo.keras3
  results = {}

  def record(name, model, outputs, **extra):
    results[f"{name}/class"] = np.array(type(model).__name__)
    if not isinstance(outputs, dict):
      outputs = dict(logits=outputs)
    for key, value in outputs.items():
      if not isinstance(value, list | tuple):
        results[f"{name}/{key}"] = keras.ops.convert_to_numpy(value)
    results.update({f"{name}/{key}": value for key, value in extra.items()})

  def saved(folder):
    with np.load(os.path.join(fixtures, folder, "outputs.npz")) as data:
      return dict(data)

  def features(data):
    return {key: data[key] for key in ("input_word_ids", "input_mask", "input_type_ids")}

  def hub_features(data):
    return dict(token_ids=data["input_word_ids"], segment_ids=data["input_type_ids"],
                padding_mask=data["input_mask"])

  def tokenized(name, path, data):
    tokenizer = keras_hub.models.Tokenizer.from_preset(path)
    results[f"{name}/tokenizer_class"] = np.array(type(tokenizer).__name__)
    results[f"{name}/text_token_ids"] = _padded(tokenizer([str(text) for text in data["texts"]]))

  for folder in ("keras3_funnel_encoder", "keras3_transformer_encoder"):
    data = saved(folder)
    model = keras.saving.load_model(os.path.join(fixtures, folder, "encoder.keras"))
    record(f"{folder}:load_model", model, model.predict_on_batch(features(data)))

  for folder in ("preset_funnel_backbone", "preset_transformer_backbone"):
    data, path = saved(folder), os.path.join(fixtures, folder, "preset")
    backbone = keras_hub.models.Backbone.from_preset(path)
    record(f"{folder}:from_preset", backbone, backbone.predict_on_batch(hub_features(data)))
    tokenized(f"{folder}:from_preset", path, data)

  for folder in ("run_funnel_classify", "run_transformer_mlm"):
    data, path = saved(folder), os.path.join(fixtures, folder, "model_dir")
    loaded = zoo.keras3.load_model_dir(path)
    record(f"{folder}:load_model_dir", loaded.encoder, loaded.encoder.predict_on_batch(features(data)))
    backbone = keras_hub.models.Backbone.from_preset(path)
    record(f"{folder}:Backbone.from_preset", backbone, backbone.predict_on_batch(hub_features(data)))
    tokenized(f"{folder}:Tokenizer.from_preset", path, data)
    if "masked_lm_positions" in data:   # the run's masked LM with its trained head, on the token ids
      masked_lm = keras_hub.models.MaskedLM.from_preset(path)
      masked_lm.preprocessor = None
      inputs = dict(hub_features(data), mask_positions=data["masked_lm_positions"])
      record(f"{folder}:MaskedLM.from_preset", masked_lm, dict(mlm_logits=masked_lm.predict_on_batch(inputs)))
  results["backend"] = np.array(keras.backend.backend())
  np.savez(out_path, **results)


if __name__ == "__main__":
  main(*sys.argv[1:3])

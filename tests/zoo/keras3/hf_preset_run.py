"""`python -m tests.zoo.keras3.hf_preset_run SPEC.json OUT.npz`: Hugging Face directories through
keras-hub's own entry points under this process's Keras backend, after `import zoo.keras3`.

SPEC: `{"inputs": npz of input_word_ids/input_mask/input_type_ids, "texts": [...], "cases":
[{"name", "preset", "seq_length" (or null), "classifier" (also load it as a TextClassifier)}]}`.
OUT gets, per case, the backbone's class and sequence output, the Tokenizer's ids of the texts,
and the TextClassifier's class and logits; and the FunnelBackbone presets.
"""

import json
import sys

import numpy as np


def main(spec_path, out_path):
  import keras
  import keras_hub

  import zoo.keras3  # noqa: F401  (gives keras-hub the Funnel converter)
  with open(spec_path) as file:
    spec = json.load(file)
  inputs = dict(np.load(spec["inputs"]))
  features = dict(token_ids=inputs["input_word_ids"], segment_ids=inputs["input_type_ids"],
                  padding_mask=inputs["input_mask"])
  out = dict(backend=keras.backend.backend())
  from zoo.keras3.hub import FunnelBackbone
  out["presets"] = json.dumps({name: dict(handle=preset["kaggle_handle"], params=preset["metadata"]["params"])
                               for name, preset in FunnelBackbone.presets.items()})
  for case in spec["cases"]:
    name, preset = case["name"], case["preset"]
    extra = {"seq_length": case["seq_length"]} if case["seq_length"] else {}
    backbone = keras_hub.models.Backbone.from_preset(preset, **extra)
    out[f"{name}/backbone"] = type(backbone).__name__
    segment_ids = features["segment_ids"] if case["seq_length"] else np.minimum(features["segment_ids"], 1)
    outputs = backbone({**features, "segment_ids": segment_ids})
    out[f"{name}/sequence_output"] = keras.ops.convert_to_numpy(outputs["sequence_output"])
    tokenizer = keras_hub.models.Tokenizer.from_preset(preset)
    out[f"{name}/tokenizer"] = type(tokenizer).__name__
    out[f"{name}/ids"] = json.dumps([np.asarray(ids).tolist() for ids in tokenizer(spec["texts"])])
    if not case["classifier"]:
      continue
    classifier = keras_hub.models.TextClassifier.from_preset(preset, num_classes=3)
    out[f"{name}/classifier"] = type(classifier).__name__
    out[f"{name}/logits"] = np.asarray(classifier.predict(spec["texts"], verbose=0), np.float32)
  np.savez(out_path, **out)


if __name__ == "__main__":
  main(*sys.argv[1:])

"""`python -m tests.zoo.keras3.tokenizer_layouts_run SPEC.json OUT.json`: Hugging Face tokenizer
directories through `keras_hub.models.Tokenizer.from_preset`, after `import zoo.keras3`.

SPEC: `{"texts": [...], "cases": {name: directory}, "round_trip": [names], "presets": directory}`.
OUT gets per case the tokenizer's class, its ids of the texts and its special tokens by role, or
the error `from_preset` raised (so one run reports every layout); for the `round_trip` cases also
the ids of the tokenizer rebuilt from its serialized config and its saved vocabulary (under
`presets`), as a saved preset reloads it.
"""

import json
import os
import sys

import numpy as np

ROLES = dict(pad="pad_token", unk="oov_token", cls="cls_token", sep="sep_token", mask="mask_token")


def _ids(tokenizer, texts):
  return [np.asarray(ids).tolist() for ids in tokenizer(texts)]


def main(spec_path, out_path):
  import keras
  import keras_hub

  import zoo.keras3  # noqa: F401  (gives keras-hub the Funnel converter and completes BERT's)
  with open(spec_path, encoding="utf-8") as file:
    spec = json.load(file)
  texts = spec["texts"]
  out = {}
  for name, directory in spec["cases"].items():
    try:
      tokenizer = keras_hub.models.Tokenizer.from_preset(directory)
    except Exception as error:   # recorded: the test names the layout
      out[name] = dict(error=f"{type(error).__name__}: {error}")
      continue
    names = {role: getattr(tokenizer, attribute) for role, attribute in ROLES.items()}
    result = out[name] = dict(cls=type(tokenizer).__name__, ids=_ids(tokenizer, texts), names=names)
    if name in spec["round_trip"]:
      assets = os.path.join(spec["presets"], name)
      os.makedirs(assets)
      tokenizer.save_assets(assets)
      config = json.loads(json.dumps(keras.saving.serialize_keras_object(tokenizer)))
      restored = keras.saving.deserialize_keras_object(config)
      restored.load_assets(assets)
      result["round_trip_ids"] = _ids(restored, texts)
  with open(out_path, "w", encoding="utf-8") as file:
    json.dump(out, file)


if __name__ == "__main__":
  main(*sys.argv[1:])

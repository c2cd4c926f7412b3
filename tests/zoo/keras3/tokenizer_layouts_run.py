"""`python -m tests.zoo.keras3.tokenizer_layouts_run SPEC.json OUT.json`: Hugging Face tokenizer
directories and zoo model directories through `keras_hub.models.Tokenizer.from_preset` and
`TextClassifierPreprocessor.from_preset`, after `import zoo.keras3`.

SPEC: `{"texts": [...], "corpus": [...], "cases": {name: directory}, "graph_cases": [names],
"round_trip": [names], "presets": directory, "corpus_cases": [names], "pair_cases": [names],
"pairs": [[a, b], ...], "pair_lengths": [...], "task_cases": [names], "task_length": n,
"missing": [paths]}`.
OUT gets per case the tokenizer's class, its ids of the texts (called eagerly: keras-hub's Python path)
and its special tokens by role, or the error `from_preset` raised (so one run reports every layout);
for the `graph_cases` its ids of the texts in `tf.data` (the graph path; each takes a trace); for the
`corpus_cases` its ids of the corpus; for the `round_trip` cases the ids of the tokenizer rebuilt from
its serialized config and its saved vocabulary (under `presets`), as a saved preset reloads it, and of
the fourth text by one rebuilt from that config without the settings older configs lack; for the
`pair_cases` the token ids of the pairs packed by the text classifier preprocessor at each of
`pair_lengths` eagerly, and at the second in `tf.data`; for the `task_cases` the class, preprocessor
class, `sequence_length` and `truncate` of each keras-hub text task's `from_preset(..., sequence_length=
task_length)` (random weights), and the error of a length beyond the positions. Under "missing", the
error of each `from_preset` on each of `missing`.
"""

import json
import os
import sys

import numpy as np

ROLES = dict(pad="pad_token", unk="oov_token", cls="cls_token", sep="sep_token", mask="mask_token")
# The tokenizer settings older configs lack (they load with the defaults).
NEW_SETTINGS = ("rules", "max_chars_per_word", "clean_text", "added_tokens", "normalized_added_tokens")


def _ids(tokenizer, texts):
  return [np.asarray(ids).tolist() for ids in tokenizer(texts)]


def _graph_ids(tokenizer, texts):
  import tensorflow as tf
  return next(iter(tf.data.Dataset.from_tensor_slices(texts).batch(len(texts)).map(tokenizer))).to_list()


def _round_trip(keras, tokenizer, assets, texts):
  """`(ids of texts, ids of texts[3] by the tokenizer of the config without NEW_SETTINGS)`."""
  os.makedirs(assets)
  tokenizer.save_assets(assets)
  config = json.loads(json.dumps(keras.saving.serialize_keras_object(tokenizer)))
  restored = keras.saving.deserialize_keras_object(config)
  restored.load_assets(assets)
  config["config"] = {key: value for key, value in config["config"].items() if key not in NEW_SETTINGS}
  old = keras.saving.deserialize_keras_object(config)
  old.load_assets(assets)
  return _ids(restored, texts), np.asarray(old(texts[3])).tolist()


def _pairs(keras_hub, directory, pairs, lengths):
  """`{length: {"eager": token ids, "graph": token ids}}` of `pairs` packed by the directory's text classifier
  preprocessor."""
  import tensorflow as tf
  first, second = (list(side) for side in zip(*pairs, strict=True))
  preprocessor = keras_hub.models.TextClassifierPreprocessor.from_preset(directory)
  result = {}
  for index, length in enumerate(lengths):
    preprocessor.sequence_length = length
    # keras-hub reads a pair of segments as `x=(first, second)`; a bare 2-tuple would be `(x, y)`.
    result[str(length)] = dict(eager=np.asarray(preprocessor(x=(first, second))["token_ids"]).tolist())
    if index == 1:
      dataset = tf.data.Dataset.from_tensor_slices((first, second)).batch(len(first))
      graph = next(iter(dataset.map(lambda a, b: preprocessor(x=(a, b)))))["token_ids"]
      result[str(length)]["graph"] = graph.numpy().tolist()
  return result


def _tasks(keras_hub, directory, length):
  """`{task: [class, preprocessor class, sequence_length, truncate]}` of keras-hub's text tasks from the
  directory at `length`, and `{"too_long": error}` at a length beyond the backbone's positions."""
  result = {}
  for task, extra in (("TextClassifier", dict(num_classes=2)), ("MaskedLM", {}), ("TextEmbedder", {})):
    model = getattr(keras_hub.models, task).from_preset(directory, load_weights=False, sequence_length=length,
                                                         **extra)
    preprocessor = model.preprocessor
    result[task] = [type(model).__name__, type(preprocessor).__name__, preprocessor.sequence_length,
                    preprocessor.truncate]
  try:
    keras_hub.models.TextClassifier.from_preset(directory, load_weights=False, num_classes=2,
                                                sequence_length=100_000)
    result["too_long"] = "no error"
  except ValueError as error:
    result["too_long"] = str(error)
  return result


def _missing(keras_hub, paths):
  """`{path: [the error of Backbone, Tokenizer and TextClassifier.from_preset(path)]}`."""
  result = {}
  for path in paths:
    result[path] = []
    for load in (keras_hub.models.Backbone.from_preset, keras_hub.models.Tokenizer.from_preset,
                 lambda preset: keras_hub.models.TextClassifier.from_preset(preset, num_classes=2)):
      try:
        load(path)
        result[path].append("no error")
      except Exception as error:   # recorded: the test checks its type and message
        result[path].append(f"{type(error).__name__}: {error}")
  return result


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
    if name in spec["graph_cases"]:
      result["graph_ids"] = _graph_ids(tokenizer, texts)
    if name in spec["corpus_cases"]:
      result["corpus_ids"] = _ids(tokenizer, spec["corpus"])
    if name in spec["round_trip"]:
      result["round_trip_ids"], result["old_config_ids"] = _round_trip(
          keras, tokenizer, os.path.join(spec["presets"], name), texts)
    if name in spec["pair_cases"]:
      result["pairs"] = _pairs(keras_hub, directory, spec["pairs"], spec["pair_lengths"])
    if name in spec["task_cases"]:
      result["tasks"] = _tasks(keras_hub, directory, spec["task_length"])
  out["missing"] = _missing(keras_hub, spec["missing"])
  with open(out_path, "w", encoding="utf-8") as file:
    json.dump(out, file)


if __name__ == "__main__":
  main(*sys.argv[1:])

"""`python -m tests.zoo.keras3.hf_preset_run SPEC.json OUT.npz`: Hugging Face directories through
keras-hub's own entry points under this process's Keras backend, after `import zoo.keras3`.

SPEC: `{"inputs": npz of input_word_ids/input_mask/input_type_ids, "short": a shorter length,
"texts": [...], "labels": [...], "cases": [{"name", "preset", "seq_length" (or null), "classifier"
(also load it as a TextClassifier)}]}`.
OUT gets, per case, the backbone's class and sequence output (called, and predicted at the inputs'
length and at the first `short` tokens, on the same backbone), the Tokenizer's ids of the texts,
and the TextClassifier's class and logits; for Funnel classifiers, the classifier loaded without
`num_classes` at `sequence_length=short` (its classes, length and logits); for "funnel" (with the
decoder), a new classifier's two-step fit at that length (its loss and any warning of variables
without gradients); and the FunnelBackbone presets.
"""

import json
import sys
import warnings

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
  from zoo.keras3.models.funnel.funnel_backbone import FunnelBackbone
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
    if name.startswith("funnel"):   # one backbone, compiled at two lengths
      short = spec["short"]
      out[f"{name}/predicted"] = backbone.predict({**features, "segment_ids": segment_ids}, verbose=0)[
          "sequence_output"]
      out[f"{name}/predicted_short"] = backbone.predict(
          {key: value[:, :short] for key, value in {**features, "segment_ids": segment_ids}.items()},
          verbose=0)["sequence_output"]
    if name == "funnel":   # with the decoder, which a text classifier does not read
      _fit_short(out, name, keras_hub.models.TextClassifier.from_preset(preset, num_classes=3,
                                                                         sequence_length=spec["short"]), spec)
    tokenizer = keras_hub.models.Tokenizer.from_preset(preset)
    out[f"{name}/tokenizer"] = type(tokenizer).__name__
    out[f"{name}/ids"] = json.dumps([np.asarray(ids).tolist() for ids in tokenizer(spec["texts"])])
    if not case["classifier"]:
      continue
    classifier = keras_hub.models.TextClassifier.from_preset(preset, num_classes=3)
    out[f"{name}/classifier"] = type(classifier).__name__
    out[f"{name}/logits"] = np.asarray(classifier.predict(spec["texts"], verbose=0), np.float32)
    if not name.startswith("funnel"):
      continue
    # The checkpoint's own head and label count, at a short length: its predictions, then a short fit.
    trained = keras_hub.models.TextClassifier.from_preset(preset, sequence_length=spec["short"])
    out[f"{name}/trained_classes"] = trained.num_classes
    out[f"{name}/trained_length"] = trained.preprocessor.sequence_length
    out[f"{name}/trained_logits"] = np.asarray(trained.predict(spec["texts"], verbose=0), np.float32)
  np.savez(out_path, **out)


def _fit_short(out, name, classifier, spec):
  """Two steps of `fit` on the texts: the last loss and any warning of variables without gradients."""
  import keras
  classifier.compile(optimizer=keras.optimizers.Adam(1e-3),
                     loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    history = classifier.fit(x=spec["texts"], y=np.array(spec["labels"]), batch_size=len(spec["texts"]) // 2,
                             epochs=1, verbose=0)
  out[f"{name}/fit_length"] = classifier.preprocessor.sequence_length
  out[f"{name}/fit_loss"] = np.float32(history.history["loss"][-1])
  out[f"{name}/gradient_warnings"] = json.dumps([str(w.message) for w in caught
                                                 if "Gradients do not exist" in str(w.message)])


if __name__ == "__main__":
  main(*sys.argv[1:])

"""`python -m tests.zoo.keras3.hub_run MODEL_DIR PRESET_DIR OUT.json [RUN_DIR LOGITS.json [OTHER_RUN...]]`:
a model directory as a keras-hub text classifier under this process's Keras backend: tokenized as the
zoo's TextEncoder does, trained a few steps with `fit` on raw strings, saved to a preset directory and
loaded back from it, and built in other dtype policies; a classification run's classifier, whose logits
on TEXTS should be LOGITS.json (the run's own model's); and the errors of runs of other tasks asked for
their classifier."""

import json
import sys

import numpy as np

TEXTS = ["the dogs run, the cat was running!", "a good film.", "Thé dög wås rünning, zebras", "", "bad film"]
LABELS = [1, 1, 0, 0, 0]
# Sentence pairs, some longer than the run's 16 tokens (both segments trimmed), one with an empty side.
PAIRS = [("a good film.", "the dogs run, the cat was running!"), ("the cat was running", ""),
         ("", "bad film"),
         ("Thé dög wås rünning, zebras, zebras, zebras and the cat", "a good film. a bad film."),
         ("the dogs run! the dogs run! the dogs run!", "the")]


def main(model_dir, preset_dir, out_path, run_dir=None, run_logits=None, *other_runs):
  import keras
  import keras_hub
  import tensorflow as tf

  import zoo.keras3.hub as zoo_hub
  report = dict(backend=keras.backend.backend())
  keras.utils.set_random_seed(0)
  classifier = zoo_hub.classifier_from_model_dir(model_dir, num_classes=2, dropout=0.0)
  loaded = zoo_hub.load_model_dir(model_dir)

  # The preprocessor's ids against the zoo's own tokenizer with the directory's settings.
  features = classifier.preprocessor(tf.constant(TEXTS))
  encoder = _text_encoder(loaded)
  expected = encoder.encode(tf.constant(TEXTS))
  report["token_ids_equal"] = bool(np.array_equal(np.asarray(features["token_ids"]),
                                                  expected["input_word_ids"].numpy()))
  report["padding_mask_equal"] = bool(np.array_equal(np.asarray(features["padding_mask"]).astype(np.int32),
                                                     expected["input_mask"].numpy()))
  # The backbone holds the directory's encoder weights (each model's compiled prediction step).
  inputs = {key: np.asarray(value) for key, value in features.items()}
  backbone_output = classifier.backbone.predict_on_batch(inputs)["sequence_output"]
  encoder_output = loaded.encoder.predict_on_batch(dict(input_word_ids=inputs["token_ids"],
                                                        input_mask=inputs["padding_mask"].astype(np.int32),
                                                        input_type_ids=inputs["segment_ids"]))["sequence_output"]
  report["backbone_vs_encoder"] = float(np.abs(keras.ops.convert_to_numpy(backbone_output)
                                               - keras.ops.convert_to_numpy(encoder_output)).max())
  # The converted checkpoint through keras-hub's own Backbone.from_preset.
  from_preset = keras_hub.models.Backbone.from_preset(model_dir).predict_on_batch(inputs)["sequence_output"]
  report["from_preset_vs_encoder"] = float(np.abs(keras.ops.convert_to_numpy(from_preset)
                                                  - keras.ops.convert_to_numpy(encoder_output)).max())

  classifier.compile(optimizer=keras.optimizers.Adam(1e-3),
                     loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  before = [np.array(w) for w in classifier.backbone.encoder.get_weights()]
  history = classifier.fit(x=TEXTS, y=np.array(LABELS), batch_size=5, epochs=3, verbose=0)
  report["losses"] = [float(x) for x in history.history["loss"]]
  after = classifier.backbone.encoder.get_weights()
  report["weights_changed"] = bool(any(np.abs(a - np.array(b)).max() > 0
                                       for a, b in zip(before, after, strict=True)))
  predictions = classifier.predict(TEXTS, verbose=0)
  report["logits_dtype"] = keras.backend.standardize_dtype(predictions.dtype)

  if run_dir:   # a classification run's classifier predicts as the run's tf_keras model does
    trained = zoo_hub.classifier_from_model_dir(run_dir)
    with open(run_logits) as file:
      expected = json.load(file)
    report["trained_head_vs_run"] = float(np.abs(trained.predict(TEXTS, verbose=0) - expected["texts"]).max())
    report.update(_pairs(trained, run_dir, expected["pairs"]))
    report["keras_hub_entry_points"] = _entry_points(keras_hub, run_dir, expected)
  report["refused"] = []
  for other in other_runs:   # runs whose heads are no text classifier's
    try:
      zoo_hub.classifier_from_model_dir(other)
    except ValueError as error:
      report["refused"].append(str(error))
  if other_runs:
    report["tag_encoder_classifier_classes"] = zoo_hub.classifier_from_model_dir(
        other_runs[0], num_classes=5).num_classes

  classifier.save_to_preset(preset_dir)
  restored = keras_hub.models.TextClassifier.from_preset(preset_dir)
  report["restored_class"] = type(restored).__name__
  report["restored_tokenizer"] = type(restored.preprocessor.tokenizer).__name__
  report["restored_cls_token"] = restored.preprocessor.tokenizer.cls_token
  report["restored_vs_trained"] = float(np.abs(restored.predict(TEXTS, verbose=0) - predictions).max())
  report["dtypes"] = _dtypes(keras, keras_hub, zoo_hub, model_dir, preset_dir, inputs, loaded)
  with open(out_path, "w") as file:
    json.dump(report, file, indent=1)


def _entry_points(keras_hub, run_dir, expected):
  """The classification run and the masked-LM run (`expected["mlm"]`) through keras-hub's own
  `from_preset`: the classes each resolves to, the tokenizer's ids against the zoo's TextEncoder's,
  the classifier's and the masked LM's outputs against the runs' tf_keras models', and the errors."""
  import keras
  import tensorflow as tf

  import zoo.keras3.hub as zoo_pretraining
  from zoo.keras3.loading import load_model_dir
  result = dict(backbone=type(keras_hub.models.Backbone.from_preset(run_dir)).__name__)
  tokenizer = keras_hub.models.Tokenizer.from_preset(run_dir)
  result["tokenizer"] = type(tokenizer).__name__
  encoder = _text_encoder(load_model_dir(run_dir))
  # Also every class of edge text (test_tokenizer_layouts.TEXTS: typed [CLS], long words, ...).
  from tests.zoo.keras3.test_tokenizer_layouts import TEXTS as EDGE_TEXTS
  texts = TEXTS + EDGE_TEXTS
  ids = [np.asarray(row).tolist() for row in tokenizer(texts)]
  result["tokenizer_ids_equal"] = ids == encoder.tokenize(tf.constant(texts)).to_list()
  classifier = keras_hub.models.TextClassifier.from_preset(run_dir)
  result.update(classifier=type(classifier).__name__, classes=classifier.num_classes,
                sequence_length=classifier.preprocessor.sequence_length)
  result["classifier_vs_run"] = float(np.abs(classifier.predict(TEXTS, verbose=0) - expected["texts"]).max())
  short = keras_hub.models.TextClassifier.from_preset(run_dir, sequence_length=8)
  result.update(short_length=short.preprocessor.sequence_length,
                short_logits_shape=list(short.predict(TEXTS, verbose=0).shape))
  mlm = expected["mlm"]
  masked_lm = keras_hub.models.MaskedLM.from_preset(mlm["dir"])
  result.update(masked_lm=type(masked_lm).__name__,
                mask_selection_length=masked_lm.preprocessor.mask_selection_length)
  features = encoder.encode(tf.constant(TEXTS))
  logits = masked_lm(dict(token_ids=features["input_word_ids"].numpy(),
                          segment_ids=features["input_type_ids"].numpy(),
                          padding_mask=features["input_mask"].numpy(),
                          mask_positions=np.array(mlm["positions"], np.int32)), training=False)
  difference = np.abs(keras.ops.convert_to_numpy(logits) - np.array(mlm["logits"]))
  result["masked_lm_vs_run"] = float(difference.max())
  for key, attempt in (
      ("mlm_as_classifier", lambda: keras_hub.models.TextClassifier.from_preset(mlm["dir"])),
      ("too_short", lambda: keras_hub.models.TextClassifier.from_preset(run_dir, sequence_length=4)),
      ("funnel_vocab_error", lambda: zoo_pretraining.masked_lm_from_preset(
          "funnel_b4_4_4_decoder", ["<pad>", "<unk>", "<cls>", "<sep>", "<mask>", "the"], seq_length=16))):
    try:
      attempt()
      result[key] = "no error"
    except ValueError as error:
      result[key] = str(error)
  return result


def _text_encoder(loaded):
  """The zoo's tokenizer (the export's) with a loaded model directory's settings."""
  from zoo.text import TextEncoder
  return TextEncoder(loaded.vocab, seq_length=loaded.seq_length, lower_case=loaded.lower_case,
                     special_tokens=loaded.special_tokens, cls_type_id=loaded.cls_type_id,
                     max_chars_per_word=loaded.max_chars_per_word)


def _pairs(classifier, run_dir, expected_logits):
  """Sentence pairs through the classifier's keras-hub preprocessor: its features against the zoo's
  TextEncoder's (the export's tokenizer) with the run's settings, and its logits against the export's."""
  import tensorflow as tf

  from zoo.keras3.loading import load_model_dir
  first, second = tf.constant([a for a, _ in PAIRS]), tf.constant([b for _, b in PAIRS])
  # keras-hub reads a pair of segments as `x=(first, second)`; a bare 2-tuple would be `(x, y)`.
  features = classifier.preprocessor(x=(first, second))
  loaded = load_model_dir(run_dir)
  encoder = _text_encoder(loaded)
  expected = encoder.encode(first, second)
  names = dict(token_ids="input_word_ids", segment_ids="input_type_ids", padding_mask="input_mask")
  equal = {key: bool(np.array_equal(np.asarray(features[key]).astype(np.int32), expected[name].numpy()))
           for key, name in names.items()}
  # [CLS] a [SEP] b [SEP]: some pairs need trimming.
  lengths = encoder.tokenize(first).row_lengths() + encoder.tokenize(second).row_lengths() + 3
  pairs = tf.data.Dataset.from_tensor_slices(((first, second),)).batch(len(PAIRS))   # elements: (x,)
  logits = classifier.predict(pairs, verbose=0)
  return dict(pair_features_equal=equal, pair_truncated=bool(np.max(lengths.numpy()) > loaded.seq_length),
              pairs_vs_export=float(np.abs(logits - np.array(expected_logits)).max()))


def _dtypes(keras, keras_hub, zoo_hub, model_dir, preset_dir, inputs, loaded):
  """What each way of asking for a dtype policy builds, under the global float32 policy: the
  policy, the dtypes of the encoder's weights (layer norms apart) and of its layer norms' weights,
  the sequence output's dtype and its largest difference to the same model's in float32."""
  def output(backbone):   # eagerly: JAX's compiled operations are shared by all these models
    return backbone(inputs, training=False)["sequence_output"]

  def describe(backbone, reference):
    weights, result = backbone.encoder.weights, output(backbone)
    difference = np.abs(keras.ops.convert_to_numpy(keras.ops.cast(result, "float32")) - reference).max()
    return dict(policy=backbone.dtype_policy.name,
                weights=sorted({str(w.dtype) for w in weights if "norm" not in w.path}),
                norms=sorted({str(w.dtype) for w in weights if "norm" in w.path}),
                output=keras.backend.standardize_dtype(result.dtype), vs_float32=float(difference))

  directory_float32 = keras.ops.convert_to_numpy(output(zoo_hub.backbone_from_model_dir(model_dir)[0]))
  preset_float32 = keras.ops.convert_to_numpy(output(keras_hub.models.Backbone.from_preset(preset_dir)))
  architecture = {key: getattr(loaded.encoder_config, key)
                  for key in ("hidden_size", "num_heads", "intermediate_size", "block_sizes")}
  result = dict(global_policy=keras.config.dtype_policy().name)
  mixed = zoo_hub.classifier_from_model_dir(model_dir, num_classes=2, dtype="mixed_bfloat16")
  mixed.save_to_preset(f"{preset_dir}_mixed")
  result["mixed_bfloat16_preset_reloaded"] = keras_hub.models.TextClassifier.from_preset(
      f"{preset_dir}_mixed").backbone.dtype_policy.name
  for dtype in ("bfloat16", "mixed_bfloat16"):
    backbone, _ = zoo_hub.backbone_from_model_dir(model_dir, dtype=dtype)
    result[f"backbone_from_model_dir_{dtype}"] = describe(backbone, directory_float32)
    classifier = zoo_hub.classifier_from_model_dir(model_dir, num_classes=2, dtype=dtype)
    result[f"classifier_from_model_dir_{dtype}"] = dict(
        describe(classifier.backbone, directory_float32),
        logits=keras.backend.standardize_dtype(classifier(inputs, training=False).dtype))
    restored = keras_hub.models.TextClassifier.from_preset(preset_dir, dtype=dtype)
    result[f"classifier_from_saved_preset_{dtype}"] = describe(restored.backbone, preset_float32)
    backbone = keras_hub.models.Backbone.from_preset(preset_dir, dtype=dtype)
    result[f"backbone_from_saved_preset_{dtype}"] = describe(backbone, preset_float32)
    fresh = zoo_hub.classifier_from_preset("funnel_b4_4_4", loaded.vocab, 2, loaded.seq_length, dtype=dtype,
                                           special_tokens=loaded.special_tokens, **architecture)
    result[f"classifier_from_zoo_preset_{dtype}"] = dict(
        policy=fresh.backbone.dtype_policy.name,
        weights=sorted({str(w.dtype) for w in fresh.backbone.encoder.weights if "norm" not in w.path}),
        norms=sorted({str(w.dtype) for w in fresh.backbone.encoder.weights if "norm" in w.path}))
  return result


if __name__ == "__main__":
  main(*sys.argv[1:])

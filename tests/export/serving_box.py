"""A serving box: loads the test exports where only tensorflow and tensorflow_text are importable.

`conftest.loaded` copies this file and `export/predict.py` into an empty directory and
runs it there without the repository on the path. It reads a JSON request on stdin
(the export paths, texts, token ids), calls the signatures directly, then through the
copy of `predict.py`, and writes every output as JSON on stdout, for the tests to check
against the Keras models. `"<bad utf-8>"` in a text stands for the bytes `\\xff\\xfe bad`.
"""

import json
import os
import sys

import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops)

PROJECT_PACKAGES = ("zoo", "tpu", "export", "official", "tf_keras")
INVALID_UTF8 = b"\xff\xfe bad"


def project_modules():
  return sorted(name for name in sys.modules if name.split(".")[0] in PROJECT_PACKAGES)


def strings(texts):
  values = [INVALID_UTF8 if text == "<bad utf-8>" else text.encode() for text in texts]
  return tf.constant(values, tf.string, shape=[len(values)])


def call(function, **inputs):
  """`{output: {"shape", "dtype", "value"}}` of a signature."""
  results = {}
  for name, tensor in function(**inputs).items():
    value = tensor.numpy()
    value = [item.decode() for item in value] if tensor.dtype == tf.string else value.tolist()
    results[name] = dict(shape=tensor.shape.as_list(), dtype=tensor.dtype.name, value=value)
  return results


def main():
  request = json.load(sys.stdin)
  texts = strings(request["texts"])

  classify = tf.saved_model.load(request["classify"])
  serve = classify.signatures["serving_default"]
  results = dict(
      signatures=sorted(classify.signatures),
      label_names=[name.decode() for name in classify.label_names.numpy()],
      texts=call(serve, text=texts),
      encode=call(classify.signatures["encode"], text=texts),
      odd={name: call(serve, text=strings(batch)) for name, batch in request["odd_batches"].items()})

  pair = tf.saved_model.load(request["regress_pair"])
  texts_a, texts_b = request["pairs"]
  token_ids = {name: tf.constant(value, tf.int32) for name, value in request["pair_token_ids"].items()}
  results["pair"] = dict(
      inputs=sorted(pair.signatures["serving_default"].structured_input_signature[1]),
      text=call(pair.signatures["serving_default"], text=strings(texts_a), text_b=strings(texts_b)),
      token_ids=call(pair.signatures["from_token_ids"], **token_ids))

  mlm = tf.saved_model.load(request["mlm"])
  results["mlm"] = dict(serving_default=call(mlm.signatures["serving_default"], text=texts),
                        encode=call(mlm.signatures["encode"], text=texts))
  results["modules_after_loading"] = project_modules()

  import predict  # the copy beside this file

  results["predict"] = dict(
      classify=predict.load(os.path.dirname(request["classify"])).predict(request["texts"]),
      regress_pair=predict.load(request["regress_pair"]).predict(texts_a, texts_b),
      mlm=predict.load(request["mlm"]).predict(request["texts"]))
  results["modules_after_predict"] = project_modules()
  json.dump(results, sys.stdout)


if __name__ == "__main__":
  main()

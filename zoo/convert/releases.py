"""The files of a released TensorFlow checkpoint: its config JSON beside a checkpoint prefix.

Google's TF1 BERT releases (`bert_config.json`, `bert_model.ckpt.*`) and the Funnel
authors' (`net_config.json`, `model.ckpt.*`) share a layout: a directory holding the
config and the checkpoint, which may also be named by its prefix.
"""

import json
import os
from typing import Any

from zoo.convert.errors import ConversionError


def paths(src: str, checkpoint: str, config_file: str, config: str | None = None) -> tuple[str, str]:
  """`(config path, checkpoint prefix)` of a release `src`: its directory (the prefix `checkpoint` in
  it, else its latest checkpoint, else its only one) or its checkpoint prefix (the config beside it).
  `config` names another config file."""
  if os.path.isdir(src):
    prefix = os.path.join(src, checkpoint)
    if not os.path.exists(prefix + ".index"):
      import tensorflow as tf
      # A step-numbered checkpoint (`model.ckpt-1000000.*`) with or without TensorFlow's state file.
      indexes = sorted(name[:-len(".index")] for name in os.listdir(src) if name.endswith(".index"))
      alone = os.path.join(src, indexes[0]) if len(indexes) == 1 else None
      prefix = tf.train.latest_checkpoint(src) or alone or prefix
    folder = src
  else:
    prefix, folder = src, os.path.dirname(src)
  return config or os.path.join(folder, config_file), prefix


def read_json(path: str, what: str, kind: type[dict[Any, Any]] | type[list[Any]] = dict) -> Any:
  """The JSON value in `path`, an object (`kind` dict) or a list; a ConversionError says it is missing
  (expected: `what`), not JSON or not of that kind."""
  if not os.path.isfile(path):
    raise ConversionError(f"{path}: not found; expected {what}")
  with open(path, encoding="utf-8") as file:
    try:
      values = json.load(file)
    except json.JSONDecodeError as error:
      raise ConversionError(f"{path}: not valid JSON ({error})") from error
  if not isinstance(values, kind):
    raise ConversionError(f"{path}: expected a JSON {'object' if kind is dict else 'list'}")
  return values


def checkpoint_reader(prefix: str, expected: str) -> Any:
  """TensorFlow's reader of the checkpoint `prefix`; a ConversionError when there is none (`expected`:
  what the release should hold) or it cannot be read."""
  import tensorflow as tf
  if not os.path.exists(prefix + ".index"):
    raise ConversionError(f"{prefix}: no TensorFlow checkpoint ({prefix}.index not found); expected "
                          f"{expected}")
  try:
    return tf.train.load_checkpoint(prefix)
  except (tf.errors.OpError, ValueError) as error:
    raise ConversionError(f"{prefix}: cannot be read as a TensorFlow checkpoint ({error})") from None

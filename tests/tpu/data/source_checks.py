"""What the data-source tests share: a source's examples as numpy values, a file written for a test to
load, the pattern of a `DataError` naming a file's line, and the word ids a pre-training shard holds."""

import re

import tensorflow as tf


def source_examples(source):
  """Every example of `source` (a `tpu.data.DataSource`), each a dict of numpy values."""
  return [{key: value.numpy() for key, value in example.items()} for example in source.dataset]


def write_file(tmp_path, name, content):
  """Writes `content` (text, as UTF-8, or bytes) to `tmp_path / name`; returns the path as a string."""
  path = tmp_path / name
  path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
  return str(path)


def error_at(path, line):
  """A regex matching the start of a DataError message at FILE:LINE."""
  return "^" + re.escape(f"{path}:{line}: ")


def shard_word_ids(path, seq_length):
  """The `input_word_ids` (int64 `[seq_length]` each) of the examples of a pre-training shard (`.gz`:
  GZIP-compressed), in their order."""
  compression = "GZIP" if str(path).endswith(".gz") else None
  parse = lambda record: tf.io.parse_single_example(   # noqa: E731
      record, {"input_word_ids": tf.io.FixedLenFeature([seq_length], tf.int64)})["input_word_ids"]
  return list(tf.data.TFRecordDataset(str(path), compression).map(parse).as_numpy_iterator())

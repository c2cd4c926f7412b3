"""Documents concatenated into full-length pre-training examples: the one rule, in tf.data.

Both the input pipeline (raw pre-training text, `tpu.data.pipeline`) and the shard
writer (`tpu.data.shard_writer`, which packs each chunk of a corpus as one finite
stream, in one process or on Beam workers) make their examples here, so the same
documents give the same examples on either route.

The rule (as BERT's, the Funnel authors' and Model Garden's tools): the WordPiece
tokens of consecutive documents are concatenated with `[SEP]` between two documents
(none at the start of an example) and cut into examples of exactly T ids,
`[CLS]` + T - 2 tokens + `[SEP]`; only the last example of a finite stream is
shorter (padded with `[PAD]`). Every token lands in an example, in order; a long
document spans several.

Input: a dataset of `(document, ids)` pairs, `document` an int64 index that changes
from one document to the next and `ids` an int `[n]` vector: one pair per document,
or several (a document's lines, say) with the same index.

Example:
  >>> import tensorflow as tf
  >>> pieces = tf.data.Dataset.from_tensor_slices((tf.constant([0, 0, 1], tf.int64),
  ...     tf.ragged.constant([[5, 6], [7], [8, 9, 10]]))).map(lambda d, ids: (d, ids))
  >>> [e["input_word_ids"].numpy().tolist() for e in concatenate(pieces, 6, cls_id=2, sep_id=3, pad_id=0)]
  [[2, 5, 6, 7, 3, 3], [2, 8, 9, 10, 3, 0]]
"""

from zoo.lazy import lazy_module

tf = lazy_module("tensorflow")


def concatenate(pieces, seq_length, *, cls_id, sep_id, pad_id, cls_type_id=0):
  """`(document, ids)` pairs -> examples `input_word_ids`, `input_mask`, `input_type_ids` int32 `[T]`.

  `input_type_ids` is `cls_type_id` at [CLS] (2 for Funnel-Transformer's tokenizer), 0 elsewhere.
  """
  body = seq_length - 2
  if body < 1:
    raise ValueError(f"seq_length must be at least 3 ([CLS] token [SEP]), got {seq_length}")
  end = tf.data.Dataset.from_tensors((tf.constant(-1, tf.int64), tf.zeros([0], tf.int64), tf.constant(True)))
  items = pieces.map(lambda document, ids: (tf.cast(document, tf.int64), tf.cast(ids, tf.int64),
                                            tf.constant(False))).concatenate(end)

  def step(state, item):
    pending, last = state
    document, ids, final = item
    separate = (document != last) & (tf.size(pending) > 0) & tf.logical_not(final)
    buffer = tf.concat([pending, tf.constant([sep_id], tf.int64)[:tf.cast(separate, tf.int32)], ids], 0)
    full = tf.size(buffer) // body
    rows = tf.reshape(buffer[:full * body], [full, body])
    lengths = tf.fill([full], body)
    rest = buffer[full * body:]
    flush = tf.cast(final & (tf.size(rest) > 0), tf.int32)   # the stream's last, shorter example
    padded = tf.pad(rest, [[0, body - tf.size(rest)]], constant_values=pad_id)
    rows = tf.concat([rows, padded[tf.newaxis][:flush]], 0)
    lengths = tf.concat([lengths, tf.size(rest)[tf.newaxis][:flush]], 0)
    rest = rest[:tf.size(rest) * (1 - tf.cast(final, tf.int32))]
    return (rest, document), (rows, lengths)

  initial = (tf.zeros([0], tf.int64), tf.constant(-1, tf.int64))
  chunks = items.scan(initial, step)
  rows = chunks.flat_map(lambda rows, lengths: tf.data.Dataset.from_tensor_slices((rows, lengths)))
  return rows.map(lambda row, length: example(row[:length], seq_length, cls_id, sep_id, pad_id, cls_type_id))


def example(tokens, seq_length, cls_id, sep_id, pad_id, cls_type_id=0):
  """`[CLS] tokens [SEP]` padded to `seq_length`: the encoder's int32 features `[T]`."""
  tokens = tf.cast(tokens, tf.int32)
  real = tf.concat([[cls_id], tokens, [sep_id]], axis=0)
  padding = seq_length - tf.shape(real)[0]
  ids = tf.pad(real, [[0, padding]], constant_values=pad_id)
  mask = tf.pad(tf.ones_like(real), [[0, padding]])
  ids.set_shape([seq_length])
  mask.set_shape([seq_length])
  return dict(input_word_ids=ids, input_mask=mask, input_type_ids=cls_token_types(ids, cls_type_id))


def cls_token_types(ids, cls_type_id):
  """Token types of concatenated examples: the [CLS] (first) position's type, 0 elsewhere."""
  first = tf.equal(tf.range(tf.shape(ids)[-1]), 0)
  return tf.broadcast_to(tf.where(first, cls_type_id, 0), tf.shape(ids))

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

`concatenate` packs one finite stream; `concatenate_streams` packs streams one after
another with the same step, one output per batch of input, so one iterator serves them.

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

from typing import Any

from zoo.lazy import lazy_module

tf = lazy_module("tensorflow")


def concatenate(pieces: Any, seq_length: int, *, cls_id: int, sep_id: int, pad_id: int,
                cls_type_id: int = 0) -> Any:
  """`(document, ids)` pairs -> examples `input_word_ids`, `input_mask`, `input_type_ids` int32 `[T]`.

  `input_type_ids` is `cls_type_id` at [CLS] (2 for Funnel-Transformer's tokenizer), 0 elsewhere.
  """
  body = _body(seq_length)
  end = tf.data.Dataset.from_tensors((tf.constant(-1, tf.int64), tf.zeros([0], tf.int64), tf.constant(True)))
  items = pieces.map(lambda document, ids: (tf.cast(document, tf.int64), tf.cast(ids, tf.int64),
                                            tf.constant(False))).concatenate(end)
  chunks = items.scan(_start_state(), lambda state, item: _step(state, item, body, sep_id, pad_id))
  rows = chunks.flat_map(lambda rows, lengths: tf.data.Dataset.from_tensor_slices((rows, lengths)))
  return rows.map(lambda row, length: example(row[:length], seq_length, cls_id, sep_id, pad_id, cls_type_id))


def concatenate_streams(batches: Any, seq_length: int, *, cls_id: int, sep_id: int, pad_id: int,
                        cls_type_id: int = 0) -> Any:
  """Finite streams one after another, each packed as `concatenate` packs its pieces, one output per input.

  `batches`: `(documents [P], ids [P, (n)], final)` elements, the pieces of a stream in
  order, batched; `final` ends the stream after the element's pieces (its last, shorter
  example made; the next element starts a new stream). Each element gives exactly one
  `(examples, final)`: the features of `concatenate`'s examples (`[K, T]`, K ≥ 0) that its
  pieces complete. The same step makes them, so a stream gives `concatenate`'s examples;
  and since no output waits for a later input, one iterator can serve streams that come
  one at a time (the shard writer's chunks, `tpu.data.chunk_packing`).
  """
  body = _body(seq_length)

  def run(state, batch):
    numbers, ids, final = batch
    numbers, ids = tf.cast(numbers, tf.int64), tf.cast(ids, tf.int64)
    end = tf.cast(final, tf.int32)   # the stream's end after its pieces: `concatenate`'s end item
    numbers = tf.concat([numbers, tf.constant([-1], tf.int64)[:end]], 0)
    values, splits = ids.flat_values, tf.concat([ids.row_splits, ids.row_splits[-1:][:end]], 0)
    count = tf.size(numbers)
    finals = tf.range(count) >= count - end

    def one(index, state, rows, lengths):
      item = (numbers[index], values[splits[index]:splits[index + 1]], finals[index])
      state, (made, made_lengths) = _step(state, item, body, sep_id, pad_id)
      return index + 1, state, rows.write(index, made), lengths.write(index, made_lengths)
    rows = tf.TensorArray(tf.int64, size=count, infer_shape=False, element_shape=[None, body])
    lengths = tf.TensorArray(tf.int32, size=count, infer_shape=False, element_shape=[None])
    _, state, rows, lengths = tf.while_loop(
        lambda index, *_: index < count, one, (tf.constant(0), state, rows, lengths),
        shape_invariants=(tf.TensorShape([]), (tf.TensorShape([None]), tf.TensorShape([])), None, None))
    return state, (rows.concat(), lengths.concat(), final)

  def examples(rows, lengths, final):
    made = tf.data.Dataset.from_tensor_slices((rows, lengths)).map(
        lambda row, length: example(row[:length], seq_length, cls_id, sep_id, pad_id, cls_type_id))
    none = tf.data.Dataset.from_tensors({key: tf.zeros([0, seq_length], tf.int32)
                                         for key in ("input_word_ids", "input_mask", "input_type_ids")})
    everything = tf.maximum(tf.size(lengths, out_type=tf.int64), 1)
    return made.batch(everything).concatenate(none).take(1).map(lambda features: (features, final))
  return batches.scan(_start_state(), run).flat_map(examples)


def _body(seq_length):
  if seq_length - 2 < 1:
    raise ValueError(f"seq_length must be at least 3 ([CLS] token [SEP]), got {seq_length}")
  return seq_length - 2


def _start_state():   # noqa: N802
  """The packer's state at a stream's start: no pending tokens, no document yet."""
  return (tf.zeros([0], tf.int64), tf.constant(-1, tf.int64))


def _step(state, item, body, sep_id, pad_id):
  """The rule, one piece at a time: `(pending, last document)`, `(document, ids, final)` -> the new state
  and the rows `[k, body]` (with their lengths) it completes; a final item (document -1, no ids) flushes
  the stream's last, shorter example and leaves the state as at a stream's start."""
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


def example(tokens: Any, seq_length: int, cls_id: int, sep_id: int, pad_id: int,
            cls_type_id: int = 0) -> dict[str, Any]:
  """`[CLS] tokens [SEP]` padded to `seq_length`: the encoder's int32 features `[T]`."""
  tokens = tf.cast(tokens, tf.int32)
  real = tf.concat([[cls_id], tokens, [sep_id]], axis=0)
  padding = seq_length - tf.shape(real)[0]
  ids = tf.pad(real, [[0, padding]], constant_values=pad_id)
  mask = tf.pad(tf.ones_like(real), [[0, padding]])
  ids.set_shape([seq_length])
  mask.set_shape([seq_length])
  return dict(input_word_ids=ids, input_mask=mask, input_type_ids=cls_token_types(ids, cls_type_id))


def cls_token_types(ids: Any, cls_type_id: int | Any) -> Any:
  """Token types of concatenated examples: the [CLS] (first) position's type, 0 elsewhere."""
  first = tf.equal(tf.range(tf.shape(ids)[-1]), 0)
  return tf.broadcast_to(tf.where(first, cls_type_id, 0), tf.shape(ids))

"""Packing of the shard writer: each chunk's documents into examples, kept in a packed-chunk file.

A chunk's documents (`tpu.data.corpus_reading`) are tokenized and packed by the one
packing rule (`tpu.data.documents`: its step, as `concatenate` applies it in the
training pipeline; here `concatenate_streams`, a chunk one stream, through one
long-lived iterator per process that packs chunk after chunk): their
tokens with `[SEP]` between documents, cut into examples of T ids; only the chunk's last
example can be shorter. The examples are written to the chunk's TFRecord file in the work
folder grouped by their number j modulo N (the shards), with the group sizes, byte
offsets and token counts in an index (`chunk-NNNNN.json`) written after it: a chunk counts
as packed once its index exists. The index also records the chunk's pieces and, per piece,
the SHA-256 of the bytes its lines depend on (`corpus_reading.piece_fingerprint`), so a
rerun on a corpus changed elsewhere keeps it (`tpu.data.chunk_plan`).
"""

from __future__ import annotations

import atexit
import json
import threading
from collections.abc import Iterable
from collections.abc import Iterator
from typing import TYPE_CHECKING
from typing import Any

from tpu.data import corpus_reading
from tpu.data import documents
from tpu.data.records import serialize
from tpu.data.records import vocab_checksum
from zoo.atomic_files import atomic_path
from zoo.atomic_files import write_atomically

if TYPE_CHECKING:
  import numpy as np

  from tpu.data.chunk_plan import Plan
  from zoo.text import TextEncoder

# Lines tokenized per call of the tokenizer, and the bytes of text in one call, at most (lines can be
# up to `corpus_reading.MAX_LINE_BYTES` long).
BATCH_LINES = 2048
BATCH_BYTES = 1 << 20
# How long the packing pipeline's input waits for the next chunk before it passes an empty batch on.
IDLE_SECONDS = 0.05


def chunk_lines(plan: Plan, index: int) -> Iterator[tuple[int, str]]:
  """(document number within the chunk, line) of chunk `index` (`corpus_reading`'s rule)."""
  pieces: Iterable[Iterable[str]]
  if plan.tfds:
    shard = index if len(plan.chunks) > 1 else None
    pieces = [corpus_reading.tfds_lines(plan.tfds["name"], plan.tfds["text_key"], plan.tfds["split"],
                                        plan.tfds["data_dir"], shard)]
  else:
    assert plan.files is not None, "a corpus of files"
    sizes = {path: size for path, size, _ in plan.files}
    pieces = (corpus_reading.piece_lines(path, start, end, sizes[path], plan.documents, plan.chunk_bytes)
              for path, start, end in plan.chunks[index])
  yield from corpus_reading.numbered_lines(pieces)


_ENCODERS: dict[tuple[Any, ...], TextEncoder] = {}


def encoder_of(plan: Plan) -> TextEncoder:
  """The plan's `zoo.text.TextEncoder`, built once per process (a Beam worker packs many chunks)."""
  from zoo.text import TextEncoder
  key = (vocab_checksum(plan.vocab), plan.lower_case, json.dumps(plan.tokenizer, sort_keys=True))
  if key not in _ENCODERS:
    _ENCODERS[key] = TextEncoder(plan.vocab, seq_length=3, lower_case=plan.lower_case, **plan.tokenizer)
  return _ENCODERS[key]


class _Packer:
  """The packing pipeline of one plan's tokenizer and T: built once per process, with ONE iterator that
  packs chunk after chunk (`documents.concatenate_streams`, each chunk one stream).

  Building the `tf.data` pipeline traces the tokenizer (about a second), and creating an
  iterator of it costs about 0.17 CPU-s more, so neither is done per chunk: a chunk's lines
  are handed to the iterator's generator through a queue, as batches and then its end, and
  the chunk's examples come out as one output per batch, the last one marked final.
  """

  def __init__(self, plan):
    import tensorflow as tf
    encoder = encoder_of(plan)
    self.feed = None
    self.iterator = None
    # Batches of lines come from Python (from_generator costs about 150 µs an element).
    texts = tf.data.Dataset.from_generator(lambda: _fed(self.feed), output_signature=(
        tf.TensorSpec([None], tf.int64), tf.TensorSpec([None], tf.string), tf.TensorSpec([], tf.bool)))
    ids = texts.map(lambda numbers, batch, final: (*_by_document(numbers, encoder.tokenize(batch)), final))
    self.dataset = documents.concatenate_streams(ids, plan.seq_length, cls_id=encoder.cls_id,
                                                 sep_id=encoder.sep_id, pad_id=encoder.pad_id).prefetch(2)
    self.lock = threading.Lock()

  def examples(self, lines: Iterable[tuple[int, str]]) -> Iterator[dict[str, np.ndarray]]:
    """Batches of the examples packed from `(document, line)` pairs (one chunk at a time per process)."""
    import queue
    with self.lock:
      if self.iterator is None:
        self.feed = queue.Queue()
        self.iterator = self.dataset.as_numpy_iterator()
      stop = threading.Event()
      self.feed.put((lines, stop))
      ended = False
      try:
        for features, final in self.iterator:
          if len(features["input_word_ids"]):
            yield features
          if final:
            ended = True
            return
      finally:
        if not ended:   # left early (an error of the caller's, or of the pipeline): start afresh next time
          stop.set()
          self._close()

  def _close(self):
    """Ends the iterator's generator (so no thread of it waits on the queue) and drops the iterator."""
    if self.feed is not None:
      self.feed.put(None)
    self.feed, self.iterator = None, None


def _fed(feed):
  """The pipeline's input: for each chunk put in `feed`, its line batches, then its end (an empty final
  batch) and an empty batch; None ends it. A chunk whose `stop` is set yields no more of its lines.
  While no chunk comes, an empty batch every `IDLE_SECONDS` (until the prefetch buffer is full), so the
  pipeline never holds a chunk's end waiting for input, however far it reads ahead."""
  import queue

  import numpy as np
  while True:
    try:
      item = feed.get(timeout=IDLE_SECONDS)
    except queue.Empty:   # waiting for a chunk: an empty batch, so no end waits behind a read-ahead
      yield np.zeros([0], np.int64), np.array([], object), False
      continue
    if item is None:
      return
    lines, stop = item
    for numbers, texts in _batches(lines):
      if stop.is_set():
        break
      yield numbers, texts, False
    yield np.zeros([0], np.int64), np.array([], object), True
    # An empty batch after the end: `from_generator` asks for one element past the one it gives (the
    # end), and this one is ready, so the end comes out before the next chunk is put in.
    yield np.zeros([0], np.int64), np.array([], object), False


def _batches(lines):
  """`(document, line)` pairs as batches `(documents [B], lines [B])` of up to `BATCH_LINES` lines and
  `BATCH_BYTES` bytes (a line longer than that alone)."""
  import numpy as np
  numbers, texts, size = [], [], 0
  for number, line in lines:
    encoded = line.encode("utf-8")
    if texts and size + len(encoded) > BATCH_BYTES:
      yield np.array(numbers, np.int64), np.array(texts, object)
      numbers, texts, size = [], [], 0
    numbers.append(number)
    texts.append(encoded)
    size += len(encoded)
    if len(texts) == BATCH_LINES:
      yield np.array(numbers, np.int64), np.array(texts, object)
      numbers, texts, size = [], [], 0
  if texts:
    yield np.array(numbers, np.int64), np.array(texts, object)


def _by_document(numbers, ids):
  """A batch of lines' `(document, ids)` as one piece per document: the packer steps once per piece."""
  import tensorflow as tf
  starts = tf.concat([tf.ones([1], tf.bool)[:tf.size(numbers)], numbers[1:] != numbers[:-1]], 0)
  piece = tf.cumsum(tf.cast(starts, tf.int64)) - 1
  merged = tf.RaggedTensor.from_value_rowids(ids.flat_values, tf.gather(piece, ids.value_rowids()),
                                             nrows=tf.reduce_sum(tf.cast(starts, tf.int64)))
  return tf.boolean_mask(numbers, starts), merged


_PACKERS: dict[tuple[Any, ...], _Packer] = {}


def _packer(plan):
  key = (vocab_checksum(plan.vocab), plan.lower_case, json.dumps(plan.tokenizer, sort_keys=True),
         plan.seq_length)
  if key not in _PACKERS:
    if not _PACKERS:
      atexit.register(lambda: [packer._close() for packer in _PACKERS.values()])
    _PACKERS[key] = _Packer(plan)
  return _PACKERS[key]


def pack_chunk(plan: Plan, index: int, bar: Any = None) -> dict[str, Any]:
  """Packs chunk `index` into its packed-chunk file and index (step 2); returns the index."""
  import numpy as np
  import tensorflow as tf

  encoder = encoder_of(plan)
  counter: dict[str, Any] = dict(documents=0, error=None, bytes=0)
  nominal = plan.piece_bytes(index)

  def pieces():
    last = -1
    try:
      for document, line in chunk_lines(plan, index):
        if document != last:
          last, counter["documents"] = document, document + 1
          if bar is not None and plan.tfds:
            bar.update(1, 0)
        if bar is not None and not plan.tfds and counter["bytes"] < nominal:
          step = min(len(line.encode("utf-8")) + 1, nominal - counter["bytes"])
          counter["bytes"] += step
          bar.update(step, 0)
        yield document, line
    except Exception as error:   # raised again below, as it is (tf.data would wrap it)
      counter["error"] = error

  shards, seq_length = plan.shards, plan.seq_length
  groups: list[list[bytes]] = [[] for _ in range(shards)]
  full, tokens = np.zeros(shards, np.int64), np.zeros(shards, np.int64)
  not_tokens = np.array([encoder.cls_id, encoder.sep_id, encoder.pad_id])
  count = 0
  for batch in _packer(plan).examples(pieces()):
    ids = batch["input_word_ids"].astype(np.int64)
    real = batch["input_mask"].sum(axis=1)
    counts = (~np.isin(ids, not_tokens)).sum(axis=1)
    for row in range(len(ids)):
      group = (count + row) % shards
      groups[group].append(serialize(ids[row]))
      full[group] += int(real[row] == seq_length)
      tokens[group] += int(counts[row])
    count += len(ids)
    if bar is not None:
      bar.update(0, int(counts.sum()))
  if counter["error"] is not None:
    raise counter["error"]
  if bar is not None and nominal > counter["bytes"]:
    bar.update(nominal - counter["bytes"], 0)

  # The records grouped by j mod N, each group in order; a TFRecord record takes 16 bytes besides its data.
  starts, position = [], 0
  path = plan.chunk_path(index, "tfrecord")
  with atomic_path(path) as temporary, tf.io.TFRecordWriter(temporary) as writer:
    for records in groups:
      starts.append(position)
      for record in records:
        writer.write(record)
        position += len(record) + 16
  chunk = dict(chunk=index, documents=counter["documents"], examples=count,
               counts=[len(group) for group in groups], full_examples=full.tolist(), tokens=tokens.tolist(),
               starts=starts, **fingerprints(plan, index))
  write_atomically(plan.chunk_path(index, "json"), json.dumps(chunk) + "\n")
  return chunk


def fingerprints(plan: Plan, index: int) -> dict[str, Any]:
  """`pieces` and `fingerprints` of chunk `index` of a file corpus (`corpus_reading.piece_fingerprint`, one
  per piece): what a rerun on a changed corpus compares to keep the chunk (`chunk_plan`); none for TFDS."""
  if plan.tfds:
    return {}
  assert plan.files is not None, "a corpus of files"
  sizes = {path: size for path, size, _ in plan.files}
  pieces = plan.chunks[index]
  return dict(pieces=pieces, fingerprints=[
      corpus_reading.piece_fingerprint(path, start, end, sizes[path], plan.chunk_bytes)
      for path, start, end in pieces])


def packed_chunk(plan: Plan, index: int) -> dict[str, Any] | None:
  """The index of chunk `index` if it is packed already, else None."""
  import tensorflow as tf
  path = plan.chunk_path(index, "json")
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path, "r") as file:
    return json.loads(file.read())


def ensure_chunk(plan: Plan, index: int, bar: Any = None) -> dict[str, Any]:
  """The index of chunk `index`: kept from an earlier run, else packed now."""
  return packed_chunk(plan, index) or pack_chunk(plan, index, bar)

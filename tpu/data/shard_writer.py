"""The shard writer: a corpus into packed examples in TFRecord shards, one definition for two engines.

`write_pretraining_data` runs it in this process; `tpu.data.beam_writer` runs the same
steps as an Apache Beam pipeline (DirectRunner's worker processes, Dataflow, Flink,
Spark). For the same inputs and flags both write byte-identical shards and
`metadata.json`, whatever the number of workers, because every step is a function of
the inputs and flags alone:

1. **Chunks.** The corpus is cut into chunks of about `chunk_bytes` bytes (`--chunk-mb`)
   of its files' concatenated bytes, each piece of a file cut at a document or line
   boundary found within a bounded look-ahead: the rule is `tpu.data.corpus_reading`'s
   (stated there once), with documents separated by blank lines or one per line
   (`--documents`). A `tfds:` corpus is one chunk per file shard of its split.
2. **Packing.** Each chunk's documents are packed on their own by the one packing rule
   (`tpu.data.documents.concatenate`, as the training pipeline does): their tokens
   with `[SEP]` between documents, cut into examples of T ids; only the chunk's last
   example can be shorter. A chunk's examples are kept in a packed-chunk file, grouped
   by their number j modulo N (the shards), with the group sizes, byte offsets and
   token counts in an index beside it.
3. **Shards.** A global ordinal numbers the examples: chunk c's example j is example
   `k = j + (examples of chunks 0 .. c-1)`. Example k goes to shard `k mod N`, and
   each shard holds its examples in increasing k: shard s takes, from chunk c in
   order, the group `(s - offset_c) mod N`. Shards differ by one example at most, so
   none is empty unless the corpus makes fewer examples than shards, which is refused
   with both counts named. Shards and metadata need only the indexes (the counts per
   group), never the order in which chunks were packed.

Resume: the packed chunks and their indexes live in the hidden folder
`.pretraining-work/` of the output with `plan.json` (the settings and the corpus files
with their sizes and modification times) until the run ends; `metadata.json` keeps the
files too. A chunk counts as packed once its index exists
(written after its records), a shard once its file exists (renamed into place
complete), so a rerun of an interrupted run with the same command keeps both, reports
on stderr what it kept, and does the rest. Output made with other settings (another
vocabulary, casing, tokenizer, sequence length, shard count, compression, chunk size,
input) is refused with the differences named, and so is a corpus whose files changed
since (a file added, removed, or of another size or modification time: each named;
on gs:// the modification time is the object's update time, new with every
generation), so neither a resumed run nor a finished output is ever taken for one of
another corpus; `--overwrite` replaces it. Temporary files of killed runs are removed when a run
starts, and a finished run leaves none, nor the work folder. Every file is written
through `zoo.model_dir`'s atomic writers: chunks and shards stream into a temporary file
beside them, renamed when complete (`atomic_path`; a shard can be gigabytes), the small
files are written whole (`write_atomically`).

Errors by kind: a fault of the corpus (not UTF-8, a file that cannot be read) is a
`CorpusError` naming the file and line, and keeps the chunks packed before it;
transient storage errors (`records.is_transient`) are retried in this process
(`retrying`: doubling waits, `ATTEMPTS` in all, then `StorageUnavailable` with the work
kept) and raised as they are from Beam's steps, for the runner to retry.
"""

import dataclasses
import json
import os
import struct
import sys
import threading
import time

from tpu.data import corpus_reading
from tpu.data import documents
from tpu.data import tfds_datasets
from tpu.data.records import FORMAT
from tpu.data.records import METADATA_FILE
from tpu.data.records import SHARD_PREFIX
from tpu.data.records import CorpusError
from tpu.data.records import StorageUnavailable
from tpu.data.records import input_files
from tpu.data.records import is_transient
from tpu.data.records import load_encoder
from tpu.data.records import serialize
from tpu.data.records import shard_name
from tpu.data.records import tokenizer_settings
from tpu.data.records import vocab_checksum
from zoo.model_dir import atomic_path
from zoo.model_dir import is_temporary
from zoo.model_dir import write_atomically

# Attempts of a step that meets transient storage errors, in one process, and the wait before the
# second (doubled before each next): 1 + 2 + 4 + 8 s, then the run stops with its work kept.
ATTEMPTS = 5
FIRST_WAIT_SECONDS = 1.0
# Lines tokenized per call of the tokenizer, and the bytes of text in one call, at most (lines can be
# up to `corpus_reading.MAX_LINE_BYTES` long).
BATCH_LINES = 2048
BATCH_BYTES = 1 << 20
# Bytes of corpus text per chunk, the unit of parallel work and of resume (`--chunk-mb`).
CHUNK_MB = 16
WORK_FOLDER = ".pretraining-work"
PLAN_FILE = "plan.json"
# What `--flag` each setting of the output comes from, for the refusal of a changed one.
SETTING_NAMES = dict(seq_length="--seq-length", lower_case="--lower-case",
                     tokenizer="the tokenizer's special tokens and [CLS] type (--vocab)",
                     vocab_sha256="the vocabulary's SHA-256 (--vocab)", shards="--shards",
                     compress="--compress", chunk_bytes="--chunk-mb (bytes)", documents="--documents",
                     inputs="--input",
                     tfds="--text-key/--split")


@dataclasses.dataclass
class Plan:
  """What a run computes: settings, the vocabulary, the chunks. Picklable (Beam ships it to workers)."""

  out: str
  seq_length: int
  shards: int
  compress: bool
  chunk_bytes: int
  vocab: list
  lower_case: bool
  tokenizer: dict
  inputs: list
  files: list          # [[path, size, modified (ns)], ...] of a file corpus, None for TFDS
  chunks: list         # per chunk, its pieces [[path, start, end], ...] (a TFDS corpus: [[shard]])
  tfds: dict = None    # name, text_key, split, data_dir of a `tfds:` corpus
  documents: str = "blank-line"   # `corpus_reading.DOCUMENTS`

  @property
  def work(self):
    return os.path.join(self.out, WORK_FOLDER)

  @property
  def names(self):
    return [shard_name(index, self.shards, self.compress) for index in range(self.shards)]

  def shard_path(self, index):
    return os.path.join(self.out, shard_name(index, self.shards, self.compress))

  def chunk_path(self, index, suffix):
    return os.path.join(self.work, f"chunk-{index:05d}.{suffix}")

  def settings(self):
    """The settings that make the bytes of the output (compared on a rerun)."""
    settings = dict(seq_length=self.seq_length, lower_case=self.lower_case, tokenizer=self.tokenizer,
                    vocab_sha256=vocab_checksum(self.vocab), shards=self.shards, compress=self.compress,
                    chunk_bytes=self.chunk_bytes, documents=self.documents, inputs=self.inputs)
    if self.tfds:
      settings["tfds"] = dict(text_key=self.tfds["text_key"], split=self.tfds["split"])
    return settings

  def piece_bytes(self, index):
    """The bytes of corpus of chunk `index` (0 for a TFDS shard)."""
    return 0 if self.tfds else sum(end - start for _, start, end in self.chunks[index])

  def corpus_bytes(self):
    return sum(size for _, size, _ in self.files) if self.files is not None else None

  def where(self):
    sources = [path for path, _, _ in self.files] if self.files is not None else self.inputs
    return ", ".join(sources[:5]) + (" …" if len(sources) > 5 else "")


def file_states(paths):
  """`[[path, size, modified], ...]`: what a rerun compares of each corpus file. `modified` is
  the modification time in nanoseconds (on gs://, the object's update time, which every new
  generation of it changes)."""
  import tensorflow as tf
  states = []
  for path in paths:
    stat = tf.io.gfile.stat(path)
    states.append([path, int(stat.length), int(stat.mtime_nsec)])
  return states


def changed_files(there, here):
  """'added …; removed …; changed …' naming the files of `here` that differ from `there`
  (`file_states` lists), or '' when none does."""
  before = {path: (size, modified) for path, size, modified in there}
  after = {path: (size, modified) for path, size, modified in here}
  added = [path for path in after if path not in before]
  removed = [path for path in before if path not in after]
  changed = []
  for path in after:
    if path in before and after[path] != before[path]:
      (size_there, time_there), (size_here, time_here) = before[path], after[path]
      what = (f"{size_there:,} bytes there, {size_here:,} here" if size_there != size_here else
              f"the same size, modified since ({time_there} ns there, {time_here} ns here)")
      changed.append(f"{path} ({what})")
  parts = [(f"{len(names)} file(s) {label}: " + ", ".join(names[:5]) + (" …" if len(names) > 5 else ""))
           for label, names in (("added", added), ("removed", removed), ("changed", changed)) if names]
  return "; ".join(parts)


def chunk_lines(plan, index):
  """(document number within the chunk, line) of chunk `index` (`corpus_reading`'s rule)."""
  if plan.tfds:
    shard = index if len(plan.chunks) > 1 else None
    pieces = [corpus_reading.tfds_lines(plan.tfds["name"], plan.tfds["text_key"], plan.tfds["split"],
                                        plan.tfds["data_dir"], shard)]
  else:
    sizes = {path: size for path, size, _ in plan.files}
    pieces = (corpus_reading.piece_lines(path, start, end, sizes[path], plan.documents, plan.chunk_bytes)
              for path, start, end in plan.chunks[index])
  yield from corpus_reading.numbered_lines(pieces)


_ENCODERS = {}


def encoder_of(plan):
  """The plan's `zoo.text.TextEncoder`, built once per process (a Beam worker packs many chunks)."""
  from zoo.text import TextEncoder
  key = (vocab_checksum(plan.vocab), plan.lower_case, json.dumps(plan.tokenizer, sort_keys=True))
  if key not in _ENCODERS:
    _ENCODERS[key] = TextEncoder(plan.vocab, seq_length=3, lower_case=plan.lower_case, **plan.tokenizer)
  return _ENCODERS[key]


class _Packer:
  """The packing pipeline of one plan's tokenizer and T, built once per process and run once per chunk.

  Building the `tf.data` pipeline traces the tokenizer (about a second); creating an
  iterator of the built one does not, so each chunk only restarts it on its own lines.
  """

  def __init__(self, plan):
    import tensorflow as tf
    encoder = encoder_of(plan)
    self.lines = None
    # Batches of lines come from Python (from_generator costs about 150 µs an element).
    texts = tf.data.Dataset.from_generator(lambda: _batches(self.lines), output_signature=(
        tf.TensorSpec([None], tf.int64), tf.TensorSpec([None], tf.string)))
    ids = texts.map(lambda numbers, batch: _by_document(numbers, encoder.tokenize(batch)))
    examples = documents.concatenate(ids.unbatch(), plan.seq_length, cls_id=encoder.cls_id,
                                     sep_id=encoder.sep_id, pad_id=encoder.pad_id)
    self.dataset = examples.batch(BATCH_LINES).prefetch(2)
    self.lock = threading.Lock()

  def examples(self, lines):
    """Batches of the examples packed from `(document, line)` pairs (one run at a time per process)."""
    with self.lock:
      self.lines = lines
      try:
        yield from self.dataset.as_numpy_iterator()
      finally:
        self.lines = None


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


_PACKERS = {}


def _packer(plan):
  key = (vocab_checksum(plan.vocab), plan.lower_case, json.dumps(plan.tokenizer, sort_keys=True),
         plan.seq_length)
  if key not in _PACKERS:
    _PACKERS[key] = _Packer(plan)
  return _PACKERS[key]


def pack_chunk(plan, index, bar=None):
  """Packs chunk `index` into its packed-chunk file and index (step 2); returns the index."""
  import numpy as np
  import tensorflow as tf

  encoder = encoder_of(plan)
  counter = dict(documents=0, error=None, bytes=0)
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
  groups = [[] for _ in range(shards)]
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
    for group in groups:
      starts.append(position)
      for record in group:
        writer.write(record)
        position += len(record) + 16
  chunk = dict(chunk=index, documents=counter["documents"], examples=count,
               counts=[len(group) for group in groups], full_examples=full.tolist(), tokens=tokens.tolist(),
               starts=starts)
  write_atomically(plan.chunk_path(index, "json"), json.dumps(chunk) + "\n")
  return chunk


def packed_chunk(plan, index):
  """The index of chunk `index` if it is packed already, else None."""
  import tensorflow as tf
  path = plan.chunk_path(index, "json")
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path, "r") as file:
    return json.loads(file.read())


def ensure_chunk(plan, index, bar=None):
  """The index of chunk `index`: kept from an earlier run, else packed now."""
  return packed_chunk(plan, index) or pack_chunk(plan, index, bar)


def refusal(plan, chunks):
  """Why the packed chunks cannot make the shards (no text, fewer examples than shards), or None."""
  examples = sum(chunk["examples"] for chunk in chunks)
  if not sum(sum(chunk["tokens"]) for chunk in chunks):
    return f"{plan.where()}: the corpus holds no text"
  if examples < plan.shards:
    plural = "s" * (examples != 1)
    return (f"{plan.where()}: the corpus makes {examples} example{plural} of {plan.seq_length} "
            f"ids, fewer than the {plan.shards} shards asked for, which would leave shards empty: use "
            f"--shards {examples} or fewer")
  return None


def _offsets(chunks):
  """The global ordinal of each chunk's first example."""
  offsets, total = [], 0
  for chunk in chunks:
    offsets.append(total)
    total += chunk["examples"]
  return offsets


def _records(path, start, count):
  """`count` records of a TFRecord file from byte `start`."""
  import tensorflow as tf
  with tf.io.gfile.GFile(path, "rb") as file:
    file.seek(start)
    for _ in range(count):
      length = struct.unpack("<Q", file.read(12)[:8])[0]
      yield file.read(length)
      file.read(4)


def write_shard(plan, shard, chunks):
  """Writes shard `shard` from the packed chunks (step 3), through a temporary file beside it."""
  import tensorflow as tf
  chunks = sorted(chunks, key=lambda chunk: chunk["chunk"])
  path = plan.shard_path(shard)
  options = tf.io.TFRecordOptions(compression_type="GZIP" if plan.compress else None)
  with atomic_path(path) as temporary, tf.io.TFRecordWriter(temporary, options) as writer:
    for chunk, offset in zip(chunks, _offsets(chunks), strict=True):
      group = (shard - offset) % plan.shards
      if chunk["counts"][group]:
        for record in _records(plan.chunk_path(chunk["chunk"], "tfrecord"), chunk["starts"][group],
                               chunk["counts"][group]):
          writer.write(record)


def metadata_of(plan, chunks):
  """`metadata.json`'s contents, from the packed chunks' indexes alone."""
  chunks = sorted(chunks, key=lambda chunk: chunk["chunk"])
  per_shard = [dict(file=name, examples=0, full_examples=0, tokens=0) for name in plan.names]
  for chunk, offset in zip(chunks, _offsets(chunks), strict=True):
    for shard, entry in enumerate(per_shard):
      group = (shard - offset) % plan.shards
      entry["examples"] += chunk["counts"][group]
      entry["full_examples"] += chunk["full_examples"][group]
      entry["tokens"] += chunk["tokens"][group]
  encoder = encoder_of(plan)
  metadata = dict(
      format=FORMAT, seq_length=plan.seq_length, lower_case=plan.lower_case, tokenizer=plan.tokenizer,
      vocab_size=len(plan.vocab), vocab_sha256=vocab_checksum(plan.vocab), special_ids=encoder.special_ids,
      compress=plan.compress, inputs=plan.inputs, files=plan.files,
      documents=sum(chunk["documents"] for chunk in chunks),
      examples=sum(entry["examples"] for entry in per_shard),
      full_examples=sum(entry["full_examples"] for entry in per_shard),
      tokens=sum(entry["tokens"] for entry in per_shard), chunk_bytes=plan.chunk_bytes,
      document_separator=plan.documents, chunks=len(chunks),
      shards=per_shard)
  if plan.tfds:
    metadata["tfds"] = plan.settings()["tfds"]
  return metadata


def finish(plan, chunks):
  """Writes `vocab.txt` and `metadata.json`, then removes the work folder; returns the metadata."""
  import tensorflow as tf

  metadata = metadata_of(plan, chunks)
  write_atomically(os.path.join(plan.out, "vocab.txt"), "".join(f"{token}\n" for token in plan.vocab))
  write_atomically(os.path.join(plan.out, METADATA_FILE), json.dumps(metadata, indent=2) + "\n")
  if tf.io.gfile.exists(plan.work):
    tf.io.gfile.rmtree(plan.work)
  return metadata


def discard_work(plan):
  """Removes the work folder (after a refusal: nothing of it can serve a rerun with other flags)."""
  import tensorflow as tf
  if tf.io.gfile.exists(plan.work):
    tf.io.gfile.rmtree(plan.work)


def metadata_settings(metadata):
  """A finished output's settings, as `Plan.settings` gives them."""
  settings = dict(seq_length=metadata.get("seq_length"), lower_case=metadata.get("lower_case"),
                  tokenizer=metadata.get("tokenizer"), vocab_sha256=metadata.get("vocab_sha256"),
                  shards=len(metadata.get("shards", [])), compress=metadata.get("compress"),
                  chunk_bytes=metadata.get("chunk_bytes"), documents=metadata.get("document_separator"),
                  inputs=metadata.get("inputs"))
  if "tfds" in metadata:
    settings["tfds"] = metadata["tfds"]
  return settings


def differences(there, here):
  """'--seq-length: 128 there, 64 here; ...' for the settings that differ."""
  keys = [key for key in SETTING_NAMES if key in there or key in here]
  return "; ".join(f"{SETTING_NAMES[key]}: {json.dumps(there.get(key))} there, "
                   f"{json.dumps(here.get(key))} here" for key in keys if there.get(key) != here.get(key))


def corpus_changes(there, here, what):
  """The differences of a recorded corpus (`there`: `file_states` or None) from this run's, or ''."""
  if here is None:   # a `tfds:` corpus: its name and split are among the settings
    return ""
  if there is None:
    return f"{what} records no corpus files (written before they were recorded), so they cannot be compared"
  return changed_files(there, here)


def _report(message):
  print(f"tpu.pretraining_data: {message}", file=sys.stderr, flush=True)


def _remove_temporaries(folder):
  """Removes the temporary files that killed runs left in `folder`."""
  import tensorflow as tf
  if tf.io.gfile.isdir(folder):
    for name in tf.io.gfile.listdir(folder):
      if is_temporary(name):
        tf.io.gfile.remove(os.path.join(folder, name))


def plan_run(inputs, vocab, seq_length, out, shards, *, lower_case=None, compress=False, text_key="text",
             split="train", data_dir=None, chunk_mb=CHUNK_MB, documents="blank-line", overwrite=False):
  """Checks the flags and the output folder; returns `(plan, metadata)`, metadata if it is complete already.

  Creates the output and work folders and `plan.json`; removes stale temporary files;
  refuses output made with other settings (`CorpusError` naming them) unless `overwrite`,
  which removes it.
  """
  import tensorflow as tf

  from zoo.model_dir import read_json
  if seq_length < 3:
    raise CorpusError(f"--seq-length must be at least 3 ([CLS] token [SEP]), got {seq_length}")
  if shards < 1:
    raise CorpusError(f"--shards must be at least 1, got {shards}")
  chunk_bytes = int(round(chunk_mb * 1e6))
  if chunk_bytes < corpus_reading.MIN_CHUNK_BYTES:
    raise CorpusError(f"--chunk-mb must be at least {corpus_reading.MIN_CHUNK_BYTES / 1e6:g} "
                      f"({corpus_reading.MIN_CHUNK_BYTES:,} bytes), got {chunk_mb}")
  corpus_reading.check_documents(documents)
  encoder = load_encoder(vocab, lower_case)
  tfds_name = tfds_datasets.dataset_name(inputs[0]) if len(inputs) == 1 else None
  if tfds_name:
    files = None
    chunks = [[shard] for shard in range(corpus_reading.tfds_shards(tfds_name, split, data_dir))]
    tfds = dict(name=tfds_name, text_key=text_key, split=split, data_dir=data_dir)
  else:
    files = file_states(input_files(inputs))
    chunks, tfds = corpus_reading.chunk_pieces(files, chunk_bytes), None
  plan = Plan(out=out, seq_length=seq_length, shards=shards, compress=compress, chunk_bytes=chunk_bytes,
              vocab=encoder.vocab, lower_case=encoder.lower_case, tokenizer=tokenizer_settings(encoder),
              inputs=list(inputs), files=files, chunks=chunks, tfds=tfds, documents=documents)

  tf.io.gfile.makedirs(out)
  metadata_path = os.path.join(out, METADATA_FILE)
  plan_path = os.path.join(plan.work, PLAN_FILE)
  shard_files = sorted(name for name in tf.io.gfile.listdir(out)
                       if name.startswith(f"{SHARD_PREFIX}-") and ".tfrecord" in name)
  if overwrite:
    for name in shard_files + [METADATA_FILE]:
      if tf.io.gfile.exists(os.path.join(out, name)):
        tf.io.gfile.remove(os.path.join(out, name))
    discard_work(plan)
    shard_files = []
  _remove_temporaries(out)
  _remove_temporaries(plan.work)
  here = plan.settings()
  again = "use --overwrite to replace it, or another --out"
  if tf.io.gfile.exists(metadata_path):
    try:
      metadata = read_json(metadata_path)
    except ValueError as error:
      raise CorpusError(f"{metadata_path}: not readable ({error}): {again}") from None
    different = differences(metadata_settings(metadata), here)
    if different:
      raise CorpusError(f"{out} holds pre-training data made with other settings ({different}): {again}")
    changes = corpus_changes(metadata.get("files"), files, METADATA_FILE)
    if changes:
      raise CorpusError(f"{out} holds pre-training data of a corpus that has changed since ({changes}): "
                        f"{again}")
    if all(name in shard_files for name in plan.names):
      discard_work(plan)
      _report(f"{out} is complete already (metadata.json and {shards} shards made with these settings): "
              "nothing to do")
      return plan, metadata
  others = [name for name in shard_files if name not in plan.names]
  if others:
    raise CorpusError(f"{out} holds shards of another --shards or --compress ({', '.join(others[:3])}"
                      f"{' …' if len(others) > 3 else ''}): {again}")
  here_plan = dict(here, files=files)
  if tf.io.gfile.exists(plan_path):
    recorded = read_json(plan_path)
    different = differences(recorded, here_plan)
    if different:
      raise CorpusError(f"{out} holds an interrupted run with other settings ({different}): {again}")
    changes = corpus_changes(recorded.get("files"), files, PLAN_FILE)
    if changes:
      raise CorpusError(f"{out} holds an interrupted run of a corpus that has changed since ({changes}): "
                        f"{again}")
  elif shard_files and not tf.io.gfile.exists(metadata_path):
    raise CorpusError(f"{out} holds shards ({shard_files[0]} …) without the metadata.json or the work folder "
                      f"of a run of this writer, so their settings are unknown: {again}")
  else:
    write_atomically(plan_path, json.dumps(here_plan, indent=1) + "\n")
  return plan, None


def report_kept(plan):
  """Says on stderr what an interrupted run left that this one keeps; returns the shards still to write."""
  import tensorflow as tf
  packed = sum(tf.io.gfile.exists(plan.chunk_path(index, "json")) for index in range(len(plan.chunks)))
  todo = [index for index in range(plan.shards) if not tf.io.gfile.exists(plan.shard_path(index))]
  if packed or len(todo) < plan.shards:
    _report(f"resuming in {plan.out}: keeping {packed} of {len(plan.chunks)} packed chunks and "
            f"{plan.shards - len(todo)} of {plan.shards} shards; packing {len(plan.chunks) - packed} chunks "
            f"and writing {len(todo)} shards")
  return todo


class _Progress:
  """Bytes read (or documents), tokens per second and the ETA on stderr."""

  def __init__(self, total, unit):
    from tqdm import tqdm
    self.bar = tqdm(total=total, unit=unit, unit_scale=True, file=sys.stderr, dynamic_ncols=True,
                    mininterval=0.5 if sys.stderr.isatty() else 10.0, desc="tokenizing")
    self.started = time.monotonic()
    self.tokens = 0

  def update(self, amount, tokens):
    self.tokens += tokens
    rate = self.tokens / max(time.monotonic() - self.started, 1e-9)
    self.bar.set_postfix_str(f"{self.tokens:,} tokens, {rate:,.0f} tokens/s", refresh=False)
    self.bar.update(amount)

  def close(self):
    self.bar.close()


def retrying(step, what, attempts=None, first_wait=None):
  """`step()`, again after transient storage errors (`records.is_transient`) with doubling waits, at
  most `attempts` times in all; then `StorageUnavailable`. Any other error is raised at once."""
  attempts = ATTEMPTS if attempts is None else attempts
  wait = FIRST_WAIT_SECONDS if first_wait is None else first_wait
  for attempt in range(1, attempts + 1):
    try:
      return step()
    except Exception as error:
      if not is_transient(error):
        raise
      if attempt == attempts:
        raise StorageUnavailable(f"{what}: {type(error).__name__}: {error} (after {attempts} attempts); the "
                                 "work done so far is kept: rerun the same command to continue") from None
      _report(f"{what}: {type(error).__name__}: {error}; retrying in {wait:g} s (attempt {attempt + 1} of "
              f"{attempts})")
      time.sleep(wait)
      wait *= 2


def write_pretraining_data(inputs, vocab, seq_length, out, shards, *, lower_case=None, compress=False,
                           text_key="text", split="train", data_dir=None, progress=True, chunk_mb=CHUNK_MB,
                           documents="blank-line", overwrite=False):
  """Writes the shards, `vocab.txt` and `metadata.json` in this process (see the module docstring).

  Args:
    inputs: file globs, or one TFDS spec ("tfds:NAME[/CONFIG]").
    vocab: the vocabulary file, or a model directory (its vocabulary, casing and tokenizer settings).
    seq_length: T, at least 3.
    out: the output directory (local or gs://).
    shards: N, at least 1.
    lower_case: uncased tokenization (as the vocabulary was built); None: the model directory's, else True.
    compress: GZIP the shards (`.tfrecord.gz`).
    text_key, split, data_dir: for a TFDS input.
    progress: show a progress bar on stderr.
    chunk_mb: MB of corpus per chunk (the unit of packing and resume; part of the output's definition).
    documents: "blank-line" (a blank line between documents) or "line" (one document per line).
    overwrite: replace output made with other settings instead of refusing it.

  Returns:
    The metadata.

  Raises:
    CorpusError: naming the file (and line) at fault, or the settings an existing output differs in;
      the chunks packed before it are kept.
    StorageUnavailable: a step kept meeting transient storage errors (`retrying`); the work is kept.
  """
  plan, metadata = plan_run(inputs, vocab, seq_length, out, shards, lower_case=lower_case, compress=compress,
                            text_key=text_key, split=split, data_dir=data_dir, chunk_mb=chunk_mb,
                            documents=documents, overwrite=overwrite)
  if metadata is not None:
    return metadata
  todo = report_kept(plan)
  bar = _Progress(plan.corpus_bytes(), "doc" if plan.tfds else "B") if progress else None
  try:
    chunks = []
    for index in range(len(plan.chunks)):
      chunk = retrying(lambda index=index: packed_chunk(plan, index), f"chunk {index} of {plan.where()}")
      if chunk is not None and bar is not None:
        bar.update(plan.piece_bytes(index), sum(chunk["tokens"]))
      chunks.append(chunk or retrying(lambda index=index: pack_chunk(plan, index, bar),
                                      f"packing chunk {index} of {plan.where()}"))
  except CorpusError as error:   # a fault of the corpus: the chunks packed before it stay
    packed = sum(chunk is not None for chunk in chunks)
    raise CorpusError(f"{error} ({packed} chunk(s) packed before it are kept in {plan.work})") from None
  finally:
    if bar is not None:
      bar.close()
  problem = refusal(plan, chunks)
  if problem:
    discard_work(plan)
    raise CorpusError(problem)
  for shard in todo:
    retrying(lambda shard=shard: write_shard(plan, shard, chunks), f"writing {plan.shard_path(shard)}")
  return finish(plan, chunks)

"""Pre-tokenized records: the shard format, its writer and the `tfrecord:GLOB` source.

`write_pretraining_data` (the command `python -m tpu.pretraining_data`) turns a text
corpus into full-length token-id examples in TFRecord shards with a
`metadata.json` beside them; `tfrecord:DIR/*.tfrecord` reads them back for the training
job (`tpu.data.pipeline` parses them with core TensorFlow ops only, so the pipeline
runs on TPU pod hosts).

Format (`FORMAT`): each record is a `tf.train.Example` with one int64 feature
`input_word_ids` of length T; `metadata.json` holds T, the casing, the tokenizer's
special tokens and [CLS] token type, the vocabulary's size and SHA-256, the
special-token ids and the counts per shard and in all; `vocab.txt` is the vocabulary.
See `tpu/pretraining_data.py` for how examples are made.
"""

import dataclasses
import hashlib
import json
import os
import sys
import time

from tpu.data import documents
from tpu.data import tfds_datasets
from tpu.data.registry import DataError
from tpu.data.registry import DataSource
from tpu.data.registry import Source
from tpu.data.registry import matching_files
from tpu.data.registry import register

METADATA_FILE = "metadata.json"
FORMAT = "zoo-pretraining/1"
SHARD_PREFIX = "pretrain"
FEATURE = "input_word_ids"
# Lines tokenized per call of the tokenizer.
BATCH_LINES = 2048


class CorpusError(ValueError):
  """The corpus or vocabulary cannot be used; the message names the file (and line)."""


def shard_name(index, count, compress):
  return f"{SHARD_PREFIX}-{index:05d}-of-{count:05d}.tfrecord" + (".gz" if compress else "")


def input_files(patterns):
  """The files of local or `gs://` globs, sorted, without repeats; a pattern matching nothing is an error."""
  import tensorflow as tf
  files = []
  for pattern in patterns:
    matched = sorted(path for path in tf.io.gfile.glob(os.path.expanduser(pattern))
                     if not tf.io.gfile.isdir(path))
    if not matched:
      raise CorpusError(f"{pattern}: no file matches this pattern")
    files.extend(path for path in matched if path not in files)
  return files


def _file_lines(path):
  """(line number, text) of a UTF-8 file, streamed; errors name the file and line."""
  import tensorflow as tf
  try:
    with tf.io.gfile.GFile(path, "rb") as file:
      for number, raw in enumerate(file, start=1):
        try:
          yield number, raw.decode("utf-8")
        except UnicodeDecodeError as error:
          raise CorpusError(f"{path}:{number}: not UTF-8 (byte {error.start} of the line: "
                            f"{raw[error.start:error.start + 4]!r})") from None
  except tf.errors.OpError as error:
    raise CorpusError(f"{path}: cannot be read: {error.message}") from None


def text_file_lines(files):
  """(document index, line) of the corpus files; blank lines and file ends separate documents."""
  document, open_document = 0, False
  for path in files:
    for _, line in _file_lines(path):
      line = line.strip()
      if not line:
        if open_document:
          document, open_document = document + 1, False
        continue
      open_document = True
      yield document, line
    if open_document:
      document, open_document = document + 1, False


def tfds_lines(name, text_key, split, data_dir):
  """(document index, line) of a TFDS dataset, one document per example, read with the TFDS API."""
  import tensorflow_datasets as tfds
  try:
    dataset = tfds.load(name, split=split, data_dir=data_dir, shuffle_files=False)
  except Exception as error:   # TFDS raises many kinds: not found, not prepared, bad config
    raise CorpusError(f"{tfds_datasets.spec_of(name)}: cannot be loaded: {error}") from None
  if text_key not in dataset.element_spec:
    raise CorpusError(f"{tfds_datasets.spec_of(name)}: no feature {text_key!r}; features: "
                      f"{sorted(dataset.element_spec)} (choose one with --text-key)")
  for document, example in enumerate(dataset.as_numpy_iterator()):
    for line in example[text_key].decode("utf-8", errors="replace").splitlines():
      if line.strip():
        yield document, line.strip()


@dataclasses.dataclass
class ShardStats:
  """A shard's examples, its full-length ones, and its tokens (ids other than [CLS], [SEP], [PAD])."""

  examples: int = 0
  full_examples: int = 0
  tokens: int = 0


def serialize(ids):
  """One `tf.train.Example` with the int64 feature `input_word_ids`."""
  import tensorflow as tf
  feature = tf.train.Feature(int64_list=tf.train.Int64List(value=ids))
  return tf.train.Example(features=tf.train.Features(feature={FEATURE: feature})).SerializeToString()


def vocab_checksum(tokens):
  """SHA-256 of the vocabulary as written (one token per line)."""
  return hashlib.sha256("".join(f"{token}\n" for token in tokens).encode("utf-8")).hexdigest()


def load_encoder(vocab_path, lower_case=None):
  """A `zoo.text.TextEncoder` of a vocabulary file or of a model directory; errors name the file.

  A model directory (a `python -m zoo.convert` output or a training run: `config.json`
  and `vocab.txt`) also gives the casing and the tokenizer settings, such as a Funnel
  checkpoint's `<cls>`-style special tokens and [CLS] token type. `lower_case` None:
  the directory's casing, else uncased; a different explicit one is refused.
  """
  import tensorflow as tf

  from zoo.model_dir import ModelDir
  from zoo.text import TextEncoder
  from zoo.text import load_vocab
  settings, where = {}, vocab_path
  try:
    if tf.io.gfile.isdir(vocab_path):
      model_dir = ModelDir(vocab_path)
      if not model_dir.has_config() or not model_dir.has_vocab():
        raise CorpusError(f"{vocab_path}: a directory --vocab must be a model directory with config.json and "
                          "vocab.txt (a `python -m zoo.convert` output or a training run)")
      config = model_dir.read_config()
      where = model_dir.vocab_path
      tokens = model_dir.read_vocab()
      settings = dict(config.get("tokenizer") or {})
      saved = config.get("lower_case")
      if lower_case is not None and saved is not None and bool(saved) != lower_case:
        casing = "uncased" if saved else "cased"
        raise CorpusError(f"{model_dir.config_path}: the checkpoint is {casing}, but "
                          f"--lower-case={lower_case} was given: leave it out to use the checkpoint's casing")
      lower_case = saved if lower_case is None else lower_case
    else:
      tokens = load_vocab(vocab_path)
    return TextEncoder(tokens, seq_length=3, lower_case=True if lower_case is None else bool(lower_case),
                       **settings)
  except FileNotFoundError:
    raise CorpusError(f"{vocab_path}: vocabulary file not found") from None
  except CorpusError:
    raise
  except ValueError as error:
    message = str(error)
    raise CorpusError(message if message.startswith(where) else f"{where}: {message}") from None


def tokenizer_settings(encoder):
  """The records' tokenizer settings for `metadata.json` (besides casing): special tokens, [CLS] type."""
  settings = encoder.settings()
  return {key: settings[key] for key in ("special_tokens", "cls_type_id", "max_chars_per_word")}


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

  def close(self, complete=False):
    if complete and self.bar.total:
      self.bar.n = self.bar.total   # lines are counted without their line breaks
      self.bar.refresh()
    self.bar.close()


def _remove_stale_temporaries(out, names):
  """Removes the temporary shard files that killed runs left behind."""
  import tensorflow as tf
  for name in tf.io.gfile.listdir(out):
    if any(name.startswith(f".{shard}.tmp-") for shard in names):
      tf.io.gfile.remove(os.path.join(out, name))


def write_pretraining_data(inputs, vocab, seq_length, out, shards, *, lower_case=None, compress=False,
                           text_key="text", split="train", data_dir=None, progress=True):
  """Writes the shards, `vocab.txt` and `metadata.json` (see the module docstring); returns the metadata.

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

  Raises:
    CorpusError: naming the file (and line) at fault.
  """
  import numpy as np
  import tensorflow as tf

  from zoo.model_dir import write_atomically

  if seq_length < 3:
    raise CorpusError(f"--seq-length must be at least 3 ([CLS] token [SEP]), got {seq_length}")
  if shards < 1:
    raise CorpusError(f"--shards must be at least 1, got {shards}")
  encoder = load_encoder(vocab, lower_case)
  lower_case = encoder.lower_case
  tfds_name = tfds_datasets.dataset_name(inputs[0]) if len(inputs) == 1 else None
  if tfds_name:
    lines, total, unit = tfds_lines(tfds_name, text_key, split, data_dir), None, "doc"
    sources = [inputs[0]]
  else:
    sources = input_files(inputs)
    total, unit = sum(tf.io.gfile.stat(path).length for path in sources), "B"
    lines = text_file_lines(sources)

  tf.io.gfile.makedirs(out)
  special_ids = encoder.special_ids
  names = [shard_name(index, shards, compress) for index in range(shards)]
  done = [tf.io.gfile.exists(os.path.join(out, name)) for name in names]
  _remove_stale_temporaries(out, names)
  options = tf.io.TFRecordOptions(compression_type="GZIP" if compress else None)
  # Shards are streamed into a temporary file beside their name and renamed when complete: a shard
  # can be gigabytes, which `zoo.model_dir.write_atomically` (content in memory) cannot take.
  temporary = {index: os.path.join(out, f".{names[index]}.tmp-{os.getpid()}")
               for index in range(shards) if not done[index]}
  writers = {index: tf.io.TFRecordWriter(path, options) for index, path in temporary.items()}
  stats = {index: ShardStats() for index in range(shards)}
  bar = _Progress(total, unit) if progress else None
  counter = dict(documents=0, error=None)
  not_tokens = np.array([encoder.cls_id, encoder.sep_id, encoder.pad_id])

  def pieces():
    last = -1
    try:
      for document, line in lines:
        new = document != last
        if new:
          last, counter["documents"] = document, document + 1
        if bar is not None:
          bar.update(len(line.encode("utf-8")) + 1 if unit == "B" else int(new), 0)
        yield document, line
    except CorpusError as error:   # raised again below, as it is (tf.data would wrap it)
      counter["error"] = error

  complete = False
  try:
    texts = tf.data.Dataset.from_generator(pieces, output_signature=(
        tf.TensorSpec([], tf.int64), tf.TensorSpec([], tf.string)))
    tokens = texts.batch(BATCH_LINES).map(lambda documents, batch: (documents, encoder.tokenize(batch)))
    examples = documents.concatenate(tokens.unbatch(), seq_length, cls_id=encoder.cls_id,
                                     sep_id=encoder.sep_id, pad_id=encoder.pad_id)
    for number, batch in enumerate(examples.batch(BATCH_LINES).prefetch(2).as_numpy_iterator()):
      ids = batch["input_word_ids"].astype(np.int64)
      real = batch["input_mask"].sum(axis=1)
      counts = (~np.isin(ids, not_tokens)).sum(axis=1)
      for row in range(len(ids)):
        index = (number * BATCH_LINES + row) % shards   # examples dealt to the shards in turn
        shard = stats[index]
        shard.examples += 1
        shard.full_examples += int(real[row] == seq_length)
        shard.tokens += int(counts[row])
        if index in writers:
          writers[index].write(serialize(ids[row]))
      if bar is not None:
        bar.update(0, int(counts.sum()))
    if counter["error"] is not None:
      raise counter["error"]
    complete = True
  except BaseException:
    for index, writer in writers.items():
      writer.close()
      if tf.io.gfile.exists(temporary[index]):
        tf.io.gfile.remove(temporary[index])
    raise
  finally:
    if bar is not None:
      bar.close(complete)

  for writer in writers.values():
    writer.close()
  if not sum(shard.tokens for shard in stats.values()):
    for path in temporary.values():
      tf.io.gfile.remove(path)
    where = ", ".join(sources[:5]) + (" …" if len(sources) > 5 else "")
    raise CorpusError(f"{where}: the corpus holds no text")
  for index in range(shards):
    if not done[index]:
      tf.io.gfile.rename(temporary[index], os.path.join(out, names[index]), overwrite=True)
  documents_read = counter["documents"]

  write_atomically(os.path.join(out, "vocab.txt"), "".join(f"{token}\n" for token in encoder.vocab))
  per_shard = [dict(file=names[index], **dataclasses.asdict(stats[index])) for index in range(shards)]
  metadata = dict(
      format=FORMAT, seq_length=seq_length, lower_case=lower_case, tokenizer=tokenizer_settings(encoder),
      vocab_size=encoder.vocab_size,
      vocab_sha256=vocab_checksum(encoder.vocab), special_ids=special_ids, compress=compress,
      inputs=list(inputs), documents=documents_read,
      examples=sum(shard["examples"] for shard in per_shard),
      full_examples=sum(shard["full_examples"] for shard in per_shard),
      tokens=sum(shard["tokens"] for shard in per_shard), shards=per_shard)
  write_atomically(os.path.join(out, METADATA_FILE), json.dumps(metadata, indent=2) + "\n")
  return metadata


def read_metadata(folder):
  """The `metadata.json` of a pre-training data directory; errors name the file."""
  from zoo.model_dir import read_json
  path = os.path.join(folder, METADATA_FILE)
  try:
    metadata = read_json(path)
  except FileNotFoundError:
    raise CorpusError(f"{path} does not exist: pre-training records come with the metadata "
                      "`python -m tpu.pretraining_data` writes beside them") from None
  if metadata.get("format") != FORMAT:
    raise CorpusError(f"{path}: format {metadata.get('format')!r} is not {FORMAT!r}")
  return metadata


@register
class RecordsSource(Source):
  scheme = "tfrecord"
  usage = "tfrecord:GLOB"
  description = "pre-tokenized shards of `python -m tpu.pretraining_data` (one folder's)"
  options = frozenset({"data_type"})
  data_types = ("text",)

  def load(self, target, split, *, data_type):
    self.check_data_type(target, data_type)
    return load_records(target)


def spec_of(folder):
  """The spec of the shards in `folder`."""
  return RecordsSource().spec(os.path.join(folder, f"{SHARD_PREFIX}-*"))


def load_records(pattern):
  """Pre-tokenized shards and their metadata: a `DataSource` with `files` and `metadata`, no dataset."""
  files = matching_files(pattern)
  folders = sorted({os.path.dirname(path) for path in files})
  if len(folders) > 1:
    raise DataError(pattern, None, f"the shards lie in several folders {folders}; each folder has its own "
                                   "metadata.json: give one folder's shards")
  try:
    metadata = read_metadata(folders[0])
  except CorpusError as error:
    raise DataError(pattern, None, str(error)) from None
  counts = {shard["file"]: shard["examples"] for shard in metadata.get("shards", [])}
  unknown = [path for path in files if os.path.basename(path) not in counts]
  if unknown:
    raise DataError(unknown[0], None, f"not one of the shards its metadata.json lists ({sorted(counts)})")
  return DataSource(None, "text", files=files, metadata=metadata,
                    num_examples=sum(counts[os.path.basename(path)] for path in files))


def parse_records(records, seq_length, pad_id, cls_type_id=0):
  """Serialized `tf.train.Example`s `[B]` -> the encoder's int32 features `[B, T]` (core ops only).

  Token types are 0 but at [CLS] (the first position), which has `cls_type_id` (2 for
  Funnel-Transformer's tokenizer).
  """
  import tensorflow as tf
  parsed = tf.io.parse_example(records, {FEATURE: tf.io.FixedLenFeature([seq_length], tf.int64)})
  ids = tf.cast(parsed[FEATURE], tf.int32)
  return dict(input_word_ids=ids, input_mask=tf.cast(ids != pad_id, tf.int32),
              input_type_ids=documents.cls_token_types(ids, cls_type_id))



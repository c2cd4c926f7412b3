"""Pre-tokenized records: the shard format, its writer and the `tfrecord:GLOB` source.

`tpu.data.shard_writer` (the command `python -m tpu.pretraining_data`, in one process or
as an Apache Beam pipeline) turns a text corpus into full-length token-id examples in
TFRecord shards with a `metadata.json` beside them; `tfrecord:DIR/*.tfrecord` reads them
back for the training job (`tpu.data.pipeline` parses them with core TensorFlow ops only, so the pipeline
runs on TPU pod hosts).

Format (`FORMAT`): each record is a `tf.train.Example` with one int64 feature
`input_word_ids` of length T; `metadata.json` holds T, the casing, the tokenizer's
special tokens and [CLS] token type, the vocabulary's size and SHA-256, the
special-token ids and the counts per shard and in all; `vocab.txt` is the vocabulary.
See `tpu/pretraining_data.py` for how examples are made.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import Any
from typing import TypeVar

from tpu.data import documents
from tpu.data.source_registry import DataError
from tpu.data.source_registry import DataSource
from tpu.data.source_registry import Source
from tpu.data.source_registry import dangling_links
from tpu.data.source_registry import matching_files
from tpu.data.source_registry import missing_file
from tpu.data.source_registry import register

if TYPE_CHECKING:
  import numpy as np

  from zoo.text import TextEncoder

T = TypeVar("T")

METADATA_FILE = "metadata.json"
FORMAT = "zoo-pretraining/1"
SHARD_PREFIX = "pretrain"
FEATURE = "input_word_ids"


class CorpusError(ValueError):
  """The corpus or vocabulary cannot be used; the message names the file (and line)."""


class StorageUnavailable(RuntimeError):
  """Reads or writes kept failing with transient errors (storage unavailable, timeouts) through
  every retry; the work done so far is kept for a rerun."""


def is_transient(error: BaseException) -> bool:
  """Whether `error` is one storage gives and takes back (gs:// unavailable, a deadline, a reset
  connection), worth retrying, rather than a fault of the corpus."""
  import tensorflow as tf
  transient = (tf.errors.UnavailableError, tf.errors.DeadlineExceededError, tf.errors.AbortedError,
               tf.errors.ResourceExhaustedError, ConnectionError, TimeoutError)
  return isinstance(error, transient)


# Transient storage errors are retried with doubling waits from `FIRST_WAIT_SECONDS`, each at most
# `MAX_WAIT_SECONDS`, until `RETRY_SECONDS` have passed since the first failure (`--retry-seconds`):
# an outage of a few minutes is waited out, a longer one ends the run with its work kept.
FIRST_WAIT_SECONDS = 1.0
MAX_WAIT_SECONDS = 60.0
RETRY_SECONDS = 300.0


# An error's text in a retry line or `StorageUnavailable`, at most (storage errors can run to many lines).
ERROR_CHARS = 100


def brief(error: BaseException) -> str:
  """`'Type: text'` of an error, on one line of at most about `ERROR_CHARS` characters."""
  text = " ".join(str(error).split())
  if len(text) > ERROR_CHARS:
    text = text[:ERROR_CHARS - 1] + "…"
  return f"{type(error).__name__}: {text}"


def retrying(step: Callable[[], T], what: str, retry_seconds: float | None = None) -> T:
  """`step()`, again after transient storage errors (`is_transient`) with doubling waits (from
  `FIRST_WAIT_SECONDS`, at most `MAX_WAIT_SECONDS` each) while less than `retry_seconds` (default
  `RETRY_SECONDS`) have passed since the first; then `StorageUnavailable` naming `what`. Any other
  error is raised at once. Each retry is said on stderr in one short line: `what` (the step and its
  file or chunk, briefly), the error's type and text (`brief`; a corpus reader's leads with the failing
  file) and the wait."""
  budget = RETRY_SECONDS if retry_seconds is None else retry_seconds
  wait, first, attempt = FIRST_WAIT_SECONDS, None, 1
  while True:
    try:
      return step()
    except Exception as error:
      if not is_transient(error):
        raise
      now = time.monotonic()
      first = now if first is None else first
      left = budget - (now - first)
      if left <= 0:
        raise StorageUnavailable(f"{what}: {brief(error)} (still failing after {attempt} "
                                 f"attempts over {now - first:.0f} s; --retry-seconds {budget:g}); the work "
                                 "done so far is kept: rerun the same command to continue") from None
      wait = min(wait, left)
      print(f"tpu.pretraining_data: {what}: {brief(error)}; retrying in {wait:.3g} s "
            f"(attempt {attempt + 1}, for up to {budget:g} s)", file=sys.stderr, flush=True)
      time.sleep(wait)
      wait, attempt = min(wait * 2, MAX_WAIT_SECONDS), attempt + 1


def shard_name(index: int, count: int, compress: bool) -> str:
  return f"{SHARD_PREFIX}-{index:05d}-of-{count:05d}.tfrecord" + (".gz" if compress else "")


def input_files(patterns: Iterable[str]) -> list[str]:
  """The files of local or `gs://` globs, sorted, without repeats; a pattern matching nothing, or a match
  that is a symbolic link whose target does not exist, is a `CorpusError` naming it."""
  import tensorflow as tf
  files: list[str] = []
  for pattern in patterns:
    matched = sorted(path for path in tf.io.gfile.glob(os.path.expanduser(pattern))
                     if not tf.io.gfile.isdir(path))
    if not matched:
      raise CorpusError(f"{pattern}: no file matches this pattern")
    dangling = dangling_links(matched)
    if dangling:
      raise CorpusError(f"{dangling[0]}: cannot be read: {missing_file(dangling[0])}")
    files.extend(path for path in matched if path not in files)
  return files


def serialize(ids: Sequence[int] | np.ndarray) -> bytes:
  """One `tf.train.Example` with the int64 feature `input_word_ids` (a list or a numpy vector)."""
  import tensorflow as tf
  # A list: protobuf converts numpy integers one by one, about 60 times slower.
  values = ids.tolist() if hasattr(ids, "tolist") else ids
  feature = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
  return tf.train.Example(features=tf.train.Features(feature={FEATURE: feature})).SerializeToString()


def vocab_checksum(tokens: Iterable[str]) -> str:
  """SHA-256 of the vocabulary as written (one token per line)."""
  return hashlib.sha256("".join(f"{token}\n" for token in tokens).encode("utf-8")).hexdigest()


def load_encoder(vocab_path: str, lower_case: bool | None = None) -> TextEncoder:
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
      if settings.get("kind") == "sentencepiece":
        raise CorpusError(f"{model_dir.config_path}: the checkpoint's tokenizer is a SentencePiece model; "
                          "shards are written with WordPiece vocabularies only (fine-tune it on a text "
                          "source)")
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


def tokenizer_settings(encoder: TextEncoder) -> dict[str, Any]:
  """The records' tokenizer settings for `metadata.json` (besides casing): special tokens, [CLS] type."""
  settings = encoder.settings()
  return {key: settings[key] for key in ("special_tokens", "cls_type_id", "max_chars_per_word")}


def read_metadata(folder: str) -> dict[str, Any]:
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
  reads_files = True
  description = "pre-tokenized shards of `python -m tpu.pretraining_data` (one folder's)"
  options = frozenset({"data_type"})
  data_types = ("text",)

  def load(self, target: str, split: str, *, data_type: str | None) -> DataSource:
    self.check_data_type(target, data_type)
    return load_records(target)

  def input_files(self, target: str, data_dir: str | None = None) -> list[str]:
    """The shards and the metadata.json beside them."""
    files = matching_files(target)
    return files + sorted({os.path.join(os.path.dirname(path), METADATA_FILE) for path in files})


def spec_of(folder: str) -> str:
  """The spec of the shards in `folder`."""
  return RecordsSource().spec(os.path.join(folder, f"{SHARD_PREFIX}-*"))


def load_records(pattern: str) -> DataSource:
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


def parse_records(records: Any, seq_length: int, pad_id: int, cls_type_id: int = 0) -> dict[str, Any]:
  """Serialized `tf.train.Example`s `[B]` -> the encoder's int32 features `[B, T]` (core ops only).

  Token types are 0 but at [CLS] (the first position), which has `cls_type_id` (2 for
  Funnel-Transformer's tokenizer).
  """
  import tensorflow as tf
  parsed = tf.io.parse_example(records, {FEATURE: tf.io.FixedLenFeature([seq_length], tf.int64)})
  ids = tf.cast(parsed[FEATURE], tf.int32)
  return dict(input_word_ids=ids, input_mask=tf.cast(ids != pad_id, tf.int32),
              input_type_ids=documents.cls_token_types(ids, cls_type_id))



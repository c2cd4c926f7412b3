"""Before training: settings resolved, data and vocabulary found, the model directory's files written.

`prepare(config)` returns a `Prepared` run: the config with the data's metadata and
the vocabulary size filled in, the vocabulary, and the training and evaluation
sources. It refuses to resume a model directory with other model settings, then writes
`config.json` and `vocab.txt` (atomically); `prepare(config, write=False)` leaves the
writing to `write_files`, for a caller with checks of its own to make first.

On several workers only the chief writes them, and the vocabulary is decided once: a
vocabulary that is learned from the training text is learned by the chief, and the
other workers wait for its `vocab.txt` (at most `VOCAB_WAIT_SECONDS`, and only while the
chief answers).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import Any

import tensorflow as tf

from tpu import cluster
from tpu import data
from tpu.config import TrainConfig
from tpu.config import apply_init_checkpoint
from tpu.config import check_resumable
from tpu.tasks import get_task
from zoo.model_dir import ModelDir
from zoo.model_dir import containing_model_dir
from zoo.text import TextEncoder
from zoo.text import learn_vocab
from zoo.text import load_vocab
from zoo.text.sentencepiece import KIND as SENTENCEPIECE
from zoo.text.vocab import SPECIAL_TOKENS

if TYPE_CHECKING:
  from tpu.strategy import Worker

log = logging.getLogger("tpu.train")

# Examples read to learn a vocabulary when none is given, and their text features (a string or a list).
VOCAB_EXAMPLES = 200_000
TEXT_FEATURES = ("text_a", "text_b", "context", "question", "options", "query", "positive", "negative")
# Seconds a worker waits for the chief's learned vocabulary.
VOCAB_WAIT_SECONDS = 1800


@dataclasses.dataclass
class Prepared:
  config: TrainConfig
  vocab: list
  train: data.DataSource
  evaluation: data.DataSource | None
  model_dir: ModelDir
  # The SentencePiece model of a tokenizer that is one (`spiece.model`), else None.
  sentencepiece: bytes | None = None


def _load_kwargs(config, spec, task, extra=None):
  """The `tpu.data.load` options of the config that the spec's source takes."""
  source = data.source_of(spec)
  kwargs = dict(text_columns=config.text_columns, label_column=config.label_column, data_dir=config.data_dir,
                documents=config.documents, **(extra or {}))
  if source.typed_by_caller or (len(source.data_types) > 1 and task.data_type in source.data_types):
    kwargs["data_type"] = task.data_type   # a table's columns, or which of a source's kinds of data
  return {key: value for key, value in kwargs.items() if value is not None and key in source.options}


def load_sources(config: TrainConfig) -> tuple[data.DataSource, data.DataSource | None]:
  """The training source and the evaluation source (None when there is none).

  Without `--eval-data`, a source with splits is evaluated on its "validation" split.
  """
  task = get_task(config)
  train = data.load(config.data, "train", **_load_kwargs(config, config.data, task))
  task.check_source(train, config.data)
  spec = config.eval_data
  if spec is None and data.source_of(config.data).splits is not None:
    spec = config.data
  evaluation = None
  if spec is not None:
    kwargs = _load_kwargs(config, spec, task, task.eval_load_kwargs(train))
    evaluation = data.load(spec, "validation", **kwargs)
    if evaluation.sentence_pair != train.sentence_pair:
      raise ValueError(f"{spec} and {config.data} differ: one has sentence pairs, the other single texts")
  return train, evaluation


def init_model_dir(config: TrainConfig) -> ModelDir | None:
  """The model directory of `--init-checkpoint` (None for a bare checkpoint without one)."""
  return containing_model_dir(config.init_checkpoint) if config.init_checkpoint else None


def wait_for_vocab(model_dir: ModelDir, worker: Worker, timeout: float | None = None) -> list[str]:
  """The chief's `vocab.txt` in `model_dir`, once it is there (a worker other than the chief).

  Ends with `WorkerLost` as soon as the chief stops answering, else after `timeout` seconds.
  """
  timeout = VOCAB_WAIT_SECONDS if timeout is None else timeout
  log.info("%s waits for the chief's vocabulary %s", worker.name, model_dir.vocab_path)
  deadline = time.monotonic() + timeout
  while not model_dir.has_vocab():
    cluster.check_alive(worker, 0, "the chief's vocabulary")   # a lost chief ends the wait at once
    if time.monotonic() > deadline:
      raise RuntimeError(
          f"{worker.name} waited {timeout:.0f} s for the chief's vocabulary {model_dir.vocab_path}, which "
          "the chief learns from the training data: check that the chief runs and that every worker has "
          "the same --model-dir (a shared file system or gs://), or pass --vocab FILE to every worker")
    time.sleep(1.0)
  return model_dir.read_vocab()


def resolve_vocab(config: TrainConfig, train: data.DataSource, model_dir: ModelDir, init_dir: ModelDir | None,
                  worker: Worker | None = None) -> list[str]:
  """The vocabulary: the model dir's (resuming), --vocab, the init checkpoint's, or learned (by the
  chief; other workers wait for it)."""
  if model_dir.has_vocab():
    saved = model_dir.read_vocab()
    if config.vocab:
      check_same_vocab(config.vocab, load_vocab(config.vocab), model_dir.vocab_path, saved)
    return saved
  if config.vocab:
    return load_vocab(config.vocab)
  if train.metadata is not None:   # pre-tokenized records: their vocabulary
    assert train.files is not None, "records come as files"
    return load_vocab(os.path.join(os.path.dirname(train.files[0]), "vocab.txt"))
  if config.init_checkpoint:
    if init_dir is not None and init_dir.has_vocab():
      return init_dir.read_vocab()
    raise ValueError(f"--init-checkpoint {config.init_checkpoint} has no vocab.txt beside it: pass the "
                     "vocabulary the checkpoint was trained with as --vocab")
  if worker is not None and not worker.is_chief:
    return wait_for_vocab(model_dir, worker)
  texts = train.dataset.take(VOCAB_EXAMPLES)
  texts = texts.flat_map(lambda example: tf.data.Dataset.from_tensor_slices(
      tf.concat([tf.reshape(example[key], [-1]) for key in TEXT_FEATURES if key in example], 0)))
  progress = lambda message: log.info("vocabulary: %s", message)   # noqa: E731
  assert config.lower_case is not None, "a validated config sets the casing"
  return learn_vocab(texts, config.vocab_size, lower_case=config.lower_case, progress=progress)


def check_same_vocab(path: str, vocab: Sequence[str], saved_path: str, saved: Sequence[str]) -> None:
  """Refuses `--vocab` (`path`, read as `vocab`) where the model directory holds another vocabulary
  (`saved_path`): a run's vocabulary cannot change, since its embeddings index it."""
  from tpu.data.records import vocab_checksum
  if vocab_checksum(vocab) != vocab_checksum(saved):
    raise ValueError(
        f"--vocab {path} ({len(vocab)} tokens, SHA-256 {vocab_checksum(vocab)[:12]}…) is not the vocabulary "
        f"of the run in this model directory, {saved_path} ({len(saved)} tokens, SHA-256 "
        f"{vocab_checksum(saved)[:12]}…): a run's vocabulary cannot change. Resume with --vocab {saved_path} "
        "(or without --vocab), or start a new run in another --model-dir")


def resolve_sentencepiece(config: TrainConfig, model_dir: ModelDir,
                          init_dir: ModelDir | None) -> bytes | None:
  """The SentencePiece model of a run whose tokenizer is one: the model dir's (resuming), else the
  init checkpoint's; None for a WordPiece run."""
  if (config.tokenizer or {}).get("kind") != SENTENCEPIECE:
    return None
  for directory in (model_dir, init_dir):
    if directory is not None and directory.has_sentencepiece():
      return directory.read_sentencepiece()
  where = init_dir.path if init_dir is not None else model_dir.path
  raise FileNotFoundError(f"the tokenizer is SentencePiece, but {where} holds no spiece.model")


def check_records(source: data.DataSource, config: TrainConfig, vocab: Sequence[str]) -> None:
  """Refuses pre-tokenized records made with another vocabulary, sequence length or casing."""
  from tpu.data.records import vocab_checksum
  metadata = source.metadata
  assert metadata is not None, "pre-tokenized records come with their metadata"
  where = f"{source.spec} (metadata.json beside the shards)"
  if (config.tokenizer or {}).get("kind") == SENTENCEPIECE:
    raise ValueError(f"{where}: pre-tokenized records are WordPiece, but this run's tokenizer is a "
                     "SentencePiece model: train it on a text source")
  if metadata["seq_length"] != config.seq_length:
    raise ValueError(f"{where} holds examples of {metadata['seq_length']} ids, but --seq-length is "
                     f"{config.seq_length}: use --seq-length {metadata['seq_length']} or rewrite the records")
  if metadata["vocab_sha256"] != vocab_checksum(vocab):
    raise ValueError(f"{where} was tokenized with another vocabulary ({metadata['vocab_size']} tokens, "
                     f"SHA-256 "
                     f"{metadata['vocab_sha256'][:12]}…) than this run's ({len(vocab)} tokens, SHA-256 "
                     f"{vocab_checksum(vocab)[:12]}…): use the vocab.txt beside the records")
  if metadata["lower_case"] != config.lower_case:
    raise ValueError(f"{where} is {'uncased' if metadata['lower_case'] else 'cased'}, but this run has "
                     f"--lower-case={config.lower_case}")
  records = records_tokenizer(metadata)
  if records is not None:
    ours = TextEncoder(vocab, seq_length=3, **config.text_encoder_args()).settings()
    differing = {key: (value, ours[key]) for key, value in records.items()
                 if key in ("special_tokens", "cls_type_id") and value != ours[key]}
    if differing:
      details = "; ".join(f"{key}: {theirs!r} in the records, {mine!r} here"
                          for key, (theirs, mine) in differing.items())
      raise ValueError(f"{where} was tokenized with other tokenizer settings: {details}")


def records_tokenizer(metadata: dict[str, Any]) -> dict[str, Any] | None:
  """The tokenizer settings pre-tokenized records were written with (None for older records)."""
  return metadata.get("tokenizer")


def adopt_records_tokenizer(config: TrainConfig, train: data.DataSource) -> TrainConfig:
  """`config` with the tokenizer settings of pre-tokenized training records when it sets none and
  theirs are not BERT's defaults (a Funnel checkpoint's `<cls>`-style tokens, say). A `truncator` alone
  (kept from a resumed run) is not a setting of the records'."""
  if train.metadata is None or set(config.tokenizer or {}) - {"truncator"}:
    return config
  records = records_tokenizer(train.metadata)
  if records is None:
    return config
  defaults = TextEncoder(list(SPECIAL_TOKENS), seq_length=3).settings()
  keys = ("special_tokens", "cls_type_id", "max_chars_per_word")
  if all(records.get(key) == defaults[key] for key in keys):
    return config
  return config.replace(tokenizer={**{key: records[key] for key in keys if key in records},
                                   **(config.tokenizer or {})})


def resolve_config(config: TrainConfig) -> tuple[TrainConfig, ModelDir | None]:
  """The validated config, with the encoder of `--init-checkpoint`'s model directory when it has one
  (and the masked-LM head's shape of a `generator_checkpoint` model directory)."""
  init_dir = init_model_dir(config)
  if init_dir is not None:
    config = apply_init_checkpoint(config, TrainConfig.from_model_dir(init_dir))
  model_dir = ModelDir(config.model_dir) if config.model_dir else None
  if model_dir is not None and model_dir.has_config():   # a resume: the saved run's model
    config = config.resumed_from(TrainConfig.from_model_dir(model_dir))
  generator = config.settings.get("generator_checkpoint")
  generator_dir = containing_model_dir(generator) if generator else None
  if generator_dir is not None and "mlm_transform" not in config.settings:
    saved = TrainConfig.from_model_dir(generator_dir).settings
    if "mlm_transform" in saved:
      config = config.replace(mlm_transform=saved["mlm_transform"])
  return config.validate(), init_dir


def prepare(config: TrainConfig, worker: Worker | None = None, write: bool = True) -> Prepared:
  """Validates the config, loads the data and vocabulary, and writes the model dir's files
  (`write_files`) unless `write` is False.

  `worker` (a `tpu.strategy.Worker`): on several workers only the chief writes.
  """
  config, init_dir = resolve_config(config)
  model_dir = ModelDir(config.model_dir)
  train, evaluation = load_sources(config)
  vocab = resolve_vocab(config, train, model_dir, init_dir, worker)
  config = adopt_records_tokenizer(config, train)
  for source in (train, evaluation):
    if source is not None and source.metadata is not None:
      check_records(source, config, vocab)
  task = get_task(config)
  config = config.replace(**task.data_metadata(train), vocab_size=len(vocab))
  if model_dir.has_config():   # compared as written (with the settings whose default may change)
    check_resumable(TrainConfig.from_model_dir(model_dir), config.recorded())
  prepared = Prepared(config, vocab, train, evaluation, model_dir,
                      resolve_sentencepiece(config, model_dir, init_dir))
  if write:
    write_files(prepared, worker)
  return prepared


def write_vocabulary(prepared: Prepared, worker: Worker | None = None) -> None:
  """Writes the prepared run's `vocab.txt` (and `spiece.model`) where the model directory has none;
  on several workers the chief does, the others nothing."""
  if worker is not None and not worker.is_chief:
    return
  model_dir = prepared.model_dir
  model_dir.makedirs()
  if not model_dir.has_vocab():
    model_dir.write_vocab(prepared.vocab)
  if prepared.sentencepiece is not None and not model_dir.has_sentencepiece():
    model_dir.write_sentencepiece(prepared.sentencepiece)


def write_files(prepared: Prepared, worker: Worker | None = None) -> None:
  """Writes the prepared run's `config.json`, and its `vocab.txt` where the model directory has
  none (`write_vocabulary`); on several workers the chief does, the others nothing."""
  write_vocabulary(prepared, worker)
  if worker is None or worker.is_chief:
    prepared.model_dir.write_config(prepared.config.recorded().to_dict())

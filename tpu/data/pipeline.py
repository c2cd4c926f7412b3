"""Input pipelines of the training job: examples -> batched int32 features of static shape.

Three kinds of input:

- raw text examples (`tpu.data` sources) for fine-tuning: tokenized on the host inside
  tf.data (`zoo.text.TextEncoder`), after batching;
- raw pre-training text, for tasks that concatenate documents
  (`Task.concatenates_documents`: the pre-training tasks): the WordPiece tokens of
  consecutive documents are concatenated, `[SEP]` between two, and cut into
  full-length examples `[CLS] … [SEP]` (`tpu.data.documents`), so no token is cut off;
- raw examples a task expands into several (`Task.expand`: SQuAD's question and
  context windows), before batching;
- pre-tokenized TFRecord shards of `python -m tpu.pretraining_data` (`tpu.data.records`):
  read with core TensorFlow ops only (no tensorflow-text op in the graph), so the
  pipeline runs on TPU pod hosts, whose TensorFlow servers lack tensorflow-text.

The accelerator only sees fixed `[batch, seq_length]` int32 tensors (TPUs need static
shapes). Training data is shuffled (files too, for shards, read interleaved), repeated,
batched with the remainder dropped, and given to `Task.features` (masking for MLM: new
positions at every pass over the data, from a seed per batch). Evaluation batches are
padded to the full batch size with all-zero examples of `weight` 0 (and no masked
tokens), so every example is evaluated exactly once and shapes stay static.

Per-host input: `train_input_fn` returns the function `strategy.distribute_datasets_from_function`
calls once per input pipeline (host) with a `tf.distribute.InputContext`. Each pipeline
reads its own part of the data (its files of a sharded source, else every n-th
example), builds batches of the global batch divided by the number of pipelines, makes
their features, and rebatches them into the per-replica batches. With one pipeline the
replicas together see exactly the batches one device would.

Example:
  >>> from tpu import data
  >>> from tpu.config import TrainConfig
  >>> from tpu.tasks import get_task
  >>> from zoo.text import TextEncoder
  >>> config = TrainConfig(model="bert_small", task="classify", data="demo", model_dir="/tmp/x",
  ...                      batch_size=4, seq_length=16, num_classes=2).validate()
  >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "plot", "was", "good"]
  >>> encoder = TextEncoder(vocab, seq_length=16)
  >>> examples = data.load("demo", "validation").dataset.take(6)
  >>> batches = eval_dataset(examples, get_task(config), encoder, 4)
  >>> [batch["weight"].numpy().tolist() for batch in batches]
  [[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0]]
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING
from typing import Any

import tensorflow as tf

from tpu.data import documents
from tpu.data import records
from tpu.data.source_registry import DataSource

if TYPE_CHECKING:
  from zoo.text import TextEncoder

log = logging.getLogger("tpu.train")

# Documents tokenized per call of the tokenizer when concatenating raw text.
TOKENIZE_BATCH = 256
# Shard files read at once.
INTERLEAVE_CYCLE = 8


def _pipeline_seed(seed, context):
  return seed + 1_000_003 * (context.input_pipeline_id if context else 0)


def concatenated_text(dataset: Any, text_encoder: TextEncoder) -> Any:
  """Raw examples -> full-length examples: `input_word_ids`, `input_mask`, `input_type_ids` int32 `[T]`.

  Each text (`text_a`, then `text_b` when present) is a document; their tokens are
  concatenated and cut into examples by `tpu.data.documents.concatenate`.
  """
  keys = [key for key in ("text_a", "text_b") if key in dataset.element_spec]
  texts = dataset.flat_map(lambda example: tf.data.Dataset.from_tensor_slices(
      tf.stack([example[key] for key in keys])))
  tokens = texts.batch(TOKENIZE_BATCH).map(text_encoder.tokenize).unbatch()   # [n] per document
  return documents.concatenate(tokens.enumerate(), text_encoder.seq_length, cls_id=text_encoder.cls_id,
                               sep_id=text_encoder.sep_id, pad_id=text_encoder.pad_id,
                               cls_type_id=text_encoder.cls_type_id)


def _shard_counts(source):
  """{file: examples} of a source's record files (from metadata.json; None where unknown)."""
  counts = {shard["file"]: shard["examples"] for shard in (source.metadata or {}).get("shards", [])}
  return {path: counts.get(os.path.basename(path)) for path in source.files}


def reads_own_files(source: DataSource, pipelines: int) -> bool:
  """Whether each of `pipelines` input pipelines reads its own record files (pipeline i the files
  i, i + n, ...): when there are as many files as pipelines or more and every pipeline's
  files hold an example. Otherwise every pipeline reads every file and keeps every n-th
  record, so none starves (empty or too few shards)."""
  if pipelines <= 1:
    return False
  assert source.files is not None, "a source of record files"
  if len(source.files) < pipelines:
    return False
  counts = list(_shard_counts(source).values())
  return all(any(count is None or count > 0 for count in counts[index::pipelines])
             for index in range(pipelines))


def check_input(source: DataSource, pipelines: int) -> None:
  """Refuses training data that would leave one of `pipelines` input pipelines without an example
  (such a pipeline would wait for one for ever), naming the shards and their counts."""
  if source.files:
    counts = _shard_counts(source)
    if any(count is None for count in counts.values()):
      return   # shards without counts (metadata.json of another writer): nothing to check against
    total = sum(counts.values())
    if total >= pipelines and total > 0:
      return
    listed = ", ".join(f"{os.path.basename(path)} ({count})" for path, count in counts.items())
    raise ValueError(f"{source.spec}: {total} examples in all (shards: {listed}) for {pipelines} input "
                     f"pipeline(s), one per worker: every pipeline needs an example. Write more text into "
                     "the shards, or train on fewer workers")
  if source.dataset is None:
    return
  count = int(source.dataset.take(pipelines).reduce(0, lambda count, _: count + 1))
  if count < pipelines:
    whom = "the input pipeline" if pipelines == 1 else f"{pipelines} input pipelines (one per worker)"
    raise ValueError(f"{source.spec}: {count} example(s) for {whom}, which read every "
                     f"{pipelines}-th example each: every pipeline needs one")


def _record_files(source, context, seed, shared_seed):
  """The files a training pipeline reads, shuffled anew every epoch, and whether it must keep
  every n-th record of them. Pipelines that share all files shuffle them alike
  (`shared_seed`), so their every-n-th records partition each epoch."""
  files = tf.data.Dataset.from_tensor_slices(source.files)
  pipelines = context.num_input_pipelines if context else 1
  own_files = reads_own_files(source, pipelines)
  if own_files:
    files = files.shard(pipelines, context.input_pipeline_id)
  share_records = pipelines > 1 and not own_files
  return files.shuffle(len(source.files), seed=shared_seed if share_records else seed,
                       reshuffle_each_iteration=True), share_records


def describe_share(source: DataSource, context: Any) -> str:
  """What input pipeline `context` reads of a source, for the log: its files or its records."""
  pipelines = context.num_input_pipelines if context else 1
  index = context.input_pipeline_id if context else 0
  if not source.files:
    return "every example" if pipelines == 1 else f"every {pipelines}-th example from the {index}-th"
  counts = _shard_counts(source)
  if reads_own_files(source, pipelines) or pipelines == 1:
    mine = list(counts)[index::pipelines] if pipelines > 1 else list(counts)
    listed = ", ".join(f"{os.path.basename(path)} ({counts[path]} examples)" for path in mine)
    return f"the shards {listed}"
  return (f"every {pipelines}-th record from the {index}-th of all {len(counts)} shards (too few shards with "
          f"examples for one of their own per pipeline)")


def _read_records(files, compression):
  return files.interleave(lambda path: tf.data.TFRecordDataset(path, compression_type=compression),
                          cycle_length=INTERLEAVE_CYCLE, num_parallel_calls=tf.data.AUTOTUNE,
                          deterministic=True)


def _examples(source, task, text_encoder, *, training, seed, context=None, shared_seed=None):
  """One epoch of a source's unbatched examples for this pipeline: raw text dicts, or serialized
  records (then True)."""
  if source.files:   # pre-tokenized shards: files are shuffled and read interleaved
    files, share_records = _record_files(source, context, seed, shared_seed) if training else (
        tf.data.Dataset.from_tensor_slices(source.files), False)
    serialized = _read_records(files, "GZIP" if source.metadata.get("compress") else None)
    if share_records:
      serialized = serialized.shard(context.num_input_pipelines, context.input_pipeline_id)
    return serialized, True
  dataset = source.dataset
  if context is not None and context.num_input_pipelines > 1:
    dataset = dataset.shard(context.num_input_pipelines, context.input_pipeline_id)
  return dataset, False


def _numbered_batches(examples, serialized, task, text_encoder, batch_size, *, drop_remainder):
  """`(index, batch)` pairs of a pipeline's examples (`_examples`), the raw batches `task.features` takes.

  Serialized records are batched, then parsed; raw text is first concatenated into full-length
  examples (a task that `concatenates_documents`) and expanded by the task (`Task.expand`), then
  batched. Training drops the remainder (`drop_remainder`: every batch is full); evaluation keeps
  the last, shorter batch, which its features pad.
  """
  if serialized:
    batches = examples.batch(batch_size, drop_remainder=drop_remainder).map(
        lambda serialized: records.parse_records(serialized, text_encoder.seq_length, text_encoder.pad_id,
                                                 text_encoder.cls_type_id))
  else:
    if task.concatenates_documents:
      examples = concatenated_text(examples, text_encoder)
    examples = task.expand(examples, text_encoder)
    batches = examples.batch(batch_size, drop_remainder=drop_remainder)
  return batches.enumerate()


def train_input_fn(source: DataSource | Any, task: Any, text_encoder: TextEncoder, batch_size: int, *,
                   shuffle_buffer: int = 10000, seed: int = 0, worker_name: str | None = None,
                   capacities: list[int] | None = None) -> Callable[..., Any]:
  """The `fn(input_context)` that `strategy.distribute_datasets_from_function` takes.

  Args:
    source: a `tpu.data.DataSource`.
    task: the `tpu.tasks.Task` (any object with its input-pipeline methods).
    text_encoder: the `zoo.text.TextEncoder` (fixes the sequence length and the vocabulary).
    batch_size: the GLOBAL batch size.
    shuffle_buffer: examples in the shuffle buffer.
    seed: shuffling and masking seed. A resumed run restores the iterator's position
      (`tpu.trainer.TrainInput`) and passes the same seed; one that cannot passes another.
    worker_name: logs what the pipeline reads, naming its worker.
    capacities: length buckets (`bucketed`): the capacity of each ladder length, or None.
  """
  def input_fn(context=None):
    if worker_name:
      log.info("%s reads %s", worker_name, describe_share(_as_source(source), context))
    pipelines = context.num_input_pipelines if context else 1
    replicas = context.num_replicas_in_sync if context else 1
    if batch_size % replicas:
      raise ValueError(f"batch_size {batch_size} must be divisible by the {replicas} replicas")
    host_batch = batch_size // pipelines
    per_replica = batch_size // replicas
    dataset = train_dataset(source, task, text_encoder, host_batch, shuffle_buffer=shuffle_buffer,
                            seed=_pipeline_seed(seed, context), context=context, shared_seed=seed,
                            capacities=capacities)
    if per_replica != host_batch:
      dataset = dataset.rebatch(per_replica, drop_remainder=True)
    return dataset.prefetch(tf.data.AUTOTUNE)
  return input_fn


def train_dataset(source: DataSource | Any, task: Any, text_encoder: TextEncoder, batch_size: int, *,
                  shuffle_buffer: int = 10000, seed: int = 0, context: Any = None,
                  shared_seed: int | None = None, capacities: list[int] | None = None) -> Any:
  """Shuffled, repeated batches of `task.features`, `[batch_size, ...]`, remainder dropped.

  `source` is a `tpu.data.DataSource` (or, for raw text, its `dataset`); see
  `train_input_fn` for the arguments. With `capacities`, the batches are `bucketed`.
  """
  source = _as_source(source)
  examples, serialized = _examples(source, task, text_encoder, training=True, seed=seed, context=context,
                                   shared_seed=seed if shared_seed is None else shared_seed)
  # Shuffled within an epoch, then repeated: each example once per epoch.
  examples = examples.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True).repeat()
  batches = _numbered_batches(examples, serialized, task, text_encoder, batch_size, drop_remainder=True)

  def features(index, raw):
    return task.features(raw, text_encoder, seed=tf.stack([tf.constant(seed, tf.int64), index]))

  batches = batches.map(features, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  if capacities:
    batches = bucketed(batches, batch_size, capacities)
  return batches.prefetch(tf.data.AUTOTUNE)


def bucketed(batches: Any, batch_size: int, capacities: list[int]) -> Any:
  """Batches regrouped by length: each of `batch_size` examples of one ladder length's bucket (the first whose
  capacity holds the example's real tokens, `zoo.models.bucketing`), in the order their buckets fill.

  Every example of the stream comes out once, in the order it went in within its bucket: an example waits
  in its bucket's window until `batch_size` examples of that bucket have come (TensorFlow's
  `group_by_window`, whose windows the iterator's checkpoint saves, so a resume continues with them).
  Shapes stay `[batch_size, seq_length]`; the train step runs the batch at its bucket's length.
  """
  from zoo.models.bucketing import bucket_index

  def key(features):
    return tf.cast(bucket_index(features["input_mask"], capacities), tf.int64)

  return batches.unbatch().group_by_window(
      key, lambda _, examples: examples.batch(batch_size, drop_remainder=True), window_size=batch_size)


def _pad_batch(features, batch_size):
  """Pads every feature along axis 0 to `batch_size` with zeros; sets the static shapes."""
  real = tf.shape(next(iter(features.values())))[0]
  padded = {}
  for key, value in features.items():
    paddings = [[0, batch_size - real]] + [[0, 0]] * (value.shape.rank - 1)
    value = tf.pad(value, paddings)
    value.set_shape([batch_size] + value.shape[1:].as_list())
    padded[key] = value
  return padded


def eval_dataset(source: DataSource | Any, task: Any, text_encoder: TextEncoder, batch_size: int, *,
                 seed: int = 0) -> Any:
  """Every example once, in batches of `batch_size` padded with examples of weight 0.

  MLM masking uses a fixed seed per batch, so evaluations of different checkpoints
  score the same masked positions.
  """
  source = _as_source(source)
  examples, serialized = _examples(source, task, text_encoder, training=False, seed=seed)
  batches = _numbered_batches(examples, serialized, task, text_encoder, batch_size, drop_remainder=False)

  def features(index, raw):
    values = task.features(raw, text_encoder, seed=tf.stack([tf.constant(seed, tf.int64), index]))
    values["weight"] = tf.ones(tf.shape(values["input_mask"])[:1], tf.float32)   # [B]
    return _pad_batch(values, batch_size)

  return batches.map(features, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).prefetch(
      tf.data.AUTOTUNE)


def eval_input_fn(source: DataSource | Any, task: Any, text_encoder: TextEncoder, batch_size: int, *,
                  seed: int = 0) -> Callable[..., Any]:
  """The `fn(input_context)` of evaluation for `strategy.distribute_datasets_from_function`.

  Every input pipeline builds the same padded global batches as `eval_dataset` and keeps
  its own slice of each (pipeline i of n: rows i·B/n to (i+1)·B/n), rebatched per
  replica. So each example is evaluated exactly once over all workers, with the features
  (and MLM masks) one process would give it, and every worker runs the same number of
  batches. Each host prepares the whole evaluation set: it is small next to training.
  """
  def input_fn(context=None):
    pipelines = context.num_input_pipelines if context else 1
    index = context.input_pipeline_id if context else 0
    replicas = context.num_replicas_in_sync if context else 1
    if batch_size % replicas:
      raise ValueError(f"eval_batch_size {batch_size} must be divisible by the {replicas} replicas")
    dataset = eval_dataset(source, task, text_encoder, batch_size, seed=seed)
    part = batch_size // pipelines
    if pipelines > 1:
      rows = slice(index * part, (index + 1) * part)
      dataset = dataset.map(lambda features: {key: value[rows] for key, value in features.items()})
    if batch_size // replicas != part:
      dataset = dataset.rebatch(batch_size // replicas, drop_remainder=True)
    return dataset.prefetch(tf.data.AUTOTUNE)
  return input_fn


def _as_source(source):
  if isinstance(source, tf.data.Dataset):
    return DataSource(source, "text")
  return source

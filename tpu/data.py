"""Data sources of the training job: raw text examples and what task they belong to.

`load(spec, split)` returns a `DataSource`: a `tf.data.Dataset` of dicts of RAW text
(tokenization happens later, in the input pipeline's text encoder) plus the task's
metadata. Each element is

  {"text_a": tf.string [],                  always
   "text_b": tf.string [],                  sentence-pair tasks only
   "label":  tf.int64 [] (classification) or tf.float32 [] (regression); absent for "text"}

Specs:

- `tfds:NAME[/CONFIG][:VERSION]`: a TensorFlow Datasets dataset from the table
  `TFDS_TASKS` (GLUE, imdb_reviews, ag_news_subset). `split` is "train" or
  "validation", optionally with a TFDS slice ("train[:10%]"). "validation" means
  validation_matched for glue/mnli (validation_mismatched is available by name) and
  the labelled test split for imdb_reviews and ag_news_subset, which have no
  validation split. GLUE test splits are refused: their labels are all -1.
- `tsv:PATH`, `csv:PATH`: a table with a header row; TSV has no quoting (as GLUE's
  files), CSV uses standard double-quote quoting.
- `jsonl:PATH`: one JSON object per line.
- `text:GLOB`: pre-training text, one document per line (blank lines are skipped);
  the matching files are read in sorted order. Task type "text", only "text_a".
- `tfrecord:GLOB`: pre-tokenized, packed shards written by `python -m tpu.pretraining_data`
  (one folder's, with its `metadata.json`). Task type "text"; `dataset` is None and
  `files` and `metadata` are set: the input pipeline reads the files itself.
- `pydocs`: real English prose that ships with Python: the documentation topics and
  the docstrings of the standard library (`tpu.pydocs`), assembled from the
  interpreter's own files, one document per module or topic. Splits "train" and
  "validation" (every tenth document, by a hash of its name). Task type "text".
- `demo`: the synthetic sentiment dataset of `tpu.demo_data` (splits "train",
  "validation"); no files, no network.

Table files (tsv/csv/jsonl) are one split each, so `split` does not apply to them.
They are read and checked in Python first (they are meant to be small to medium:
the parsed rows become constants of the dataset graph, which must stay under 2 GB);
a malformed file raises `DataError` naming the file and line. Their columns:

- `text_columns`: one name (single sentence) or two (a pair). By default the first of
  `DEFAULT_TEXT_COLUMNS` whose names are all columns of the file:
  ("sentence1", "sentence2"), ("text_a", "text_b"), ("premise", "hypothesis"),
  ("sentence",), ("text",).
- `label_column`: default "label". For classification, labels are class names mapped
  to ids in sorted order of the names seen, or, if every label is an integer, the ids
  themselves (0 .. max). Pass the train source's `label_names` when loading the
  validation file, so both use the same ids; then a label that is not one of those
  names (nor an id in range) is an error, as is an id outside `[0, num_classes)`.
  For `task_type="regression"` labels are numbers (float32).

Example:
  >>> source = load("demo", "validation")
  >>> source.task_type, source.label_names, source.num_classes, source.num_examples
  ('classification', ['negative', 'positive'], 2, 500)
  >>> sorted(source.dataset.element_spec)
  ['label', 'text_a']
"""

import csv
import dataclasses
import io
import json
import math
import os
import re

import numpy as np
import tensorflow as tf

from tpu import demo_data

TASK_TYPES = ("classification", "regression", "text", "tagging", "question_answering")
DEFAULT_TEXT_COLUMNS = (("sentence1", "sentence2"), ("text_a", "text_b"), ("premise", "hypothesis"),
                        ("sentence",), ("text",))
DEFAULT_LABEL_COLUMN = "label"


class DataError(ValueError):
  """A data file is missing or malformed. The message starts with `FILE:LINE:` (or `FILE:`).

  Attributes:
    path: the file (or pattern) at fault.
    line: the 1-based line number, or None when the problem is not on one line.
  """

  def __init__(self, path, line, message):
    self.path = path
    self.line = line
    location = f"{path}:{line}" if line is not None else f"{path}"
    super().__init__(f"{location}: {message}")


@dataclasses.dataclass(frozen=True, eq=False)
class DataSource:
  """Raw examples of one split and the metadata of their task.

  Attributes:
    dataset: `tf.data.Dataset` of dicts: "text_a" (tf.string scalar), "text_b" (only if
      `sentence_pair`), "label" (int64 for classification, float32 for regression, absent
      for "text"). Not shuffled, not repeated, not batched.
    task_type: "classification", "regression" or "text" (pre-training text, no labels).
    label_names: class names indexed by label id (classification), else None.
    sentence_pair: whether examples have "text_b".
    num_examples: number of examples, or None when not known without reading everything.
    spec: the spec it was loaded from, e.g. "tfds:glue/mrpc".
    split: the split asked for (None for table and text files).
    files: the TFRecord shards of a `tfrecord:` source (then `dataset` is None: the
      input pipeline reads the files itself), else None.
    metadata: the shards' `metadata.json` (`tpu.pretraining_data`), else None.
  """

  dataset: tf.data.Dataset
  task_type: str
  label_names: list | None = None
  sentence_pair: bool = False
  num_examples: int | None = None
  spec: str = ""
  split: str | None = None
  files: list | None = None
  metadata: dict | None = None

  @property
  def num_classes(self):
    """Width of the head's output: len(label_names) for classification, 1 for regression, else None."""
    if self.task_type == "classification":
      return len(self.label_names)
    return 1 if self.task_type == "regression" else None


@dataclasses.dataclass(frozen=True)
class TfdsTask:
  """How one TFDS dataset maps onto text_a / text_b / label.

  Attributes:
    text_features: one or two Text feature names (text_a, text_b).
    task_type: "classification" (ClassLabel label) or "regression" (float label).
    splits: split name accepted by `load` -> TFDS split name.
    label_feature: the label feature's name.
  """

  text_features: tuple
  task_type: str = "classification"
  splits: dict = dataclasses.field(default_factory=lambda: {"train": "train", "validation": "validation"})
  label_feature: str = "label"


_TEST_AS_VALIDATION = {"train": "train", "validation": "test", "test": "test"}
TFDS_TASKS = {
    "glue/cola": TfdsTask(("sentence",)),
    "glue/sst2": TfdsTask(("sentence",)),
    "glue/mrpc": TfdsTask(("sentence1", "sentence2")),
    "glue/qqp": TfdsTask(("question1", "question2")),
    "glue/mnli": TfdsTask(("premise", "hypothesis"),
                          splits={"train": "train", "validation": "validation_matched",
                                  "validation_matched": "validation_matched",
                                  "validation_mismatched": "validation_mismatched"}),
    "glue/qnli": TfdsTask(("question", "sentence")),
    "glue/rte": TfdsTask(("sentence1", "sentence2")),
    "glue/stsb": TfdsTask(("sentence1", "sentence2"), task_type="regression"),
    "glue/wnli": TfdsTask(("sentence1", "sentence2")),
    "imdb_reviews": TfdsTask(("text",), splits=_TEST_AS_VALIDATION),
    "imdb_reviews/plain_text": TfdsTask(("text",), splits=_TEST_AS_VALIDATION),
    "ag_news_subset": TfdsTask(("title", "description"), splits=_TEST_AS_VALIDATION),
}

# Options each kind of spec understands, with their defaults; any other option set to a
# non-default value is an error rather than silently ignored.
_OPTION_DEFAULTS = dict(text_columns=None, label_column=None, task_type=None, label_names=None,
                        num_classes=None, data_dir=None, download=True, shuffle_files=False, seed=0)
_TABLE_OPTIONS = {"text_columns", "label_column", "task_type", "label_names", "num_classes"}
_SPEC_OPTIONS = {
    "tfds": _TABLE_OPTIONS | {"data_dir", "download", "shuffle_files"},
    "tsv": _TABLE_OPTIONS,
    "csv": _TABLE_OPTIONS,
    "jsonl": _TABLE_OPTIONS,
    "text": {"task_type"},
    "tfrecord": {"task_type"},
    "pydocs": {"task_type"},
    "demo": {"label_names", "num_classes", "seed"},
    "conll": {"task_type", "label_names"},   # tagged words (tpu.token_data)
    "squad": {"task_type"},   # SQuAD JSON (tpu.token_data)
}


def load(spec, split="train", *, text_columns=None, label_column=None, task_type=None, label_names=None,
         num_classes=None, data_dir=None, download=True, shuffle_files=False, seed=0):
  """Returns the `DataSource` of a spec (see the module docstring for the specs).

  Args:
    spec: "tfds:NAME[/CONFIG]", "tsv:PATH", "csv:PATH", "jsonl:PATH", "text:GLOB" or "demo".
    split: "train" or "validation" (plus "test" for imdb_reviews / ag_news_subset, and
      TFDS slices); ignored by table and text files, which are one split each.
    text_columns: one or two column (TFDS: feature) names for text_a and text_b.
    label_column: the label's column (TFDS: feature) name; default "label".
    task_type: "classification" (default for files), "regression" or "text" (drop
      labels). TFDS datasets have a fixed type; "text" is also accepted for them.
    label_names: class names by id. Files: fixes the ids (use the train source's
      names for the validation file). TFDS / demo: checked against the dataset's.
    num_classes: number of classes, when labels are ids and `label_names` is not given.
    data_dir: TFDS data directory (tfds only).
    download: download and prepare the TFDS dataset if needed (tfds only).
    shuffle_files: let TFDS read its shards in random order (tfds only).
    seed: seed of the synthetic demo dataset (demo only).

  Raises:
    ValueError: unknown spec, dataset or split; an option that the spec does not take;
      GLUE "test" asked for.
    DataError: a file is missing, empty or malformed; the message names file and line.
  """
  scheme, _, target = spec.partition(":")
  if scheme not in _SPEC_OPTIONS:
    raise ValueError(f"unknown data spec {spec!r}: expected one of tfds:NAME, tsv:PATH, csv:PATH, "
                     "jsonl:PATH, text:GLOB, tfrecord:GLOB, pydocs, conll:PATH, squad:PATH or demo")
  if scheme in ("demo", "pydocs") and target:
    hint = " (its seed is the seed= option)" if scheme == "demo" else ""
    raise ValueError(f"data spec {spec!r}: write just {scheme!r}{hint}")
  if scheme not in ("demo", "pydocs") and not target:
    what = "dataset" if scheme == "tfds" else "file"
    raise ValueError(f"data spec {spec!r} names no {what} after '{scheme}:'")
  options = dict(text_columns=text_columns, label_column=label_column, task_type=task_type,
                 label_names=label_names, num_classes=num_classes, data_dir=data_dir, download=download,
                 shuffle_files=shuffle_files, seed=seed)
  unsupported = sorted(name for name, value in options.items()
                       if value != _OPTION_DEFAULTS[name] and name not in _SPEC_OPTIONS[scheme])
  if unsupported:
    raise ValueError(f"option(s) {', '.join(unsupported)} do not apply to {scheme} specs ({spec!r}); "
                     f"they take {', '.join(sorted(_SPEC_OPTIONS[scheme]))}")
  if task_type is not None and task_type not in TASK_TYPES:
    raise ValueError(f"task_type must be one of {TASK_TYPES}, got {task_type!r}")
  text_columns = _text_columns_tuple(text_columns)
  if label_names is not None:
    label_names = [str(name) for name in label_names]
    if num_classes is not None and num_classes != len(label_names):
      raise ValueError(f"num_classes={num_classes} but {len(label_names)} label_names were given: "
                       f"{label_names}")

  from tpu import token_data  # token-level tasks: tagged words, SQuAD
  if token_data.handles(scheme, target, task_type):
    source = token_data.load(scheme, target, split, text_columns=text_columns, label_column=label_column,
                             task_type=task_type, label_names=label_names, data_dir=data_dir,
                             download=download, shuffle_files=shuffle_files)
  elif scheme == "tfds":
    source = _load_tfds(target, split, text_columns, label_column, task_type, data_dir, download,
                        shuffle_files)
  elif scheme == "demo":
    texts, labels = demo_data.examples(split, seed=seed)
    source = _from_columns([texts], "classification", np.array(labels, np.int64), list(demo_data.LABEL_NAMES))
  elif scheme in ("text", "tfrecord", "pydocs"):
    if task_type not in (None, "text"):
      raise ValueError(f"{scheme} specs hold pre-training text without labels; task_type must be 'text', "
                       f"got {task_type!r}")
    if scheme == "text":
      source = _load_text_files(target)
    elif scheme == "tfrecord":
      source = _load_records(target)
    else:
      from tpu import pydocs
      source = DataSource(pydocs.dataset(split), "text", num_examples=len(pydocs.documents(split)))
  else:
    source = _load_table(scheme, target, text_columns, label_column or DEFAULT_LABEL_COLUMN,
                         task_type or "classification", label_names, num_classes)
  if scheme in ("tfds", "demo"):
    _check_same_labels(spec, source, label_names, num_classes)
  return dataclasses.replace(source, spec=spec,
                             split=split if scheme in ("tfds", "demo", "pydocs") else None)


def _text_columns_tuple(text_columns):
  if text_columns is None:
    return None
  columns = (text_columns,) if isinstance(text_columns, str) else tuple(text_columns)
  if len(columns) not in (1, 2) or not all(isinstance(column, str) for column in columns):
    raise ValueError(f"text_columns must be one or two column names, got {text_columns!r}")
  return columns


def _check_same_labels(spec, source, label_names, num_classes):
  if label_names is not None and label_names != source.label_names:
    raise ValueError(f"{spec} has label names {source.label_names}, not the label_names given: {label_names}")
  if num_classes is not None and num_classes != source.num_classes:
    raise ValueError(f"{spec} has {source.num_classes} classes, not num_classes={num_classes}")


def _from_columns(texts, task_type, labels=None, label_names=None):
  """A DataSource from Python lists of text (one or two) and a numpy array of labels."""
  tensors = {"text_a": tf.constant(texts[0], tf.string)}
  if len(texts) == 2:
    tensors["text_b"] = tf.constant(texts[1], tf.string)
  if task_type != "text":
    tensors["label"] = tf.constant(labels)
  return DataSource(tf.data.Dataset.from_tensor_slices(tensors), task_type, label_names,
                    sentence_pair=len(texts) == 2, num_examples=len(texts[0]))


# TFDS.

def _load_tfds(name, split, text_columns, label_column, task_type, data_dir, download, shuffle_files):
  import tensorflow_datasets as tfds  # slow to import; only TFDS specs need it

  task = TFDS_TASKS.get(name.partition(":")[0])
  if task is None:
    raise ValueError(f"tfds:{name} is not supported; supported datasets: {', '.join(TFDS_TASKS)}. "
                     "Other data can be read from tsv:, csv: or jsonl: files")
  tfds_split = _tfds_split(name, split, task)
  builder = tfds.builder(name, data_dir=data_dir)
  features = builder.info.features
  text_features = text_columns or task.text_features
  label_feature = label_column or task.label_feature
  if task_type not in (None, "text", task.task_type):
    raise ValueError(f"tfds:{name} is a {task.task_type} task; task_type can be {task.task_type!r} or "
                     f"'text' (drop the labels), got {task_type!r}")
  task_type = task_type or task.task_type
  wanted = text_features + ((label_feature,) if task_type != "text" else ())
  missing = [feature for feature in wanted if feature not in features]
  if missing:
    raise ValueError(f"tfds:{name} has no feature(s) {missing}; its features are {sorted(features)}")
  label_names = list(features[label_feature].names) if task_type == "classification" else None

  if download:
    builder.download_and_prepare()
  dataset = builder.as_dataset(split=tfds_split, shuffle_files=shuffle_files)
  label_dtype = tf.int64 if task_type == "classification" else tf.float32

  def to_example(example):
    converted = {"text_a": example[text_features[0]]}
    if len(text_features) == 2:
      converted["text_b"] = example[text_features[1]]
    if task_type != "text":
      converted["label"] = tf.cast(example[label_feature], label_dtype)
    return converted

  return DataSource(dataset.map(to_example, num_parallel_calls=tf.data.AUTOTUNE), task_type, label_names,
                    sentence_pair=len(text_features) == 2, num_examples=_num_examples(builder, tfds_split))


def _tfds_split(name, split, task):
  base, slice_ = re.fullmatch(r"([^\[]*)(\[.*\])?", split).groups()
  if name.startswith("glue/") and base.startswith("test"):
    raise ValueError(f"tfds:{name}: GLUE test splits carry no labels (every label is -1); "
                     "evaluate on split 'validation'")
  if base not in task.splits:
    raise ValueError(f"tfds:{name} has no split {split!r}; use one of {sorted(task.splits)}")
  return task.splits[base] + (slice_ or "")


def _num_examples(builder, tfds_split):
  try:
    return int(builder.info.splits[tfds_split].num_examples)
  except (KeyError, ValueError):   # not generated (e.g. under tfds.testing.mock_data)
    return None


# Pre-training text files.

def _load_text_files(pattern):
  pattern = os.path.expanduser(pattern)
  files = sorted(path for path in tf.io.gfile.glob(pattern) if not tf.io.gfile.isdir(path))
  if not files:
    raise DataError(pattern, None, "no file matches this pattern")
  lines = tf.data.TextLineDataset(files).map(tf.strings.strip)
  documents = lines.filter(lambda line: tf.strings.length(line) > 0)
  return DataSource(documents.map(lambda line: {"text_a": line}), "text")


def _load_records(pattern):
  """Pre-tokenized shards of `python -m tpu.pretraining_data` and their metadata."""
  from tpu import pretraining_data
  pattern = os.path.expanduser(pattern)
  files = sorted(path for path in tf.io.gfile.glob(pattern) if not tf.io.gfile.isdir(path))
  if not files:
    raise DataError(pattern, None, "no file matches this pattern")
  folders = sorted({os.path.dirname(path) for path in files})
  if len(folders) > 1:
    raise DataError(pattern, None, f"the shards lie in several folders {folders}; each folder has its own "
                                   "metadata.json: give one folder's shards")
  try:
    metadata = pretraining_data.read_metadata(folders[0])
  except pretraining_data.CorpusError as error:
    raise DataError(pattern, None, str(error)) from None
  counts = {shard["file"]: shard["examples"] for shard in metadata.get("shards", [])}
  unknown = [path for path in files if os.path.basename(path) not in counts]
  if unknown:
    raise DataError(unknown[0], None, f"not one of the shards its metadata.json lists ({sorted(counts)})")
  return DataSource(None, "text", files=files, metadata=metadata,
                    num_examples=sum(counts[os.path.basename(path)] for path in files))


# Table files: tsv, csv, jsonl.

def _load_table(kind, path, text_columns, label_column, task_type, label_names, num_classes):
  path = os.path.expanduser(path)
  content = read_utf8(path)
  if kind == "jsonl":
    rows, columns, first_line = _parse_jsonl(path, content)
  else:
    rows, columns, first_line = _parse_delimited(path, content, "\t" if kind == "tsv" else ",")
  if text_columns is None:
    text_columns = next((names for names in DEFAULT_TEXT_COLUMNS if set(names) <= set(columns)), None)
    if text_columns is None:
      raise DataError(path, first_line, f"found none of the default text columns "
                      f"{list(DEFAULT_TEXT_COLUMNS)}; the columns are {columns}: pass text_columns=")
  needed = text_columns + ((label_column,) if task_type != "text" else ())
  if kind != "jsonl":   # a table's columns are its header; JSON objects are checked one by one
    for name in needed:
      if name not in columns:
        raise DataError(path, first_line, f"no column {name!r}; the columns are {columns}")
  texts = [[] for _ in text_columns]
  raw_labels = []
  for line, row in rows:
    for name in needed:
      if name not in row:
        raise DataError(path, line, f"no key {name!r}; the keys are {sorted(row)}")
    for column, name in zip(texts, text_columns, strict=True):
      if not isinstance(row[name], str):
        raise DataError(path, line, f"the text in {name!r} must be a string, got {row[name]!r}")
      column.append(row[name])
    if task_type != "text":
      raw_labels.append((line, row[label_column]))

  if task_type == "regression":
    return _from_columns(texts, task_type, _regression_labels(path, raw_labels))
  if task_type == "classification":
    labels, label_names = _class_labels(path, raw_labels, label_names, num_classes)
    return _from_columns(texts, task_type, labels, label_names)
  return _from_columns(texts, task_type)


def read_utf8(path):
  """The text of a UTF-8 file (a BOM dropped); `DataError` names the file, and the line of a bad byte."""
  if not tf.io.gfile.exists(path):
    raise DataError(path, None, "no such file")
  with tf.io.gfile.GFile(path, "rb") as f:
    data = f.read()
  try:
    return data.decode("utf-8-sig")
  except UnicodeDecodeError as e:
    raise DataError(path, data.count(b"\n", 0, e.start) + 1, f"not valid UTF-8 ({e.reason})") from e


def _parse_delimited(path, content, delimiter):
  """Returns ([(line, {column: str})], header, header line) of a header-first table."""
  kind = "TSV" if delimiter == "\t" else "CSV"
  quoting = csv.QUOTE_NONE if kind == "TSV" else csv.QUOTE_MINIMAL
  reader = csv.reader(io.StringIO(content, newline=""), delimiter=delimiter, quoting=quoting, strict=True)
  header, header_line, rows = None, None, []
  previous_end = 0
  try:
    for fields in reader:
      line, previous_end = previous_end + 1, reader.line_num
      if not fields:   # a blank line
        continue
      if header is None:
        header, header_line = fields, line
        duplicates = sorted({name for name in header if header.count(name) > 1})
        if duplicates:
          raise DataError(path, line, f"the header names column(s) {duplicates} more than once")
      elif len(fields) != len(header):
        raise DataError(path, line, f"expected {len(header)} fields as in the header {header}, found "
                        f"{len(fields)}")
      else:
        rows.append((line, dict(zip(header, fields, strict=True))))
  except csv.Error as e:
    raise DataError(path, reader.line_num, f"malformed {kind}: {e}") from e
  if header is None:
    raise DataError(path, 1, "the file is empty; expected a header row naming the columns")
  if not rows:
    raise DataError(path, header_line + 1, "no examples after the header row")
  return rows, header, header_line


def _parse_jsonl(path, content):
  """Returns ([(line, object)], keys of the first object, first object's line) of a JSON-lines file."""
  rows = []
  for line, text in enumerate(content.split("\n"), start=1):
    if not text.strip():
      continue
    try:
      record = json.loads(text)
    except json.JSONDecodeError as e:
      raise DataError(path, line, f"invalid JSON: {e.msg} (column {e.colno})") from e
    if not isinstance(record, dict):
      raise DataError(path, line, f"expected a JSON object per line, found {type(record).__name__}")
    rows.append((line, record))
  if not rows:
    raise DataError(path, 1, "the file is empty; expected one JSON object per line")
  return rows, sorted(rows[0][1]), rows[0][0]


def _regression_labels(path, raw_labels):
  labels = []
  for line, raw in raw_labels:
    try:
      if isinstance(raw, bool):
        raise ValueError
      value = float(raw)
    except (TypeError, ValueError):
      raise DataError(path, line, f"regression label {raw!r} is not a number") from None
    if not math.isfinite(value):
      raise DataError(path, line, f"regression label {raw!r} is not a finite number")
    labels.append(value)
  return np.array(labels, np.float32)


def _class_labels(path, raw_labels, label_names, num_classes):
  """Returns (int64 ids, label names) of classification labels (see the module docstring)."""
  for line, raw in raw_labels:
    if isinstance(raw, bool) or not isinstance(raw, str | int):
      raise DataError(path, line, f"class label {raw!r} is neither a class name nor an integer id")
    if isinstance(raw, str) and not raw.strip():
      raise DataError(path, line, "empty label")
  labels = [(line, raw.strip() if isinstance(raw, str) else raw) for line, raw in raw_labels]

  if label_names is None and num_classes is None:
    if all(_as_int(raw) is not None for _, raw in labels):
      for line, raw in labels:
        if _as_int(raw) < 0:
          raise DataError(path, line, f"label {raw!r} is out of range: class ids must be >= 0 "
                          "(GLUE test files label every example -1: evaluate on validation)")
      num_classes = max(_as_int(raw) for _, raw in labels) + 1
    else:
      label_names = sorted({str(raw) for _, raw in labels})
  if label_names is None:
    label_names = [str(i) for i in range(num_classes)]
  ids = {name: i for i, name in enumerate(label_names)}
  result = []
  for line, raw in labels:
    label_id = ids.get(raw) if isinstance(raw, str) else None
    if label_id is None:
      label_id = _as_int(raw)
      if label_id is None or not 0 <= label_id < len(label_names):
        raise DataError(path, line, f"label {raw!r} is out of range: expected one of the label names "
                        f"{label_names} or an id in [0, {len(label_names)})")
    result.append(label_id)
  return np.array(result, np.int64), label_names


def _as_int(raw):
  if isinstance(raw, int):
    return raw
  return int(raw) if re.fullmatch(r"[+-]?\d+", raw) else None

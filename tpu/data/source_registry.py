"""The registry of data sources: what `load("scheme:target")` dispatches on.

A source is a `Source` subclass registered with `@register`: it declares its scheme,
the spec's form (`usage`), the options of `load` it takes, the data types it yields
and its splits, and loads a `DataSource`. Nothing outside a source's module names its
scheme: the training job's help, the evaluation split and the options it passes all
ask the registry.

This module imports TensorFlow on first use only (`python -m tpu.train --help` lists
the sources without it).
"""

import dataclasses
from collections.abc import Iterable
from collections.abc import Sequence
from typing import Any
from typing import TypeVar

from zoo.lazy import lazy_module

tf = lazy_module("tensorflow")

# What a source's examples are (`DataSource.data_type`); a task reads one of them (`Task.data_type`).
DATA_TYPES = ("classification", "regression", "text", "tagging", "question_answering", "multiple_choice",
              "pairs", "retrieval")
SOURCES: dict[str, "Source"] = {}

# Every option of `load`, with its default: a source takes the ones it declares in
# `Source.options`; any other one set to a non-default value is an error.
OPTION_DEFAULTS = dict(text_columns=None, label_column=None, data_type=None, label_names=None,
                       num_classes=None, data_dir=None, download=True, shuffle_files=False, seed=0,
                       documents=None)


class DataError(ValueError):
  """A data file is missing or malformed. The message starts with `FILE:LINE:` (or `FILE:`).

  Attributes:
    path: the file (or pattern) at fault.
    line: the 1-based line number, or None when the problem is not on one line.
  """

  def __init__(self, path: str, line: int | None, message: str) -> None:
    self.path = path
    self.line = line
    location = f"{path}:{line}" if line is not None else f"{path}"
    super().__init__(f"{location}: {message}")


@dataclasses.dataclass(frozen=True, eq=False)
class DataSource:
  """Raw examples of one split and their metadata.

  Attributes:
    dataset: `tf.data.Dataset` of dicts: "text_a" (tf.string scalar), "text_b" (only if
      `sentence_pair`), "label" (int64 for classification, float32 for regression, absent
      for "text"); tagging and question answering add their own fields (`tpu.data.tagged`,
      `tpu.data.squad`). Not shuffled, not repeated, not batched.
    data_type: one of `DATA_TYPES`.
    label_names: class names indexed by label id (classification, tagging), else None.
    sentence_pair: whether examples have "text_b".
    num_examples: number of examples, or None when not known without reading everything.
    spec: the spec it was loaded from, e.g. "tfds:glue/mrpc".
    split: the split asked for (None for sources of one split).
    files: the TFRecord shards of pre-tokenized records (then `dataset` is None: the
      input pipeline reads the files itself), else None.
    metadata: the shards' `metadata.json` (`tpu.data.records`), else None.
  """

  dataset: Any
  data_type: str
  label_names: list | None = None
  sentence_pair: bool = False
  num_examples: int | None = None
  spec: str = ""
  split: str | None = None
  files: list | None = None
  metadata: dict | None = None

  @property
  def num_classes(self) -> int | None:
    """Width of the head's output: len(label_names) for classification, 1 for regression, else None."""
    if self.data_type == "classification":
      assert self.label_names is not None, "a classification source names its classes"
      return len(self.label_names)
    return 1 if self.data_type == "regression" else None


class Source:
  """A kind of data spec. Subclasses set the attributes and implement `load`.

  Attributes:
    scheme: the spec's prefix, `scheme:target` (or the whole spec when `target` is "none").
    usage: the spec's form for help texts, e.g. "tsv:PATH".
    description: one line for help texts.
    target: "required" (a file, glob or dataset name follows the colon) or "none".
    options: the `load` options it takes (keys of `OPTION_DEFAULTS`).
    data_types: the data types it can yield.
    splits: the splits it has (then "validation" is its evaluation split), or None: a
      source of one split, which ignores `split`.
    typed_by_caller: whether the caller says how to read its labels (`data_type`): table
      files, whose columns could be any task's.
    reads_files: whether `target` is a path or glob of local or gs:// files (`input_files`).
  """

  scheme = ""
  usage = ""
  description = ""
  target = "required"
  options: frozenset[str] = frozenset()
  data_types: tuple[str, ...] = ()
  splits: tuple[str, ...] | None = None
  typed_by_caller = False
  reads_files = False

  def load(self, target: str, split: str, *args: Any, **options: Any) -> DataSource:
    """The `DataSource` of `scheme:target`; `options` holds the declared options only."""
    raise NotImplementedError

  def input_files(self, target: str, data_dir: str | None = None) -> list[str] | None:
    """The files `scheme:target` reads, sorted (a resumed run fingerprints them:
    `tpu.data.fingerprints`), or None for a source that reads none of the user's (generated data)."""
    return matching_files(target) if self.reads_files else None

  def check_data_type(self, target: str, data_type: str | None) -> None:
    """Refuses a `data_type` this source does not yield (None: its own)."""
    if data_type not in (None, *self.data_types):
      raise ValueError(f"{self.spec(target)} holds {' or '.join(self.data_types)} data; data_type "
                       f"{data_type!r} does not apply")

  def spec(self, target: str = "") -> str:
    """The spec string of `target` for this source."""
    return f"{self.scheme}:{target}" if self.target == "required" else self.scheme


SourceType = TypeVar("SourceType", bound=Source)


def register(cls: type[SourceType]) -> type[SourceType]:
  """Class decorator: registers a `Source` subclass under its scheme."""
  if not cls.scheme or cls.scheme in SOURCES:
    raise ValueError(f"a source needs a new, non-empty scheme; got {cls.scheme!r} (taken: {sorted(SOURCES)})")
  unknown = set(cls.options) - set(OPTION_DEFAULTS)
  if unknown or not set(cls.data_types) <= set(DATA_TYPES) or cls.target not in ("required", "none"):
    raise ValueError(f"source {cls.scheme!r}: options must be among {sorted(OPTION_DEFAULTS)}, data types "
                     f"among {DATA_TYPES}, target 'required' or 'none'")
  SOURCES[cls.scheme] = cls()
  return cls


def unregister(scheme: str) -> None:
  """Removes a source (for tests that register a source of their own)."""
  SOURCES.pop(scheme)


def usages() -> list[str]:
  """The registered spec forms, e.g. ['tfds:NAME[/CONFIG]', 'tsv:PATH', ...]."""
  return [source.usage for source in SOURCES.values()]


def source_of(spec: str) -> Source:
  """The `Source` of a spec; a ValueError lists the registered ones."""
  scheme = spec.partition(":")[0]
  if scheme not in SOURCES:
    raise ValueError(f"unknown data spec {spec!r}: expected one of {', '.join(usages())}")
  return SOURCES[scheme]


def load(spec: str, split: str = "train", **options: Any) -> DataSource:
  """Returns the `DataSource` of a spec (see `tpu.data` for the specs).

  Args:
    spec: "scheme:target" (or a bare scheme, for sources without a target).
    split: "train" or "validation" (and the source's other splits, TFDS slices);
      ignored by sources of one split.
    **options: `OPTION_DEFAULTS`' options; each source takes its own (`Source.options`).

  Raises:
    ValueError: unknown spec, dataset or split; an option that the source does not take.
    DataError: a file is missing, empty or malformed; the message names file and line.
  """
  unknown = sorted(set(options) - set(OPTION_DEFAULTS))
  if unknown:
    raise TypeError(f"load() got unknown option(s) {unknown}; the options are {sorted(OPTION_DEFAULTS)}")
  source = source_of(spec)
  scheme, _, target = spec.partition(":")
  if source.target == "none" and target:
    hint = " (its seed is the seed= option)" if "seed" in source.options else ""
    raise ValueError(f"data spec {spec!r}: write just {scheme!r}{hint}")
  if source.target == "required" and not target:
    raise ValueError(f"data spec {spec!r} names no {source.usage.partition(':')[2].lower() or 'target'} "
                     f"after '{scheme}:' (expected {source.usage})")
  unsupported = sorted(name for name, value in options.items()
                       if value != OPTION_DEFAULTS[name] and name not in source.options)
  if unsupported:
    raise ValueError(f"option(s) {', '.join(unsupported)} do not apply to {scheme} specs ({spec!r}); "
                     f"they take {', '.join(sorted(source.options)) or 'none'}")
  data_type = options.get("data_type")
  if data_type is not None and data_type not in DATA_TYPES:
    raise ValueError(f"data_type must be one of {DATA_TYPES}, got {data_type!r}")
  label_names = options.get("label_names")
  if label_names is not None:
    label_names = [str(name) for name in label_names]
    num_classes = options.get("num_classes")
    if num_classes is not None and num_classes != len(label_names):
      raise ValueError(f"num_classes={num_classes} but {len(label_names)} label_names were given: "
                       f"{label_names}")
  taken = {name: options.get(name, OPTION_DEFAULTS[name]) for name in source.options}
  if "label_names" in taken:
    taken["label_names"] = label_names
  result = source.load(target, split, **taken)
  return dataclasses.replace(result, spec=spec, split=split if source.splits is not None else None)


def input_files(spec: str, data_dir: str | None = None) -> list[str] | None:
  """The files the data spec reads (`Source.input_files`), or None."""
  return source_of(spec).input_files(spec.partition(":")[2], data_dir=data_dir)


def check_same_labels(spec: str, source: DataSource, label_names: Sequence[str] | None,
                      num_classes: int | None) -> None:
  """Refuses `label_names` / `num_classes` given for a dataset whose classes are fixed but differ."""
  if label_names is not None and list(label_names) != source.label_names:
    raise ValueError(f"{spec} has label names {source.label_names}, not the label_names given: {label_names}")
  if num_classes is not None and num_classes != source.num_classes:
    raise ValueError(f"{spec} has {source.num_classes} classes, not num_classes={num_classes}")


def from_columns(texts: Sequence[Sequence[str]], data_type: str, labels: Any = None,
                 label_names: list[str] | None = None) -> DataSource:
  """A DataSource from Python lists of text (one or two) and a numpy array of labels."""
  tensors = {"text_a": tf.constant(texts[0], tf.string)}
  if len(texts) == 2:
    tensors["text_b"] = tf.constant(texts[1], tf.string)
  if data_type != "text":
    tensors["label"] = tf.constant(labels)
  return DataSource(tf.data.Dataset.from_tensor_slices(tensors), data_type, label_names,
                    sentence_pair=len(texts) == 2, num_examples=len(texts[0]))


def text_columns_tuple(text_columns: str | Sequence[str] | None) -> tuple[str, ...] | None:
  """One or two column names as a tuple (None stays None); a ValueError otherwise."""
  if text_columns is None:
    return None
  columns = (text_columns,) if isinstance(text_columns, str) else tuple(text_columns)
  if len(columns) not in (1, 2) or not all(isinstance(column, str) for column in columns):
    raise ValueError(f"text_columns must be one or two column names, got {text_columns!r}")
  return columns


def missing_file(path: str, listed: bool = False) -> str:
  """Why the file `path` is not there, for a message after its name: a symbolic link whose target does not
  exist names its target; else no file has the name (`listed`: it was listed a moment ago, so it was
  removed since)."""
  import os
  if "://" not in path and os.path.islink(path):
    return f"a symbolic link to {os.readlink(path)}, which does not exist"
  return "no such file (removed since it was listed)" if listed else "no such file"


def dangling_links(paths: Iterable[str]) -> list[str]:
  """The local paths among `paths` that are symbolic links whose targets do not exist."""
  import os
  return [path for path in paths if "://" not in path and os.path.islink(path) and not os.path.exists(path)]


def read_utf8(path: str) -> str:
  """The text of a UTF-8 file (a BOM dropped); `DataError` names the file, and the line of a bad byte, or
  why it cannot be read (a dangling symbolic link, no such file, no permission)."""
  if not tf.io.gfile.exists(path):
    raise DataError(path, None, missing_file(path))
  try:
    with tf.io.gfile.GFile(path, "rb") as f:
      data = f.read()
  except tf.errors.NotFoundError:   # removed since
    raise DataError(path, None, missing_file(path, listed=True)) from None
  except tf.errors.OpError as error:
    raise DataError(path, None, f"cannot be read: {error.message}") from None
  try:
    return data.decode("utf-8-sig")
  except UnicodeDecodeError as e:
    raise DataError(path, data.count(b"\n", 0, e.start) + 1, f"not valid UTF-8 ({e.reason})") from e


def json_lines(path: str, content: str | None = None) -> list[tuple[int, dict[str, Any]]]:
  """`[(line number, object)]` of a JSON-lines file (blank lines skipped); `DataError` names the line of
  invalid JSON or of a value that is not an object, and an empty file. `content`: the file's text, if
  read already."""
  import json
  rows = []
  text = read_utf8(path) if content is None else content
  for number, line in enumerate(text.split("\n"), start=1):
    if not line.strip():
      continue
    try:
      record = json.loads(line)
    except json.JSONDecodeError as e:
      raise DataError(path, number, f"invalid JSON: {e.msg} (column {e.colno})") from None
    if not isinstance(record, dict):
      raise DataError(path, number, f"expected a JSON object per line, found {type(record).__name__}")
    rows.append((number, record))
  if not rows:
    raise DataError(path, 1, "the file is empty; expected one JSON object per line")
  return rows


def matching_files(pattern: str) -> list[str]:
  """The files of a local or `gs://` glob, sorted; `DataError` when none matches, or naming a match that
  is a symbolic link whose target does not exist."""
  import os
  pattern = os.path.expanduser(pattern)
  files = sorted(path for path in tf.io.gfile.glob(pattern) if not tf.io.gfile.isdir(path))
  if not files:
    raise DataError(pattern, None, "no file matches this pattern")
  dangling = dangling_links(files)
  if dangling:
    raise DataError(dangling[0], None, missing_file(dangling[0]))
  return files

"""Table files: `tsv:PATH`, `csv:PATH`, `jsonl:PATH` (one split each).

TSV has no quoting (as GLUE's files), CSV uses standard double-quote quoting, JSON
lines are one object per line. They are read and checked in Python first (they are
meant to be small to medium: the parsed rows become constants of the dataset graph,
which must stay under 2 GB); a malformed file raises `DataError` naming the file and
line. Their columns:

- `text_columns`: one name (single sentence) or two (a pair). By default the first of
  `DEFAULT_TEXT_COLUMNS` whose names are all columns of the file:
  ("sentence1", "sentence2"), ("text_a", "text_b"), ("premise", "hypothesis"),
  ("sentence",), ("text",).
- `label_column`: default "label". For classification, labels are class names mapped
  to ids in sorted order of the names seen, or, if every label is an integer, the ids
  themselves (0 .. max). Pass the train source's `label_names` when loading the
  validation file, so both use the same ids; then a label that is not one of those
  names (nor an id in range) is an error, as is an id outside `[0, num_classes)`.
  For `data_type="regression"` labels are numbers (float32); `data_type="text"` needs
  no label. JSON lines with `data_type="tagging"` are tagged sentences
  (`tpu.data.tagged`).
"""

import csv
import io
import math
import os
import re
from collections.abc import Sequence

import numpy as np

from tpu.data import tagged
from tpu.data.source_registry import DataError
from tpu.data.source_registry import DataSource
from tpu.data.source_registry import Source
from tpu.data.source_registry import from_columns
from tpu.data.source_registry import json_lines
from tpu.data.source_registry import read_utf8
from tpu.data.source_registry import register
from tpu.data.source_registry import text_columns_tuple

DEFAULT_TEXT_COLUMNS = (("sentence1", "sentence2"), ("text_a", "text_b"), ("premise", "hypothesis"),
                        ("sentence",), ("text",))
DEFAULT_LABEL_COLUMN = "label"


class _Table(Source):
  options = frozenset({"text_columns", "label_column", "data_type", "label_names", "num_classes"})
  data_types: tuple[str, ...] = ("classification", "regression", "text")
  typed_by_caller = True
  reads_files = True

  def load(self, target: str, split: str, *, text_columns: str | Sequence[str] | None,
           label_column: str | None, data_type: str | None, label_names: Sequence[str] | None,
           num_classes: int | None) -> DataSource:
    if data_type not in (None, *self.data_types):
      raise ValueError(f"{self.spec(target)} holds one of {self.data_types} data, not {data_type!r}")
    return load_table(self.scheme, target, text_columns_tuple(text_columns),
                      label_column or DEFAULT_LABEL_COLUMN, data_type or "classification", label_names,
                      num_classes)


@register
class TsvSource(_Table):
  scheme = "tsv"
  usage = "tsv:PATH"
  description = ("a tab-separated table with a header row (no quoting, as GLUE's files; text pairs "
                 "with --task embed)")
  data_types = ("classification", "regression", "text", "pairs")

  def load(self, target: str, split: str, *, text_columns: str | Sequence[str] | None,
           label_column: str | None, data_type: str | None, label_names: Sequence[str] | None,
           num_classes: int | None) -> DataSource:
    if data_type == "pairs":   # imported here: its sources register after the tables'
      from tpu.data import text_pairs
      return text_pairs.load_tsv(target)
    return super().load(target, split, text_columns=text_columns, label_column=label_column,
                        data_type=data_type, label_names=label_names, num_classes=num_classes)


@register
class CsvSource(_Table):
  scheme = "csv"
  usage = "csv:PATH"
  description = "a comma-separated table with a header row (double-quote quoting)"


@register
class JsonlSource(_Table):
  scheme = "jsonl"
  usage = "jsonl:PATH"
  description = ("one JSON object per line (tagged sentences with --task tag, questions with --task "
                 "multiple_choice, text pairs with --task embed)")
  data_types = ("classification", "regression", "text", "tagging", "multiple_choice", "pairs")

  def load(self, target: str, split: str, *, text_columns: str | Sequence[str] | None,
           label_column: str | None, data_type: str | None, label_names: Sequence[str] | None,
           num_classes: int | None) -> DataSource:
    if data_type == "multiple_choice":   # imported here: its sources register after the tables'
      from tpu.data import choice_questions
      return choice_questions.load_jsonl(target)
    if data_type == "pairs":
      from tpu.data import text_pairs
      return text_pairs.load_jsonl(target)
    if data_type == "tagging":
      columns = text_columns_tuple(text_columns)
      return tagged.load_jsonl(os.path.expanduser(target), words_key=columns[0] if columns else None,
                               tags_key=label_column, label_names=label_names)
    return super().load(target, split, text_columns=text_columns, label_column=label_column,
                        data_type=data_type, label_names=label_names, num_classes=num_classes)


def load_table(kind: str, path: str, text_columns: tuple[str, ...] | None, label_column: str, data_type: str,
               label_names: Sequence[str] | None, num_classes: int | None) -> DataSource:
  """The `DataSource` of a table file (see the module docstring)."""
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
  needed = text_columns + ((label_column,) if data_type != "text" else ())
  if kind != "jsonl":   # a table's columns are its header; JSON objects are checked one by one
    for name in needed:
      if name not in columns:
        raise DataError(path, first_line, f"no column {name!r}; the columns are {columns}")
  texts: list[list[str]] = [[] for _ in text_columns]
  raw_labels = []
  for line, row in rows:
    for name in needed:
      if name not in row:
        raise DataError(path, line, f"no key {name!r}; the keys are {sorted(row)}")
    for column, name in zip(texts, text_columns, strict=True):
      if not isinstance(row[name], str):
        raise DataError(path, line, f"the text in {name!r} must be a string, got {row[name]!r}")
      column.append(row[name])
    if data_type != "text":
      raw_labels.append((line, row[label_column]))

  if data_type == "regression":
    return from_columns(texts, data_type, _regression_labels(path, raw_labels))
  if data_type == "classification":
    labels, names = _class_labels(path, raw_labels, label_names, num_classes)
    return from_columns(texts, data_type, labels, names)
  return from_columns(texts, data_type)




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
  rows = json_lines(path, content)
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

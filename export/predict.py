"""Predictions from an exported SavedModel, one JSON object per line on stdout.

  python -m export.predict --saved-model DIR "a fine film" "a dull plot"
  printf 'a fine film\\na dull plot\\n' | python -m export.predict --saved-model DIR
  python -m export.predict --saved-model DIR "premise" --text-b "hypothesis"      # sentence pairs
  printf 'premise\\thypothesis\\n' | python -m export.predict --saved-model DIR

DIR is a version directory (`BASE/3`) or a model base path (`BASE`, whose highest
numeric version is used). Without TEXT arguments each line of stdin is one example
(tab-separated `text<TAB>text_b` for sentence-pair models; for a model with other
inputs, one JSON object per line with them, e.g. a multiple-choice model's
`{"context": ..., "question": ..., "options": [...]}`). Output per example, e.g.

  a classifier:  {"text": ..., "label": "positive", "probabilities": {"negative": 0.1, "positive": 0.9}}
  a real value:  {"text": ..., "prediction": 3.2}
  an encoder:    {"text": ..., "pooled_output": [...]}
  per word:      {"text": ..., "words": ["paris", "!"], "tags": ["B-LOC", "O"], "probabilities": [0.9, 0.8]}
  an answer:     {"question": ..., "context": ..., "answer": "Paris", "start": 16, "end": 21, "score": 9.1}
  a choice:      {"context": ..., "question": ..., "options": [...], "choice": 2, "probabilities": [...]}

with "text_b" after "text" for sentence pairs. Which fields an example gets is the
SavedModel's `prediction_fields` (written by the exporter from the training task):
`[key, signature output, kind]` triples, kind one of `KINDS`. Exports without it
(older ones) get the fields their `serving_default` outputs imply.

Needs only tensorflow and tensorflow-text: this file imports nothing else, so it can be
copied on its own to a serving box. `import tensorflow_text` comes before loading,
since it registers the tokenizer ops of the SavedModel. Both are imported on first
use, so `--help` answers at once.

From Python:

  predictor = load("export/")
  predictor.predict(["a fine film"])   # [{"text": "a fine film", "label": ..., "probabilities": {...}}]
"""

import argparse
import itertools
import json
import os
import re
import sys
import types
from collections.abc import Collection
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any
from typing import TypeAlias
from typing import TypeVar

SAVED_MODEL_FILE = "saved_model.pb"
# What the exporter writes beside it (`tpu.serving.MODEL_INFO_FILE`): read for `num_choices`.
MODEL_INFO_FILE = "model_info.json"
DEFAULT_BATCH_SIZE = 64
# How one output of one example is shown: a string, a float, a list of floats, a list of
# strings, or a dict of floats keyed by the SavedModel's label names.
KINDS = ("text", "number", "integer", "flag", "list", "texts", "by_label")
# One output of one example as `show` gives it (the JSON value of its kind).
Shown: TypeAlias = str | float | int | bool | list[float] | list[str] | dict[str, float]
Example = TypeVar("Example")


def _tensorflow() -> types.ModuleType:
  """TensorFlow, with tensorflow_text's ops registered (imported on first use)."""
  import tensorflow as tf
  import tensorflow_text  # noqa: F401  (registers the tokenizer ops the SavedModel uses)
  return tf


def resolve(path: str) -> str:
  """The SavedModel directory of `path`: itself, or the highest numeric version in it holding one.

  The version rule is `zoo.model_dir.latest_export`'s, written out here because this file
  imports nothing of the project (`tests/export/test_predict.py` holds the two to the same
  answers).
  """
  tf = _tensorflow()
  if tf.io.gfile.exists(os.path.join(path, SAVED_MODEL_FILE)):
    return path
  if not tf.io.gfile.isdir(path):
    raise FileNotFoundError(f"{path} does not exist")
  names = [name.rstrip("/") for name in tf.io.gfile.listdir(path)]
  versions = [name for name in names if re.fullmatch(r"[0-9]+", name)
              and tf.io.gfile.exists(os.path.join(path, name, SAVED_MODEL_FILE))]
  if not versions:
    raise FileNotFoundError(f"{path} holds neither a {SAVED_MODEL_FILE} nor numeric version directories "
                            "with one")
  return os.path.join(path, max(versions, key=int))


def _text(value: str | bytes) -> str:
  return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else value


def implied_fields(outputs: Collection[str]) -> list[tuple[str, str, str]]:
  """The prediction fields of an export without `prediction_fields`, from its output names."""
  if "labels" in outputs:
    return [("label", "labels", "text"), ("probabilities", "probabilities", "by_label")]
  if "predictions" in outputs:
    return [("prediction", "predictions", "number")]
  return [("pooled_output", "pooled_output", "list")]


def _brief(value: Any, limit: int = 60) -> str:
  json_types = (str, list, dict, int, float, bool, type(None))
  text = json.dumps(value, ensure_ascii=False) if isinstance(value, json_types) else repr(value)
  return text if len(text) <= limit else text[:limit - 3] + "..."


def check_record(record: Any, names: Sequence[str], lists: Mapping[str, int | None], where: str) -> None:
  """Raises a ValueError starting with `where` (e.g. "stdin, line 3") unless `record` holds each input of
  `names`: a text (str or bytes), or for the inputs in `lists` a non-empty list of texts, `lists[name]` of
  them unless that is None.

  Example:
    >>> check_record({"context": "c", "options": ["a", 2]}, ["context", "options"], {"options": 2}, "line 1")
    Traceback (most recent call last):
    ...
    ValueError: line 1: options[1] must be a text (a JSON string), got 2
  """
  if not isinstance(record, Mapping):
    raise ValueError(f"{where}: expected an object with {', '.join(names)}, got {_brief(record)}")
  for name in names:
    if name not in record:
      raise ValueError(f"{where}: no {name!r}; the model takes {', '.join(names)}")
    value = record[name]
    if name not in lists:
      if not isinstance(value, (str, bytes)):
        raise ValueError(f"{where}: {name} must be a text (a JSON string), got {_brief(value)}")
      continue
    if not isinstance(value, (list, tuple)):
      raise ValueError(f"{where}: {name} must be a list of texts (JSON strings), got {_brief(value)}")
    for index, item in enumerate(value):
      if not isinstance(item, (str, bytes)):
        raise ValueError(f"{where}: {name}[{index}] must be a text (a JSON string), got {_brief(item)}")
    count = lists[name]
    if not value or count is not None and len(value) != count:
      takes = "at least one" if count is None else f"{count} per example"
      raise ValueError(f"{where}: {name} has {len(value)} texts; the model takes {takes}")


def show(value: Any, kind: str, label_names: Sequence[str]) -> Shown:
  """One example's output as JSON-ready Python, by `kind` (see `KINDS`)."""
  if kind == "text":
    return _text(value.item() if hasattr(value, "item") else value)
  if kind == "number":
    return float(value)
  if kind == "integer":
    return int(value)
  if kind == "flag":
    return bool(value)
  if kind == "list":
    return [float(item) for item in value]
  if kind == "texts":
    return [_text(item) for item in value]
  if kind == "by_label":
    return {name: float(item) for name, item in zip(label_names, value, strict=True)}
  raise ValueError(f"unknown prediction field kind {kind!r}; known: {', '.join(KINDS)}")


class Predictor:
  """A loaded SavedModel of `export.saved_model` and its `serving_default` signature.

  Attributes: `path` (the version directory), `inputs` (the names of the string inputs:
  the SavedModel's `text_inputs`, e.g. ["text"] or ["text", "text_b"]), `sentence_pair`
  (two inputs), `list_inputs` (`{name: count}` of the inputs that take a list of texts per
  example, e.g. a multiple-choice model's options, with the count each takes: the
  `num_choices` of `model_info.json`, or None where it records none), `label_names`, and
  `fields`, the `(key, output, kind)` triples each example's result is made of; a fourth
  element names an output holding each example's length, to which vector outputs are cut.
  """

  def __init__(self, path: str) -> None:
    tf = _tensorflow()
    self.path = resolve(path)
    self._loaded = tf.saved_model.load(self.path)
    self._serve = self._loaded.signatures["serving_default"]
    if hasattr(self._loaded, "text_inputs"):
      self.inputs = list(json.loads(self._loaded.text_inputs.numpy()))
    else:
      self.inputs = ["text"] + (["text_b"] if "text_b" in self._serve.structured_input_signature[1] else [])
    self.sentence_pair = len(self.inputs) == 2
    info_path = os.path.join(self.path, MODEL_INFO_FILE)
    info = {}
    if tf.io.gfile.exists(info_path):
      with tf.io.gfile.GFile(info_path) as file:
        info = json.loads(file.read())
    specs = self._serve.structured_input_signature[1]
    self.list_inputs = {name: info.get("num_choices") for name in self.inputs
                        if name in specs and specs[name].shape.rank == 2}
    self.label_names = [_text(name) for name in self._loaded.label_names.numpy()]
    if hasattr(self._loaded, "prediction_fields"):
      self.fields = [tuple(field) for field in json.loads(self._loaded.prediction_fields.numpy())]
    else:
      self.fields = implied_fields(self._serve.structured_outputs)

  def predict(self, texts: Iterable[str | bytes],
              texts_b: Iterable[str | bytes] | None = None) -> list[dict[str, Any]]:
    """One dict per example (see the module docstring) for lists of str or bytes.

    `texts` go to the first string input, `texts_b` to the second of two-input models.
    """
    columns = [list(texts)]
    if self.sentence_pair != (texts_b is not None):
      need = (f"needs a second text per example ({self.inputs[1]})" if self.sentence_pair
              else "takes single texts")
      raise ValueError(f"the model at {self.path} {need}")
    if texts_b is not None:
      columns.append(list(texts_b))
      if len(columns[1]) != len(columns[0]):
        raise ValueError(f"got {len(columns[0])} texts but {len(columns[1])} second texts ({self.inputs[1]})")
    rows = zip(*columns, strict=True)
    return self.predict_records([dict(zip(self.inputs, row, strict=True)) for row in rows])

  @property
  def takes_records(self) -> bool:
    """Whether the model's inputs are other than one or two texts (e.g. a context, a question and a list of
    options): then examples are records, `predict_records`."""
    return self.inputs not in (["text"], ["text", "text_b"])

  def predict_records(self, records: Sequence[Mapping[str, Any]],
                      where: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """One dict per example for records `{input name: text, or a list of texts}` (lists of one length in a
    call: the model's, `list_inputs`), each result the record's inputs followed by the model's fields.

    A malformed record raises a ValueError naming it by `where[i]` (default "example i", from 1) and the
    input."""
    tf = _tensorflow()
    where = list(where) if where is not None else [f"example {index + 1}" for index in range(len(records))]
    first: dict[str, int] = {}
    for place, record in zip(where, records, strict=True):
      try:
        check_record(record, self.inputs, self.list_inputs, place)
      except ValueError as error:
        raise ValueError(f"{error} (the model at {self.path})") from None
      for name in self.list_inputs:   # without a recorded count, the first example's is the call's
        count = first.setdefault(name, len(record[name]))
        if len(record[name]) != count:
          raise ValueError(f"{place}: {name} has {len(record[name])} texts, but the call's first example has "
                           f"{count}: every example of a call needs as many")
    inputs = {name: tf.constant([record[name] for record in records], tf.string) for name in self.inputs}
    outputs = {name: value.numpy() for name, value in self._serve(**inputs).items()}
    results = []
    for index in range(len(records)):
      result: dict[str, Any] = {name: _shown_input(records[index][name]) for name in self.inputs}
      for key, output, kind, *length in self.fields:
        value = outputs[output][index]
        if length:
          value = value[:int(outputs[length[0]][index])]
        result[key] = show(value, kind, self.label_names)
      results.append(result)
    return results


def _shown_input(value: Any) -> str | list[str]:
  return [_text(item) for item in value] if isinstance(value, (list, tuple)) else _text(value)


def load(path: str) -> Predictor:
  """A `Predictor` for a version directory or a model base path."""
  return Predictor(path)


def read_examples(lines: Iterable[bytes], sentence_pair: bool) -> Iterator[tuple[bytes, bytes | None]]:
  """Lines (bytes) -> `(text, text_b or None)`; pairs are tab-separated.

  Example:
    >>> list(read_examples([b"a fine film\\n", b"\\n"], sentence_pair=False))
    [(b'a fine film', None), (b'', None)]
    >>> list(read_examples([b"a premise\\ta hypothesis\\r\\n"], sentence_pair=True))
    [(b'a premise', b'a hypothesis')]
  """
  for number, line in enumerate(lines, start=1):
    line = line.rstrip(b"\r\n")
    if not sentence_pair:
      yield line, None
      continue
    text, tab, text_b = line.partition(b"\t")
    if not tab:
      raise ValueError(f"stdin, line {number}: this model takes sentence pairs; write text<TAB>text_b")
    yield text, text_b


def read_records(lines: Iterable[bytes], names: Sequence[str]) -> Iterator[dict[str, Any]]:
  """Lines (bytes) of JSON objects -> dicts with the keys `names` (a model taking records).

  Example:
    >>> list(read_records([b'{"context": "c", "question": "q", "options": ["a", "b"]}\\n'],
    ...                   ["context", "question", "options"]))
    [{'context': 'c', 'question': 'q', 'options': ['a', 'b']}]
  """
  for _, record in numbered_records(lines, names):
    yield record


def numbered_records(lines: Iterable[bytes], names: Sequence[str]) -> Iterator[tuple[str, dict[str, Any]]]:
  """`read_records` with where each record is, `("stdin, line N", record)`."""
  for number, line in enumerate(lines, start=1):
    if not line.strip():
      continue
    try:
      record = json.loads(line)
    except ValueError as error:
      raise ValueError(f"stdin, line {number}: not a JSON object ({error}); this model takes one JSON object "
                       f"per line with {', '.join(names)}") from None
    missing = [name for name in names if not isinstance(record, dict) or name not in record]
    if missing:
      raise ValueError(f"stdin, line {number}: no {', '.join(missing)}; this model takes one JSON object per "
                       f"line with {', '.join(names)}")
    yield f"stdin, line {number}", {name: record[name] for name in names}


def _batches(examples: Iterable[Example], batch_size: int) -> Iterator[list[Example]]:
  examples = iter(examples)
  while batch := list(itertools.islice(examples, batch_size)):
    yield batch


def _program() -> str:
  """The console script's name when run as one (`zoo-predict`), else "" (`zoo.logs.command_name`'s rule,
  written out: see `resolve`)."""
  program = os.path.basename(sys.argv[0]) if sys.argv else ""
  return program if program.startswith("zoo-") else ""


def _error_prefix() -> str:
  return _program() or "export.predict"


def parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(prog=_program() or "python -m export.predict",
                              description=__doc__.split("\n\n")[0],
                              epilog="Without TEXT, reads one example per line from stdin.")
  p.add_argument("--saved-model", required=True, metavar="DIR",
                 help="a SavedModel version directory, or a model base path (its highest version is used)")
  p.add_argument("texts", nargs="*", metavar="TEXT", help="texts to predict (default: lines of stdin)")
  p.add_argument("--text-b", nargs="+", metavar="TEXT_B",
                 help="second texts of sentence-pair models, one per TEXT")
  p.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE,
                 help=f"examples per call of the model (default {DEFAULT_BATCH_SIZE})")
  p.add_argument("-v", "--verbose", action="store_true", help="show TensorFlow's log lines")
  return p


def main(argv: Sequence[str] | None = None) -> int:
  args = parser().parse_args(argv)
  os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0" if args.verbose else "3"
  tf = _tensorflow()
  if not args.verbose:
    tf.get_logger().setLevel("ERROR")
  try:
    if args.batch_size < 1:
      raise ValueError(f"--batch-size must be positive, got {args.batch_size}")
    if args.text_b and not args.texts:
      raise ValueError("--text-b needs TEXT arguments (stdin takes text<TAB>text_b lines instead)")
    if args.text_b and len(args.text_b) != len(args.texts):
      raise ValueError(f"got {len(args.texts)} TEXT arguments but {len(args.text_b)} --text-b")
    predictor = load(args.saved_model)
    if predictor.takes_records:
      if args.texts:
        raise ValueError(f"the model at {predictor.path} takes {', '.join(predictor.inputs)} per example: "
                         "write one JSON object per line on stdin")
      for numbered in _batches(numbered_records(sys.stdin.buffer, predictor.inputs), args.batch_size):
        where, records = zip(*numbered, strict=True)
        for result in predictor.predict_records(records, where):
          print(json.dumps(result))
        sys.stdout.flush()
      return 0
    examples: Iterable[tuple[bytes, bytes | None]]
    if args.texts:
      if predictor.sentence_pair and not args.text_b:
        raise ValueError(f"the model at {predictor.path} takes sentence pairs: pass --text-b with one second "
                         "text per TEXT, or tab-separated lines on stdin")
      seconds = [os.fsencode(text) for text in args.text_b] if args.text_b else [None] * len(args.texts)
      examples = zip([os.fsencode(text) for text in args.texts], seconds, strict=True)
    else:
      examples = read_examples(sys.stdin.buffer, predictor.sentence_pair)
    for batch in _batches(examples, args.batch_size):
      texts, texts_b = zip(*batch, strict=True)
      for result in predictor.predict(texts, None if texts_b[0] is None else texts_b):
        print(json.dumps(result))
      sys.stdout.flush()
  except (FileNotFoundError, ValueError) as error:
    print(f"{_error_prefix()}: error: {error}", file=sys.stderr)
    return 2
  except tf.errors.OpError as error:
    print(f"{_error_prefix()}: error: {error.message}", file=sys.stderr)
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())

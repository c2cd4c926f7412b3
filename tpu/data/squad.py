"""Extractive question answering (data type "question_answering"): `squad:PATH` and TFDS's SQuAD.

- `squad:PATH`: a file in SQuAD's JSON format (v1.1 or v2.0);
- `tfds:squad/v1.1`, `tfds:squad/v2.0`.

Elements: {"text_a": question, "text_b": context, "id": string, "answers": string [k],
"answer_starts": int32 [k] (characters into the context), "is_impossible": bool}.

A malformed file raises `DataError` naming the file and the entry (invalid JSON, an
entry without its fields, an answer outside its context).
"""

import dataclasses
import json
import os
from typing import Any

from tpu.data import tfds_datasets
from tpu.data.source_registry import DataError
from tpu.data.source_registry import DataSource
from tpu.data.source_registry import Source
from tpu.data.source_registry import read_utf8
from tpu.data.source_registry import register
from tpu.data.tagged import ragged
from zoo.lazy import lazy_module

tf = lazy_module("tensorflow")

QUESTION_ANSWERING = "question_answering"


@dataclasses.dataclass(frozen=True, eq=False)
class QuestionAnsweringSource(DataSource):
  """A `DataSource` of SQuAD examples; `unanswerable`: some questions have no answer (SQuAD v2.0)."""

  unanswerable: bool = False


@register
class SquadSource(Source):
  scheme = "squad"
  usage = "squad:PATH"
  reads_files = True
  description = "questions and contexts in SQuAD's JSON format (v1.1 or v2.0)"
  options = frozenset({"data_type"})
  data_types = (QUESTION_ANSWERING,)

  def load(self, target: str, split: str, *, data_type: str | None) -> QuestionAnsweringSource:
    if data_type not in (None, QUESTION_ANSWERING):
      raise ValueError(f"{self.spec(target)} holds {QUESTION_ANSWERING} data; data_type {data_type!r} does "
                       "not apply")
    return load_squad_json(os.path.expanduser(target))


class _TfdsSquad:
  """`tfds:squad/v1.1` and `tfds:squad/v2.0`."""

  data_type = QUESTION_ANSWERING

  def __init__(self, unanswerable: bool) -> None:
    self.unanswerable = unanswerable

  def load(self, name: str, split: str, *, data_dir: str | None, download: bool, shuffle_files: bool,
         data_type: str | None = None, **unused: Any) -> QuestionAnsweringSource:
    if data_type not in (None, QUESTION_ANSWERING):
      raise ValueError(f"{tfds_datasets.spec_of(name)} holds {QUESTION_ANSWERING} data; data_type "
                       f"{data_type!r} does not apply")
    builder = tfds_datasets.tfds_builder(name, data_dir)
    tfds_split = tfds_datasets.split_name(name, split, tfds_datasets.TRAIN_VALIDATION)
    dataset, count = tfds_datasets.read(builder, tfds_split, download, shuffle_files)
    unanswerable = self.unanswerable

    def question(example):
      answers = example["answers"]
      # Equal but in mock data.
      count = tf.minimum(tf.size(answers["text"]), tf.size(answers["answer_start"]))
      impossible = tf.cast(example["is_impossible"], tf.bool) if unanswerable else tf.constant(False)
      count = tf.where(impossible, 0, count)
      return dict(text_a=example["question"], text_b=example["context"], id=example["id"],
                  answers=answers["text"][:count],
                  answer_starts=tf.cast(answers["answer_start"][:count], tf.int32),
                  is_impossible=impossible)

    dataset = ragged(dataset.map(question, num_parallel_calls=tf.data.AUTOTUNE),
                     ("answers", "answer_starts"))
    return QuestionAnsweringSource(dataset, QUESTION_ANSWERING, sentence_pair=True, num_examples=count,
                                   unanswerable=unanswerable)


tfds_datasets.register_dataset("squad/v1.1", _TfdsSquad(unanswerable=False))
tfds_datasets.register_dataset("squad/v2.0", _TfdsSquad(unanswerable=True))


def load_squad_json(path: str) -> QuestionAnsweringSource:
  text = read_utf8(path)
  try:
    content = json.loads(text)
  except json.JSONDecodeError as e:
    raise DataError(path, e.lineno, f"invalid JSON: {e.msg} (column {e.colno})") from e
  if not isinstance(content, dict) or not isinstance(content.get("data"), list):
    raise DataError(path, 1, "expected SQuAD's format: an object whose \"data\" is a list of articles")
  columns: dict[str, list[Any]] = dict(text_a=[], text_b=[], id=[], answers=[], answer_starts=[],
                                       is_impossible=[])
  counts = []
  unanswerable = False
  for article_index, article in enumerate(content["data"]):
    paragraphs = _items(path, article, "paragraphs", f"data[{article_index}]")
    for paragraph_index, paragraph in enumerate(paragraphs):
      where = f"data[{article_index}].paragraphs[{paragraph_index}]"
      context = _field(path, paragraph, "context", str, where)
      for qa_index, qa in enumerate(_items(path, paragraph, "qas", where)):
        here = f"{where}.qas[{qa_index}]"
        impossible = bool(qa.get("is_impossible", False)) if isinstance(qa, dict) else False
        unanswerable = unanswerable or impossible
        answers = [] if impossible else _items(path, qa, "answers", here)
        columns["text_a"].append(_field(path, qa, "question", str, here))
        columns["text_b"].append(context)
        columns["id"].append(str(_field(path, qa, "id", (str, int), here)))
        columns["is_impossible"].append(impossible)
        for answer_index, answer in enumerate(answers):
          at = f"{here}.answers[{answer_index}]"
          columns["answers"].append(_field(path, answer, "text", str, at))
          start = _field(path, answer, "answer_start", int, at)
          if not 0 <= start <= len(context):
            raise DataError(path, None, f"{at}: answer_start {start} is outside the context "
                            f"({len(context)} characters)")
          columns["answer_starts"].append(start)
        counts.append(len(answers))
  if not counts:
    raise DataError(path, None, "no questions in the file")
  tensors = {key: tf.constant(columns[key], tf.string) for key in ("text_a", "text_b", "id")}
  tensors["is_impossible"] = tf.constant(columns["is_impossible"], tf.bool)
  tensors["answers"] = tf.RaggedTensor.from_row_lengths(
      tf.constant(columns["answers"], tf.string, shape=[len(columns["answers"])]), counts)
  tensors["answer_starts"] = tf.RaggedTensor.from_row_lengths(
      tf.constant(columns["answer_starts"], tf.int32, shape=[len(columns["answer_starts"])]), counts)
  return QuestionAnsweringSource(tf.data.Dataset.from_tensor_slices(tensors), QUESTION_ANSWERING,
                                 sentence_pair=True, num_examples=len(counts), unanswerable=unanswerable)


def _items(path, parent, key, where):
  return _field(path, parent, key, list, where)


def _field(path, parent, key, kind, where):
  if not isinstance(parent, dict) or key not in parent:
    raise DataError(path, None, f"{where}: no {key!r}")
  value = parent[key]
  if not isinstance(value, kind) or isinstance(value, bool):
    raise DataError(path, None, f"{where}.{key}: unexpected value {value!r}")
  return value

"""Data sources of the token-level tasks: tagged words and extractive question answering.

`tpu.data.load` hands these specs to `load` here:

- tagging (task type "tagging"): `tfds:conll2003` (tokens and NER tags, the label
  names from the dataset; "validation" is its "dev" split), `conll:PATH` (one word per
  line with its tag in the last whitespace-separated column, blank lines between
  sentences, `-DOCSTART-` lines skipped) and `jsonl:PATH` read with
  `task_type="tagging"` (one object per line with a list of words, key "words", and a
  list of tags, key "tags"; other keys through `text_columns` / `label_column`);
- question answering (task type "question_answering"): `tfds:squad/v1.1`,
  `tfds:squad/v2.0` and `squad:PATH`, a file in SQuAD's JSON format (v1.1 or v2.0).

Elements:

  tagging:   {"text_a": the words joined by spaces, "words": string [n], "tags": int64 [n]}
  squad:     {"text_a": question, "text_b": context, "id": string,
              "answers": string [k], "answer_starts": int32 [k] (characters into the context),
              "is_impossible": bool}

Files are read and checked in Python; a malformed one raises `tpu.data.DataError`
naming the file and line: a CoNLL line without a tag column, words and tags of
different lengths, a tag that is not one of the given `label_names` (pass the train
source's for the validation file), invalid JSON, a SQuAD entry without its fields.
Tag names are sorted when not given.
"""

import dataclasses
import json
import os

import tensorflow as tf

from tpu.data import DataError
from tpu.data import DataSource
from tpu.data import read_utf8

TAGGING = "tagging"
QUESTION_ANSWERING = "question_answering"
TASK_TYPES = (TAGGING, QUESTION_ANSWERING)
SCHEMES = ("conll", "squad")
TFDS_DATASETS = ("conll2003", "squad/v1.1", "squad/v2.0")
DEFAULT_WORDS_KEY = "words"
DEFAULT_TAGS_KEY = "tags"


@dataclasses.dataclass(frozen=True, eq=False)
class QuestionAnsweringSource(DataSource):
  """A `DataSource` of SQuAD examples; `unanswerable`: some questions have no answer (SQuAD v2.0)."""

  unanswerable: bool = False


def handles(scheme, target, task_type):
  """Whether a spec is one of this module's."""
  if scheme in SCHEMES:
    return True
  if scheme == "tfds":
    return target.partition(":")[0] in TFDS_DATASETS
  return scheme == "jsonl" and task_type == TAGGING


def load(scheme, target, split, *, text_columns=None, label_column=None, task_type=None, label_names=None,
         data_dir=None, download=True, shuffle_files=False):
  """The `DataSource` of a token-level spec (see the module docstring)."""
  if scheme == "tfds":
    name = target.partition(":")[0]
    expected = TAGGING if name == "conll2003" else QUESTION_ANSWERING
  else:
    expected = QUESTION_ANSWERING if scheme == "squad" else TAGGING
  if task_type not in (None, expected):
    raise ValueError(f"{scheme}:{target} holds {expected} data; task_type {task_type!r} does not apply")
  if scheme == "tfds":
    return _load_tfds(target, split, label_names, data_dir, download, shuffle_files)
  path = os.path.expanduser(target)
  if scheme == "squad":
    return _load_squad_json(path)
  if scheme == "conll":
    sentences = _parse_conll(path)
  else:
    words_key = (text_columns[0] if text_columns else None) or DEFAULT_WORDS_KEY
    sentences = _parse_tagged_jsonl(path, words_key, label_column or DEFAULT_TAGS_KEY)
  return _tagged_source(path, sentences, label_names)


# Tagging files.

def _parse_conll(path):
  """[(line, words, tags)] of a CoNLL file, `line` the sentence's first line."""
  sentences, words, tags, first = [], [], [], None
  for number, text in enumerate(read_utf8(path).split("\n"), start=1):
    fields = text.split()
    if not fields or fields[0] == "-DOCSTART-":
      if words:
        sentences.append((first, words, tags))
      words, tags, first = [], [], None
      continue
    if len(fields) < 2:
      raise DataError(path, number, f"expected a word and its tag (the last column), found {text.strip()!r}")
    if first is None:
      first = number
    words.append(fields[0])
    tags.append((number, fields[-1]))
  if words:
    sentences.append((first, words, tags))
  if not sentences:
    raise DataError(path, 1, "no sentences: expected one word and its tag per line, blank lines between "
                    "sentences")
  return sentences


def _parse_tagged_jsonl(path, words_key, tags_key):
  sentences = []
  for number, text in enumerate(read_utf8(path).split("\n"), start=1):
    if not text.strip():
      continue
    try:
      record = json.loads(text)
    except json.JSONDecodeError as e:
      raise DataError(path, number, f"invalid JSON: {e.msg} (column {e.colno})") from e
    if not isinstance(record, dict):
      raise DataError(path, number, f"expected a JSON object per line, found {type(record).__name__}")
    for key in (words_key, tags_key):
      if key not in record:
        raise DataError(path, number, f"no key {key!r}; the keys are {sorted(record)}")
      if not isinstance(record[key], list) or not all(isinstance(item, str) for item in record[key]):
        raise DataError(path, number, f"{key!r} must be a list of strings, got {record[key]!r}")
    words, tags = record[words_key], record[tags_key]
    if len(words) != len(tags):
      raise DataError(path, number, f"{len(words)} words but {len(tags)} tags")
    if not words:
      raise DataError(path, number, "a sentence without words")
    sentences.append((number, words, [(number, tag) for tag in tags]))
  if not sentences:
    raise DataError(path, 1, "the file is empty; expected one JSON object per line")
  return sentences


def _tagged_source(path, sentences, label_names):
  if label_names is None:
    label_names = sorted({tag for _, _, tags in sentences for _, tag in tags})
  ids = {name: index for index, name in enumerate(label_names)}
  flat_tags = []
  for _, _, tags in sentences:
    for line, tag in tags:
      if tag not in ids:
        raise DataError(path, line, f"unknown tag {tag!r}; the tags are {list(label_names)}")
      flat_tags.append(ids[tag])
  lengths = [len(words) for _, words, _ in sentences]
  words = tf.RaggedTensor.from_row_lengths(
      tf.constant([word for _, sentence, _ in sentences for word in sentence], tf.string), lengths)
  tags = tf.RaggedTensor.from_row_lengths(tf.constant(flat_tags, tf.int64, shape=[len(flat_tags)]), lengths)
  texts = tf.constant([" ".join(sentence) for _, sentence, _ in sentences], tf.string)
  dataset = tf.data.Dataset.from_tensor_slices(dict(text_a=texts, words=words, tags=tags))
  return DataSource(dataset, TAGGING, list(label_names), num_examples=len(sentences))


# SQuAD JSON files.

def _load_squad_json(path):
  text = read_utf8(path)
  try:
    content = json.loads(text)
  except json.JSONDecodeError as e:
    raise DataError(path, e.lineno, f"invalid JSON: {e.msg} (column {e.colno})") from e
  if not isinstance(content, dict) or not isinstance(content.get("data"), list):
    raise DataError(path, 1, "expected SQuAD's format: an object whose \"data\" is a list of articles")
  columns = dict(text_a=[], text_b=[], id=[], answers=[], answer_starts=[], is_impossible=[])
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


# TFDS.

def _load_tfds(name, split, label_names, data_dir, download, shuffle_files):
  import tensorflow_datasets as tfds

  base, slice_ = split, ""
  if "[" in split:
    base, slice_ = split[:split.index("[")], split[split.index("["):]
  builder = tfds.builder(name, data_dir=data_dir)
  dataset_name = name.partition(":")[0]
  splits = {"train": "train", "validation": "validation"}
  if dataset_name == "conll2003":
    splits = {"train": "train", "validation": "dev", "dev": "dev", "test": "test"}
  if base not in splits:
    raise ValueError(f"tfds:{name} has no split {split!r}; use one of {sorted(splits)}")
  tfds_split = splits[base] + slice_
  if download:
    builder.download_and_prepare()
  dataset = builder.as_dataset(split=tfds_split, shuffle_files=shuffle_files)
  try:
    num_examples = int(builder.info.splits[tfds_split].num_examples)
  except (KeyError, ValueError):
    num_examples = None
  if dataset_name == "conll2003":
    names = list(builder.info.features["ner"].feature.names)
    if label_names is not None and list(label_names) != names:
      raise ValueError(f"tfds:{name} has the tags {names}, not the label_names given: {list(label_names)}")

    def tagged(example):
      length = tf.minimum(tf.size(example["tokens"]), tf.size(example["ner"]))   # equal but in mock data
      words = example["tokens"][:length]
      return dict(text_a=tf.strings.reduce_join(words, separator=" "), words=words,
                  tags=tf.cast(example["ner"][:length], tf.int64))

    return DataSource(_ragged(dataset.map(tagged, num_parallel_calls=tf.data.AUTOTUNE), ("words", "tags")),
                      TAGGING, names, num_examples=num_examples)
  unanswerable = dataset_name == "squad/v2.0"

  def question(example):
    answers = example["answers"]
    count = tf.minimum(tf.size(answers["text"]), tf.size(answers["answer_start"]))   # equal but in mock data
    impossible = tf.cast(example["is_impossible"], tf.bool) if unanswerable else tf.constant(False)
    count = tf.where(impossible, 0, count)
    return dict(text_a=example["question"], text_b=example["context"], id=example["id"],
                answers=answers["text"][:count],
                answer_starts=tf.cast(answers["answer_start"][:count], tf.int32),
                is_impossible=impossible)

  dataset = _ragged(dataset.map(question, num_parallel_calls=tf.data.AUTOTUNE), ("answers", "answer_starts"))
  return QuestionAnsweringSource(dataset,
                                 QUESTION_ANSWERING, sentence_pair=True, num_examples=num_examples,
                                 unanswerable=unanswerable)



def _ragged(dataset, keys):
  """The list-valued `keys` of each example as (rank-0-ragged) ragged tensors, as file sources give them.

  Examples with ragged fields batch into `[B, (n)]` ragged tensors with `Dataset.batch`,
  whatever their lengths.
  """
  def one(example):
    return {key: tf.RaggedTensor.from_tensor(value[tf.newaxis]) if key in keys else value[tf.newaxis]
            for key, value in example.items()}
  return dataset.map(one).unbatch()

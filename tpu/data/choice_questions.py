"""Multiple choice (data type "multiple_choice"): RACE as released, SWAG's CSV, JSON lines, TFDS's RACE.

- `race:DIR`: RACE (Lai et al., 2017) as its archive unpacks, `DIR/{train,dev,test}/
  {middle,high}/*.txt`, one JSON object per file (an article): `article`, `questions`,
  `options` (four per question), `answers` (letters), `id`. Each question is an example;
  the split "validation" reads `dev/`. Files are read in sorted order, middle first.
- `swag:PATH`: SWAG's CSV (Zellers et al., 2018; `train.csv`, `val.csv`), with the
  columns `sent1` (the context), `sent2` (the start of the ending: the question),
  `ending0` ... `ending{N-1}` and `label`; each row needs all of them, none empty.
- `tfds:race/middle`, `tfds:race/high`: TFDS's RACE (its levels are configs), one example
  per question as above.
- `jsonl:PATH` with `--task multiple_choice`: one JSON object per line, `context`,
  `question` (may be empty or absent), `options` (a list of N strings) and `label` (the
  right option's index, or its letter "A", "B", ...).

Elements: {"context": string, "question": string, "options": string [N], "label": int64}.
N is fixed per dataset, 2 to `MAX_CHOICES` (`MultipleChoiceSource.num_choices`).

A malformed file raises `DataError` naming the file and line (RACE: the file and the
question), the field and the valid values.
"""

import csv
import dataclasses
import io
import json
import os
from collections.abc import Sequence
from typing import Any

from tpu.data.source_registry import DataError
from tpu.data.source_registry import DataSource
from tpu.data.source_registry import Source
from tpu.data.source_registry import json_lines
from tpu.data.source_registry import read_utf8
from tpu.data.source_registry import register
from zoo.lazy import lazy_module

tf = lazy_module("tensorflow")

MULTIPLE_CHOICE = "multiple_choice"
MAX_CHOICES = 8
# RACE's split folders and its two levels, as the archive holds them.
RACE_SPLITS = dict(train="train", validation="dev", test="test")
RACE_LEVELS = ("middle", "high")

# An example as read: `((file, line), context, question, options, label)`.
ChoiceExample = tuple[tuple[str, int], str, str, list[str], int]


@dataclasses.dataclass(frozen=True, eq=False)
class MultipleChoiceSource(DataSource):
  """A `DataSource` of multiple-choice examples with `num_choices` options each."""

  num_choices: int = 0


def label_of(answer: object, num_choices: int) -> int | None:
  """The index of an answer given as an index or a letter ("A" is 0); None when it is neither or out of
  range."""
  if isinstance(answer, str) and len(answer.strip()) == 1 and answer.strip().isalpha():
    index = ord(answer.strip().upper()) - ord("A")
  elif isinstance(answer, int) and not isinstance(answer, bool):
    index = answer
  elif isinstance(answer, str) and answer.strip().lstrip("-").isdigit():
    index = int(answer)
  else:
    return None
  return index if 0 <= index < num_choices else None


def choices_source(path: str, examples: Sequence[ChoiceExample]) -> MultipleChoiceSource:
  """A `MultipleChoiceSource` of `examples` `[(where, context, question, options, label)]` (`where`:
  `(file, line)` for errors); refuses options whose count differs from the first example's."""
  if not examples:
    raise DataError(path, None, "no examples")
  num_choices = len(examples[0][3])
  for (file, line), _, _, options, _ in examples:
    if len(options) != num_choices:
      raise DataError(file, line, f"{len(options)} options, but the first example has {num_choices}: a "
                                  "dataset's examples have the same number of options")
  if not 2 <= num_choices <= MAX_CHOICES:
    raise DataError(path, None, f"{num_choices} options per example; 2 to {MAX_CHOICES} are supported")
  tensors = dict(context=tf.constant([example[1] for example in examples], tf.string),
                 question=tf.constant([example[2] for example in examples], tf.string),
                 options=tf.constant([example[3] for example in examples], tf.string),
                 label=tf.constant([example[4] for example in examples], tf.int64))
  return MultipleChoiceSource(tf.data.Dataset.from_tensor_slices(tensors), MULTIPLE_CHOICE,
                              label_names=[chr(ord("A") + index) for index in range(num_choices)],
                              num_examples=len(examples), num_choices=num_choices)


def _check_options(file, line, options, what="options"):
  if not isinstance(options, list) or not all(isinstance(option, str) for option in options):
    raise DataError(file, line, f"{what} must be a list of strings, got {options!r}")
  return options


# ---------------------------------------------------------------------------------------------
# RACE.


def race_files(folder: str, split: str) -> list[str]:
  """The article files of a split of a RACE folder, middle then high, each sorted."""
  root = os.path.expanduser(folder)
  split_folder = os.path.join(root, RACE_SPLITS.get(split, split))
  if not tf.io.gfile.isdir(split_folder):
    raise DataError(split_folder, None, f"no such folder: race:DIR reads RACE as released, "
                    f"DIR/{{{','.join(RACE_SPLITS.values())}}}/{{{','.join(RACE_LEVELS)}}}/*.txt "
                    f"(split {split!r} is {RACE_SPLITS.get(split, split)}/)")
  files = []
  for level in RACE_LEVELS:
    level_folder = os.path.join(split_folder, level)
    if tf.io.gfile.isdir(level_folder):
      files += sorted(os.path.join(level_folder, name) for name in tf.io.gfile.listdir(level_folder)
                      if name.endswith(".txt"))
  if not files:
    raise DataError(split_folder, None, f"no article files in {' or '.join(RACE_LEVELS)}/*.txt")
  return files


def parse_race_file(path: str) -> list[ChoiceExample]:
  """The examples of one RACE article file (one per question)."""
  text = read_utf8(path)
  try:
    article = json.loads(text)
  except json.JSONDecodeError as e:
    raise DataError(path, e.lineno, f"invalid JSON: {e.msg} (column {e.colno})") from None
  if not isinstance(article, dict):
    raise DataError(path, 1, f"expected a JSON object (an article), found {type(article).__name__}")
  for key in ("article", "questions", "options", "answers"):
    if key not in article:
      raise DataError(path, 1, f"no key {key!r}; an article has 'article', 'questions', 'options', 'answers' "
                               f"(found {sorted(article)})")
  questions, options, answers = article["questions"], article["options"], article["answers"]
  if not (isinstance(questions, list) and isinstance(options, list) and isinstance(answers, list)) or not (
      len(questions) == len(options) == len(answers)):
    raise DataError(path, 1, "'questions', 'options' and 'answers' must be lists of the same length, got "
                             f"{len(questions)}, {len(options)} and {len(answers)} items")
  examples = []
  for index, (question, choices, answer) in enumerate(zip(questions, options, answers, strict=True)):
    where = f"question {index + 1}"
    _check_options(path, 1, choices, f"the options of {where}")
    label = label_of(answer, len(choices))
    if label is None:
      letters = ", ".join(chr(ord("A") + i) for i in range(len(choices)))
      raise DataError(path, 1, f"the answer of {where} is {answer!r}; one of {letters} was expected")
    examples.append(((path, 1), article["article"], str(question), choices, label))
  return examples


@register
class RaceSource(Source):
  scheme = "race"
  usage = "race:DIR"
  description = "RACE as released: DIR/{train,dev,test}/{middle,high}/*.txt (multiple choice)"
  options = frozenset({"data_type"})
  data_types = (MULTIPLE_CHOICE,)
  splits = tuple(RACE_SPLITS)
  reads_files = True

  def load(self, target: str, split: str, *, data_type: str | None) -> MultipleChoiceSource:
    self.check_data_type(target, data_type)
    files = race_files(target, split)
    return choices_source(target, [example for path in files for example in parse_race_file(path)])

  def input_files(self, target: str, data_dir: str | None = None) -> list[str]:
    """Every split's article files (the training run reads one, its evaluation another)."""
    files = []
    for split in RACE_SPLITS:
      try:
        files += race_files(target, split)
      except DataError:
        continue
    return files


# ---------------------------------------------------------------------------------------------
# SWAG.


def parse_swag(path: str) -> list[ChoiceExample]:
  """The examples of a SWAG CSV file."""
  content = read_utf8(path)
  reader = csv.DictReader(io.StringIO(content))
  columns = reader.fieldnames or []
  endings = sorted((name for name in columns if name.startswith("ending") and name[6:].isdigit()),
                   key=lambda name: int(name[6:]))
  missing = [name for name in ("sent1", "sent2", "label") if name not in columns]
  if missing or len(endings) < 2:
    raise DataError(path, 1, f"SWAG's columns are sent1, sent2, ending0, ending1, ..., label; missing "
                             f"{missing or 'the endings'} (the columns are {columns})")
  examples = []
  fields = ("sent1", "sent2", *endings, "label")
  for row in reader:
    line = reader.line_num
    if None in row:   # values past the header's columns
      raise DataError(path, line, f"{len(columns) + len(row[None])} values, but the header has "
                                  f"{len(columns)} columns ({', '.join(columns)})")
    for name in fields:
      if row[name] is None:
        present = sum(value is not None for value in row.values())
        raise DataError(path, line, f"no {name}: the row has {present} of the header's {len(columns)} "
                                    f"columns ({', '.join(columns)})")
      if not row[name].strip():
        raise DataError(path, line, f"{name} is empty; SWAG's sent1 (the context), sent2 (the ending's "
                                    f"start), {endings[0]} to {endings[-1]} and label need a value")
    label = label_of(row["label"], len(endings))
    if label is None:
      raise DataError(path, line, f"label {row['label']!r} is not an ending's index 0 to "
                                  f"{len(endings) - 1}")
    options = [row[name] for name in endings]
    examples.append(((path, line), row["sent1"], row["sent2"], options, label))
  return examples


@register
class SwagSource(Source):
  scheme = "swag"
  usage = "swag:PATH"
  description = "SWAG's CSV (sent1, sent2, ending0..N-1, label): multiple choice"
  options = frozenset({"data_type"})
  data_types = (MULTIPLE_CHOICE,)
  reads_files = True

  def load(self, target: str, split: str, *, data_type: str | None) -> MultipleChoiceSource:
    self.check_data_type(target, data_type)
    path = os.path.expanduser(target)
    return choices_source(path, parse_swag(path))


# ---------------------------------------------------------------------------------------------
# JSON lines.


def parse_choices_jsonl(path: str) -> list[ChoiceExample]:
  """The examples of a JSON-lines file of multiple-choice questions (see the module docstring)."""
  examples = []
  for number, record in json_lines(path):
    for key in ("context", "options", "label"):
      if key not in record:
        raise DataError(path, number, f"no key {key!r}; a multiple-choice line has 'context', 'question' "
                                      f"(optional), 'options' and 'label' (found {sorted(record)})")
    options = _check_options(path, number, record["options"])
    if not isinstance(record["context"], str) or not isinstance(record.get("question", ""), str):
      raise DataError(path, number, "'context' and 'question' must be strings")
    label = label_of(record["label"], len(options))
    if label is None:
      raise DataError(path, number, f"label {record['label']!r} is not an option's index 0 to "
                                    f"{len(options) - 1} or its letter")
    examples.append(((path, number), record["context"], record.get("question", ""), options, label))
  return examples


def load_jsonl(path: str) -> MultipleChoiceSource:
  """The `MultipleChoiceSource` of a JSON-lines file."""
  path = os.path.expanduser(path)
  return choices_source(path, parse_choices_jsonl(path))



# ---------------------------------------------------------------------------------------------
# TFDS's RACE.


class _TfdsRace:
  """`tfds:race/middle` and `tfds:race/high`: TFDS's RACE (one example per article), one example per
  question here, as `race:DIR` reads the archive."""

  data_type = MULTIPLE_CHOICE

  def load(self, name: str, split: str, *, data_dir: str | None, download: bool, shuffle_files: bool,
         data_type: str | None = None, **unused: Any) -> MultipleChoiceSource:
    from tpu.data import tfds_datasets
    if data_type not in (None, MULTIPLE_CHOICE):
      raise ValueError(f"{tfds_datasets.spec_of(name)} holds {MULTIPLE_CHOICE} data; data_type {data_type!r} "
                       "does not apply")
    builder = tfds_datasets.tfds_builder(name, data_dir)
    tfds_split = tfds_datasets.split_name(name, split, dict(RACE_SPLITS))
    articles, _ = tfds_datasets.read(builder, tfds_split, download, shuffle_files)

    def questions(article):
      options = article["options"]
      options = options.to_tensor() if isinstance(options, tf.RaggedTensor) else options
      letters = tf.strings.unicode_decode(tf.strings.strip(article["answers"]), "UTF-8")
      label = tf.cast(letters[:, :1].to_tensor(default_value=-1)[:, 0] - ord("A"), tf.int64)
      count = tf.size(article["questions"])
      return tf.data.Dataset.from_tensor_slices(dict(
          context=tf.fill([count], article["article"]), question=article["questions"], options=options,
          label=label))

    message = f"{tfds_datasets.spec_of(name)}: an answer is not one of A, B, C, D"

    def checked(example):
      label = example["label"]
      check = tf.debugging.Assert((label >= 0) & (label < 4), [message, example["question"]])
      with tf.control_dependencies([check]):
        return dict(example, label=tf.identity(label))

    examples = articles.flat_map(questions).map(checked)
    return MultipleChoiceSource(examples, MULTIPLE_CHOICE, label_names=list("ABCD"), num_choices=4)


def _register_tfds():
  from tpu.data import tfds_datasets
  for level in RACE_LEVELS:
    tfds_datasets.register_dataset(f"race/{level}", _TfdsRace())


_register_tfds()

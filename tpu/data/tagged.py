"""Tagged words (data type "tagging"): `conll:PATH`, `tfds:conll2003` and tagged JSON lines.

- `conll:PATH`: one word per line with its tag in the last whitespace-separated column,
  blank lines between sentences, `-DOCSTART-` lines skipped;
- `tfds:conll2003`: tokens and NER tags, the tag names from the dataset; "validation"
  is its "dev" split;
- `jsonl:PATH` read with `data_type="tagging"` (`tpu.data.tables`): one object per line
  with a list of words, key "words", and a list of tags, key "tags" (other keys
  through `text_columns` / `label_column`).

Elements: {"text_a": the words joined by spaces, "words": string [n], "tags": int64 [n]}.

Tag schemes (`TAG_SCHEMES`): every tag is "O" or a prefix and a type, "B-PER". IOB1 and
IOB2 use B- and I- (in IOB2 every entity starts with B-; in IOB1 only one that follows
an entity of its type does), IOBES adds E- (end) and S- (single), BILOU L- (last) and
U- (unit). `detect_scheme` tells them apart from the tags of a corpus; the source
records it (`TaggedSource.tag_scheme`; `tfds:conll2003` is IOB2).

Files are read and checked in Python; a malformed one raises `DataError` naming the
file and line: a CoNLL line without a tag column, words and tags of different
lengths, a tag with an unknown prefix, a file that mixes IOBES's and BILOU's prefixes,
a tag that is not one of the given `label_names` (pass the train source's for the
validation file), invalid JSON. Tag names are sorted when not given.
"""

import dataclasses
import os
import re
from collections.abc import Collection
from collections.abc import Iterable
from collections.abc import Sequence
from typing import Any

from tpu.data import tfds_datasets
from tpu.data.source_registry import DataError
from tpu.data.source_registry import DataSource
from tpu.data.source_registry import Source
from tpu.data.source_registry import json_lines
from tpu.data.source_registry import read_utf8
from tpu.data.source_registry import register
from zoo.lazy import lazy_module

tf = lazy_module("tensorflow")

TAGGING = "tagging"
DEFAULT_WORDS_KEY = "words"
DEFAULT_TAGS_KEY = "tags"
OUTSIDE = "O"
# The schemes and the prefixes each uses (besides "O").
TAG_SCHEMES = {"iob1": "BI", "iob2": "BI", "iobes": "BIES", "bilou": "BILU"}
_TAG = re.compile(r"([BIESLU])-(.+)")
# A sentence as read: `(its first line, words, [(line, tag)])`.
Sentence = tuple[int, list[str], list[tuple[int, str]]]
_KNOWN_PREFIXES = "tags are O or B-, I-, E-, S-, L-, U- followed by a type (IOB1, IOB2, IOBES, BILOU)"


def split_tag(tag: str) -> tuple[str, str | None] | None:
  """`(prefix, type)` of a tag: `("B", "PER")` for "B-PER", `("O", None)` for "O"; None for other tags."""
  if tag == OUTSIDE:
    return OUTSIDE, None
  match = _TAG.fullmatch(tag)
  return (match.group(1), match.group(2)) if match else None


def detect_scheme(sentences: Iterable[Iterable[str]]) -> str:
  """The tag scheme of sentences of tag strings (see the module docstring).

  Raises:
    ValueError: a tag with an unknown prefix, or IOBES's and BILOU's prefixes mixed.
  """
  prefixes = set()
  starts_inside = False
  for tags in sentences:
    previous: tuple[str, str | None] = (OUTSIDE, None)
    for tag in tags:
      split = split_tag(tag)
      if split is None:
        raise ValueError(f"tag {tag!r} has an unknown prefix: {_KNOWN_PREFIXES}")
      prefixes.add(split[0])
      if split[0] == "I" and (previous[0] not in "BI" or previous[1] != split[1]):
        starts_inside = True
      previous = split
  if prefixes & set("ES") and prefixes & set("LU"):
    raise ValueError(f"the tags mix IOBES's E-/S- and BILOU's L-/U- prefixes ({sorted(prefixes - {'O'})})")
  if prefixes & set("ES"):
    return "iobes"
  if prefixes & set("LU"):
    return "bilou"
  return "iob1" if starts_inside else "iob2"


@dataclasses.dataclass(frozen=True, eq=False)
class TaggedSource(DataSource):
  """A `DataSource` of tagged words; `tag_scheme` is the scheme of its tags (`TAG_SCHEMES`)."""

  tag_scheme: str = "iob2"


@register
class ConllSource(Source):
  scheme = "conll"
  usage = "conll:PATH"
  description = "CoNLL-style tagged words: a word and its tag (last column) per line"
  options = frozenset({"data_type", "label_names"})
  reads_files = True
  data_types = (TAGGING,)

  def load(self, target: str, split: str, *, data_type: str | None,
         label_names: Sequence[str] | None) -> TaggedSource:
    if data_type not in (None, TAGGING):
      raise ValueError(f"{self.spec(target)} holds {TAGGING} data; data_type {data_type!r} does not apply")
    path = os.path.expanduser(target)
    return tagged_source(path, parse_conll(path), label_names)


def load_jsonl(path: str, *, words_key: str | None = None, tags_key: str | None = None,
               label_names: Sequence[str] | None = None) -> TaggedSource:
  """The `DataSource` of a JSON-lines file of tagged sentences."""
  sentences = parse_tagged_jsonl(path, words_key or DEFAULT_WORDS_KEY, tags_key or DEFAULT_TAGS_KEY)
  return tagged_source(path, sentences, label_names)


class _Conll2003:
  """`tfds:conll2003`: its tokens and NER tags."""

  data_type = TAGGING
  splits = {"train": "train", "validation": "dev", "dev": "dev", "test": "test"}

  def load(self, name: str, split: str, *, label_names: Sequence[str] | None, data_dir: str | None,
         download: bool, shuffle_files: bool, data_type: str | None = None, **unused: Any) -> TaggedSource:
    if data_type not in (None, TAGGING):
      raise ValueError(f"{tfds_datasets.spec_of(name)} holds {TAGGING} data; data_type {data_type!r} does "
                       "not apply")
    builder = tfds_datasets.tfds_builder(name, data_dir)
    dataset, count = tfds_datasets.read(builder, tfds_datasets.split_name(name, split, self.splits), download,
                                        shuffle_files)
    names = list(builder.info.features["ner"].feature.names)
    if label_names is not None and list(label_names) != names:
      raise ValueError(f"{tfds_datasets.spec_of(name)} has the tags {names}, not the label_names given: "
                       f"{list(label_names)}")

    def tagged(example):
      length = tf.minimum(tf.size(example["tokens"]), tf.size(example["ner"]))   # equal but in mock data
      words = example["tokens"][:length]
      return dict(text_a=tf.strings.reduce_join(words, separator=" "), words=words,
                  tags=tf.cast(example["ner"][:length], tf.int64))

    return TaggedSource(ragged(dataset.map(tagged, num_parallel_calls=tf.data.AUTOTUNE), ("words", "tags")),
                        TAGGING, names, num_examples=count, tag_scheme="iob2")


tfds_datasets.register_dataset("conll2003", _Conll2003())


def parse_conll(path: str) -> list[Sentence]:
  """[(line, words, tags)] of a CoNLL file, `line` the sentence's first line."""
  sentences: list[Sentence] = []
  words: list[str] = []
  tags: list[tuple[int, str]] = []
  first: int | None = None
  for number, text in enumerate(read_utf8(path).split("\n"), start=1):
    fields = text.split()
    if not fields or fields[0] == "-DOCSTART-":
      if words:
        assert first is not None
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
    assert first is not None
    sentences.append((first, words, tags))
  if not sentences:
    raise DataError(path, 1, "no sentences: expected one word and its tag per line, blank lines between "
                    "sentences")
  return sentences


def parse_tagged_jsonl(path: str, words_key: str, tags_key: str) -> list[Sentence]:
  sentences = []
  for number, record in json_lines(path):
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
  return sentences


def tagged_source(path: str, sentences: Sequence[Sentence],
                  label_names: Sequence[str] | None) -> TaggedSource:
  for _, _, tags in sentences:
    for line, tag in tags:
      if split_tag(tag) is None:
        raise DataError(path, line, f"tag {tag!r} has an unknown prefix: {_KNOWN_PREFIXES}")
  try:
    scheme = detect_scheme([[tag for _, tag in tags] for _, _, tags in sentences])
  except ValueError as error:
    raise DataError(path, None, str(error)) from None
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
  return TaggedSource(dataset, TAGGING, list(label_names), num_examples=len(sentences), tag_scheme=scheme)


def ragged(dataset: Any, keys: Collection[str]) -> Any:
  """The list-valued `keys` of each example as (rank-0-ragged) ragged tensors, as file sources give them.

  Examples with ragged fields batch into `[B, (n)]` ragged tensors with `Dataset.batch`,
  whatever their lengths.
  """
  def one(example):
    return {key: tf.RaggedTensor.from_tensor(value[tf.newaxis]) if key in keys else value[tf.newaxis]
            for key, value in example.items()}
  return dataset.map(one).unbatch()

"""Multiple-choice sources in the layouts users download: RACE's folders, SWAG's CSV, JSON lines;
each example against the file it came from, and malformed files named by file, line and field."""

import json

import pytest

from tests.tpu.tasks.choices_data import colour_articles
from tests.tpu.tasks.choices_data import write_race
from tpu import data
from tpu.data import DataError


def _examples(source):
  return [{key: value.decode() if isinstance(value, bytes) else
           [item.decode() for item in value] if key == "options" else int(value)
           for key, value in example.items()} for example in source.dataset.as_numpy_iterator()]


def test_race_as_released_one_example_per_question_middle_first(tmp_path):
  articles = colour_articles(3)
  root = write_race(tmp_path / "RACE", dict(train=articles, dev=articles[:1]))
  train = data.load(f"race:{root}", "train")
  assert train.data_type == "multiple_choice" and train.num_choices == 4 and train.num_examples == 6
  # Middle (articles 0 and 2) first, then high (article 1), two questions each.
  expected = []
  for article in (articles[0], articles[2], articles[1]):
    for question, options, answer in zip(article["questions"], article["options"], article["answers"],
                                         strict=True):
      expected.append(dict(context=article["article"], question=question, options=options,
                           label="ABCD".index(answer)))
  assert _examples(train) == expected
  assert data.load(f"race:{root}", "validation").num_examples == 2   # dev/
  race = tmp_path / "RACE"
  assert data.input_files(f"race:{root}") == [str(race / "train" / "middle" / "0.txt"),
                                              str(race / "train" / "middle" / "2.txt"),
                                              str(race / "train" / "high" / "1.txt"),
                                              str(race / "dev" / "middle" / "0.txt")]


def test_race_errors_name_the_file(tmp_path):
  root = tmp_path / "RACE"
  with pytest.raises(DataError, match=r"RACE/train: no such folder: race:DIR reads RACE as released"):
    data.load(f"race:{root}", "train")
  article = colour_articles(1)[0]
  write_race(root, dict(train=[dict(article, answers=["A", "E"])]))
  with pytest.raises(DataError, match=r"middle/0.txt:1: the answer of question 2 is 'E'; one of A, B, C, D"):
    data.load(f"race:{root}", "train")
  (root / "train" / "middle" / "0.txt").write_text('{"article": "x",\n "questions": [}', encoding="utf-8")
  with pytest.raises(DataError, match=r"middle/0.txt:2: invalid JSON"):
    data.load(f"race:{root}", "train")
  uneven = dict(article, options=[["a", "b", "c"], ["a", "b", "c", "d"]], answers=["A", "A"])
  write_race(root, dict(train=[uneven]))
  with pytest.raises(DataError, match=r"middle/0.txt:1: 4 options, but the first example has 3"):
    data.load(f"race:{root}", "train")


def test_swag_csv(tmp_path):
  path = tmp_path / "val.csv"
  path.write_text('video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label\n'
                  'a,1,"He sat, then he",He sat.,Then he,gold,"stood, slowly",ran,fell,slept,0\n'
                  'b,2,She,She ran.,She,gold,"walked",stopped,sang,"said ""hi""",3\n', encoding="utf-8")
  source = data.load(f"swag:{path}")
  assert source.num_choices == 4
  assert _examples(source) == [
      dict(context="He sat.", question="Then he", options=["stood, slowly", "ran", "fell", "slept"], label=0),
      dict(context="She ran.", question="She", options=["walked", "stopped", "sang", 'said "hi"'], label=3)]
  path.write_text("sent1,sent2,ending0,ending1,label\nA,b,c,d,2\n", encoding="utf-8")
  with pytest.raises(DataError, match=r"val.csv:2: label '2' is not an ending's index 0 to 1"):
    data.load(f"swag:{path}")
  path.write_text("sent1,ending0,ending1,label\nA,c,d,1\n", encoding="utf-8")
  with pytest.raises(DataError, match=r"val.csv:1: SWAG's columns are .*missing \['sent2'\]"):
    data.load(f"swag:{path}")


@pytest.mark.parametrize("rows, message", [
    ("A,b,c,d,1\nA,b,c,,1\n", r"val.csv:3: ending1 is empty"),                    # an empty ending
    ("A,b,c,d,1\nA,b,c,  ,0\n", r"val.csv:3: ending1 is empty"),                  # only spaces
    ('A,b,"",d,0\n', r"val.csv:2: ending0 is empty"),
    (",b,c,d,0\n", r"val.csv:2: sent1 is empty"),
    ("A,,c,d,0\n", r"val.csv:2: sent2 is empty"),
    ("A,b,c,d,\n", r"val.csv:2: label is empty"),
    ("A,b,c,d\n", r"val.csv:2: no label: the row has 4 of the header's 5 columns"),   # a missing field
    ("A,b,c\n", r"val.csv:2: no ending1: the row has 3 of the header's 5 columns"),
    ("A,b,c,d,0,extra\n", r"val.csv:2: 6 values, but the header has 5 columns"),
])
def test_swag_rows_with_an_empty_or_missing_field_are_named(tmp_path, rows, message):
  path = tmp_path / "val.csv"
  path.write_text("sent1,sent2,ending0,ending1,label\n" + rows, encoding="utf-8")
  with pytest.raises(DataError, match=message):
    data.load(f"swag:{path}")


def test_json_lines_with_letters_or_indexes(tmp_path):
  path = tmp_path / "questions.jsonl"
  lines = [dict(context="Água é boa.", question="Is it?", options=["sim", "não"], label="B"),
           dict(context="中文", options=["是", "否"], label=0)]
  text = "\n".join(json.dumps(line, ensure_ascii=False) for line in lines) + "\n\n"
  path.write_text(text, encoding="utf-8")
  source = data.load(f"jsonl:{path}", data_type="multiple_choice")
  assert _examples(source) == [
      dict(context="Água é boa.", question="Is it?", options=["sim", "não"], label=1),
      dict(context="中文", question="", options=["是", "否"], label=0)]
  path.write_text(json.dumps(dict(context="c", options=["a", "b"], label=2)) + "\n", encoding="utf-8")
  with pytest.raises(DataError, match=r"questions.jsonl:1: label 2 is not an option's index 0 to 1 or its "):
    data.load(f"jsonl:{path}", data_type="multiple_choice")
  path.write_text(json.dumps(dict(context="c", options="ab", label=0)) + "\n", encoding="utf-8")
  with pytest.raises(DataError, match=r"questions.jsonl:1: options must be a list of strings"):
    data.load(f"jsonl:{path}", data_type="multiple_choice")


def _tfds_race(articles):
  """`as_dataset` of TFDS's RACE builder (features as `tfds.builder("race/middle").info` has them)."""
  import tensorflow as tf
  spec = dict(article=tf.TensorSpec([], tf.string), questions=tf.TensorSpec([None], tf.string),
              answers=tf.TensorSpec([None], tf.string), options=tf.RaggedTensorSpec([None, None], tf.string),
              example_id=tf.TensorSpec([], tf.string))

  def as_dataset(self, split, **options):
    return tf.data.Dataset.from_generator(
        lambda: (dict(article, options=tf.ragged.constant(article["options"])) for article in articles),
        output_signature=spec)
  return as_dataset


def test_tfds_race_one_example_per_question():
  import tensorflow as tf
  import tensorflow_datasets as tfds
  articles = [dict(article=a["article"], questions=a["questions"], answers=a["answers"], options=a["options"],
                   example_id=a["id"]) for a in colour_articles(2)]
  with tfds.testing.mock_data(as_dataset_fn=_tfds_race(articles)):
    source = data.load("tfds:race/high", "validation")
    assert source.num_choices == 4
    expected = [dict(context=a["article"], question=q, options=o, label="ABCD".index(answer))
                for a in articles
                for q, o, answer in zip(a["questions"], a["options"], a["answers"], strict=True)]
    assert _examples(source) == expected
    with pytest.raises(tf.errors.InvalidArgumentError, match="an answer is not one of A, B, C, D"):
      with tfds.testing.mock_data(as_dataset_fn=_tfds_race([dict(articles[0], answers=["A", "E"])])):
        _examples(data.load("tfds:race/middle", "train"))

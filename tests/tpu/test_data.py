"""Data sources: TFDS under tfds.testing.mock_data (no downloads), table files, text globs, demo."""

import doctest
import re

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from tpu import data
from tpu.data import DataError


def _examples(source):
  return [{key: value.numpy() for key, value in example.items()} for example in source.dataset]


def _write(tmp_path, name, content):
  path = tmp_path / name
  path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
  return str(path)


def _at(path, line):
  """A regex matching the start of a DataError message at FILE:LINE."""
  return "^" + re.escape(f"{path}:{line}: ")


# TFDS, under tfds.testing.mock_data: random text, nothing read from disk or network.

@pytest.mark.parametrize("name, task_type, label_names, pair", [
    ("glue/sst2", "classification", ["negative", "positive"], False),
    ("glue/mrpc", "classification", ["not_equivalent", "equivalent"], True),
    ("glue/stsb", "regression", None, True),
    ("imdb_reviews", "classification", ["neg", "pos"], False),
    ("ag_news_subset", "classification", ["World", "Sports", "Business", "Sci/Tech"], True),
])
def test_tfds_sources_have_the_common_format(name, task_type, label_names, pair):
  with tfds.testing.mock_data(num_examples=6):
    source = data.load(f"tfds:{name}", "train")
    examples = _examples(source)
  assert (source.task_type, source.label_names, source.sentence_pair) == (task_type, label_names, pair)
  assert source.num_classes == (len(label_names) if label_names else 1)
  assert (source.spec, source.split) == (f"tfds:{name}", "train")
  spec = source.dataset.element_spec
  assert sorted(spec) == (["label", "text_a", "text_b"] if pair else ["label", "text_a"])
  assert all(spec[key].dtype == tf.string and spec[key].shape == () for key in spec if key.startswith("text"))
  assert spec["label"].shape == ()
  assert spec["label"].dtype == (tf.int64 if task_type == "classification" else tf.float32)
  assert len(examples) == 6
  if label_names:
    assert all(0 <= example["label"] < len(label_names) for example in examples)


def _fake_as_dataset(requested_splits):
  """A mock `_as_dataset` whose examples say which feature they come from: "<feature> <index>"."""

  def as_dataset(builder, split, decoders=None, read_config=None, **kwargs):
    del decoders, read_config, kwargs
    requested_splits.append(split)
    examples = {}
    for key, feature in builder.info.features.items():
      if isinstance(feature, tfds.features.ClassLabel):
        examples[key] = np.arange(3, dtype=np.int64) % feature.num_classes
      elif feature.dtype == tf.string:
        examples[key] = [f"{key} {i}" for i in range(3)]
      else:
        examples[key] = np.arange(3).astype(feature.dtype.as_numpy_dtype) / 2
    return tf.data.Dataset.from_tensor_slices(examples)

  return as_dataset


@pytest.mark.parametrize("name, split, tfds_split, text_features", [
    ("glue/cola", "validation", "validation", ("sentence",)),
    ("glue/mnli", "validation", "validation_matched", ("premise", "hypothesis")),
    ("glue/mnli", "validation_mismatched", "validation_mismatched", ("premise", "hypothesis")),
    ("glue/qqp", "train", "train", ("question1", "question2")),
    ("glue/qnli", "validation", "validation", ("question", "sentence")),
    ("glue/rte", "train[:10%]", "train[:10%]", ("sentence1", "sentence2")),
    ("glue/wnli", "validation", "validation", ("sentence1", "sentence2")),
    ("glue/stsb", "validation", "validation", ("sentence1", "sentence2")),
    ("imdb_reviews", "validation", "test", ("text",)),
    ("ag_news_subset", "validation", "test", ("title", "description")),
])
def test_tfds_splits_and_features_map_onto_text_a_text_b(name, split, tfds_split, text_features):
  requested = []
  with tfds.testing.mock_data(num_examples=3, as_dataset_fn=_fake_as_dataset(requested)):
    source = data.load(f"tfds:{name}", split)
    examples = _examples(source)
  assert requested == [tfds_split]
  texts = [(example["text_a"], example.get("text_b")) for example in examples]
  expected_b = [f"{text_features[1]} {i}".encode() if len(text_features) == 2 else None for i in range(3)]
  assert texts == list(zip([f"{text_features[0]} {i}".encode() for i in range(3)], expected_b, strict=True))
  labels = [example["label"] for example in examples]
  assert labels == ([0.0, 0.5, 1.0] if name == "glue/stsb" else [0, 1, 2 % source.num_classes])


@pytest.mark.parametrize("split", ["test", "test_matched", "test[:10%]"])
def test_glue_test_splits_are_refused(split):
  with pytest.raises(ValueError, match=r"GLUE test splits carry no labels .* evaluate on split 'validation'"):
    data.load("tfds:glue/mnli", split)


def test_unknown_tfds_datasets_and_splits_name_what_exists():
  with pytest.raises(ValueError, match=r"tfds:squad is not supported; supported datasets: glue/cola, "):
    data.load("tfds:squad")
  with pytest.raises(ValueError, match=r"tfds:glue/sst2 has no split 'dev'; use one of \['train', 'valid"):
    data.load("tfds:glue/sst2", "dev")


def test_tfds_options_choose_columns_drop_labels_and_check_label_names():
  with tfds.testing.mock_data(num_examples=4):
    description_only = data.load("tfds:ag_news_subset", text_columns="description")
    assert not description_only.sentence_pair
    pretraining = data.load("tfds:glue/mrpc", task_type="text")
    assert sorted(pretraining.dataset.element_spec) == ["text_a", "text_b"]
    assert (pretraining.task_type, pretraining.label_names, pretraining.num_classes) == ("text", None, None)
    with pytest.raises(ValueError, match=r"has label names \['negative', 'positive'\], not the label_names"):
      data.load("tfds:glue/sst2", label_names=["bad", "good"])
    with pytest.raises(ValueError, match=r"tfds:glue/sst2 has no feature\(s\) \['title'\]; its features are"):
      data.load("tfds:glue/sst2", text_columns=["title"])
    with pytest.raises(ValueError, match=r"is a regression task; task_type can be 'regression' or 'text'"):
      data.load("tfds:glue/stsb", task_type="classification")


# Table files: happy paths.

def test_tsv_with_class_names_maps_them_in_sorted_order(tmp_path):
  content = 'sentence\tlabel\tid\nit is "great\tpos\t1\n\nso dull\tneg\t2\nfine\tok\t3\n'
  source = data.load(f"tsv:{_write(tmp_path, 'train.tsv', content)}")
  assert (source.task_type, source.label_names, source.num_classes) == (
      "classification", ["neg", "ok", "pos"], 3)
  assert (source.sentence_pair, source.num_examples, source.split) == (False, 3, None)
  assert _examples(source) == [{"text_a": b'it is "great', "label": 2}, {"text_a": b"so dull", "label": 0},
                               {"text_a": b"fine", "label": 1}]
  assert source.dataset.element_spec["label"].dtype == tf.int64


def test_csv_pair_with_quoting_and_integer_labels(tmp_path):
  path = _write(tmp_path, "pairs.csv", 'sentence1,sentence2,label\r\n"a, b","line\none",2\r\nc,d,0\r\n')
  source = data.load(f"csv:{path}")
  assert (source.sentence_pair, source.label_names) == (True, ["0", "1", "2"])
  assert _examples(source) == [{"text_a": b"a, b", "text_b": b"line\none", "label": 2},
                               {"text_a": b"c", "text_b": b"d", "label": 0}]


def test_jsonl_validation_file_uses_the_train_label_names(tmp_path):
  path = _write(tmp_path, "dev.jsonl", '{"text": "héllo", "label": "pos"}\n\n{"text": "bye", "label": 0}\n')
  source = data.load(f"jsonl:{path}", label_names=["neg", "pos"])
  assert source.label_names == ["neg", "pos"]
  assert _examples(source) == [{"text_a": "héllo".encode(), "label": 1}, {"text_a": b"bye", "label": 0}]


def test_regression_labels_are_float32(tmp_path):
  csv_path = _write(tmp_path, "sts.csv", "text_a,text_b,score\nx,y,4.5\nz,w,1\n")
  source = data.load(f"csv:{csv_path}", label_column="score", task_type="regression")
  assert (source.task_type, source.num_classes, source.label_names) == ("regression", 1, None)
  assert source.dataset.element_spec["label"].dtype == tf.float32
  assert [example["label"] for example in _examples(source)] == [4.5, 1.0]
  jsonl_path = _write(tmp_path, "sts.jsonl", '{"a": "x", "score": 0.25}\n')
  source = data.load(f"jsonl:{jsonl_path}", text_columns=["a"], label_column="score", task_type="regression")
  assert _examples(source) == [{"text_a": b"x", "label": 0.25}]


def test_text_task_on_a_table_needs_no_label(tmp_path):
  path = _write(tmp_path, "corpus.tsv", "title\tbody\nA\tthe body\n")
  source = data.load(f"tsv:{path}", text_columns=("title", "body"), task_type="text")
  assert (source.task_type, source.num_classes) == ("text", None)
  assert _examples(source) == [{"text_a": b"A", "text_b": b"the body"}]


# Table files: every malformed case names the file and the line.

@pytest.mark.parametrize("name, content, line, message", [
    ("a.tsv", "sentence\tlabel\nok\t1\n\ntoo\tmany\tfields\n", 4,
     r"expected 2 fields as in the header \['sentence', 'label'\], found 3"),
    ("a.csv", "sentence,label\nonly one field\n", 2, r"expected 2 fields as in the header"),
    ("a.csv", "sentence,target\nx,1\n", 1, r"no column 'label'; the columns are \['sentence', 'target'\]"),
    ("a.csv", "body,label\nx,1\n", 1, r"found none of the default text columns .* the columns are \['body', "
     r"'label'\]: pass text_columns="),
    ("a.tsv", "", 1, r"the file is empty; expected a header row naming the columns"),
    ("a.csv", "\n\n", 1, r"the file is empty"),
    ("a.tsv", "sentence\tlabel\n", 2, r"no examples after the header row"),
    ("a.jsonl", "\n", 1, r"the file is empty; expected one JSON object per line"),
    ("a.jsonl", '{"text": "a", "label": 1}\n{"text": "b" "label": 1}\n', 2,
     r"invalid JSON: Expecting ',' delimiter \(column 14\)"),
    ("a.jsonl", '{"text": "a", "label": 1}\n["b", 1]\n', 2, r"expected a JSON object per line, found list"),
    ("a.jsonl", '{"text": "a", "label": 1}\n\n{"txt": "b", "label": 0}\n', 3,
     r"no key 'text'; the keys are \['label', 'txt'\]"),
    ("a.jsonl", '{"text": 5, "label": 1}\n', 1, r"the text in 'text' must be a string, got 5"),
    ("a.jsonl", '{"text": "a", "label": 1.5}\n', 1, r"class label 1.5 is neither a class name nor"),
    ("a.csv", "text,label\na,1\nb,-1\n", 3, r"label '-1' is out of range: class ids must be >= 0"),
    ("a.csv", "text,label\na,1\nb, \n", 3, r"empty label"),
    ("a.csv", 'text,label\na,1\n"b,1\n', 3, r"malformed CSV: unexpected end of data"),
    ("a.tsv", b"text\tlabel\na\t1\n\xff\t0\n", 3, r"not valid UTF-8"),
])
def test_malformed_files_name_file_and_line(tmp_path, name, content, line, message):
  path = _write(tmp_path, name, content)
  with pytest.raises(DataError, match=_at(path, line) + message) as error:
    data.load(f"{name.split('.')[1]}:{path}")
  assert (error.value.path, error.value.line) == (path, line)
  assert isinstance(error.value, ValueError)


def test_non_numeric_regression_labels_name_file_and_line(tmp_path):
  path = _write(tmp_path, "sts.tsv", "sentence1\tsentence2\tlabel\na\tb\t3.5\nc\td\thigh\n")
  with pytest.raises(DataError, match=_at(path, 3) + r"regression label 'high' is not a number"):
    data.load(f"tsv:{path}", task_type="regression")
  path = _write(tmp_path, "sts.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": null}\n')
  with pytest.raises(DataError, match=_at(path, 2) + r"regression label None is not a number"):
    data.load(f"jsonl:{path}", task_type="regression")


def test_labels_out_of_range_of_the_given_classes_name_file_and_line(tmp_path):
  path = _write(tmp_path, "dev.tsv", "sentence\tlabel\na\t1\nb\t2\n")
  with pytest.raises(DataError, match=_at(path, 3) + r"label '2' is out of range: .* an id in \[0, 2\)"):
    data.load(f"tsv:{path}", num_classes=2)
  path = _write(tmp_path, "dev.jsonl", '{"text": "a", "label": "neg"}\n{"text": "b", "label": "neutral"}\n')
  with pytest.raises(DataError, match=_at(path, 2) + r"label 'neutral' is out of range: expected one of the "
                     r"label names \['neg', 'pos'\]"):
    data.load(f"jsonl:{path}", label_names=["neg", "pos"])


def test_missing_files_and_globs_matching_nothing(tmp_path):
  path = str(tmp_path / "nope.csv")
  with pytest.raises(DataError, match="^" + re.escape(f"{path}: no such file")):
    data.load(f"csv:{path}")
  pattern = str(tmp_path / "*.txt")
  with pytest.raises(DataError, match="^" + re.escape(f"{pattern}: no file matches this pattern")):
    data.load(f"text:{pattern}")


# Pre-training text.

def test_text_glob_reads_sorted_files_one_document_per_line(tmp_path):
  _write(tmp_path, "b.txt", "third doc\n")
  _write(tmp_path, "a.txt", "first doc  \r\n\n   \nsecond doc")
  (tmp_path / "c.txt").mkdir()
  source = data.load(f"text:{tmp_path}/*.txt")
  assert (source.task_type, source.label_names, source.num_classes, source.sentence_pair) == (
      "text", None, None, False)
  assert list(source.dataset.element_spec) == ["text_a"]
  assert [example["text_a"] for example in _examples(source)] == [b"first doc", b"second doc", b"third doc"]


# Specs and options.

@pytest.mark.parametrize("spec, kwargs, message", [
    ("hf:glue", {}, r"unknown data spec 'hf:glue': expected one of tfds:NAME"),
    ("demo:7", {}, r"write just 'demo' \(its seed is the seed= option\)"),
    ("tsv:", {}, r"data spec 'tsv:' names no file after 'tsv:'"),
    ("csv:x.csv", {"data_dir": "/tmp"}, r"option\(s\) data_dir do not apply to csv specs"),
    ("demo", {"text_columns": "text"}, r"option\(s\) text_columns do not apply to demo specs"),
    ("text:*.txt", {"task_type": "classification"}, r"task_type must be 'text'"),
    ("csv:x.csv", {"task_type": "ranking"}, r"task_type must be one of \('classification', 'regression', "),
    ("csv:x.csv", {"text_columns": ["a", "b", "c"]}, r"text_columns must be one or two column names"),
    ("csv:x.csv", {"label_names": ["a"], "num_classes": 2}, r"num_classes=2 but 1 label_names were given"),
])
def test_bad_specs_and_options_say_what_is_expected(spec, kwargs, message):
  with pytest.raises(ValueError, match=message):
    data.load(spec, **kwargs)


def test_demo_source():
  source = data.load("demo", "validation", seed=3)
  assert (source.task_type, source.label_names, source.num_classes, source.num_examples) == (
      "classification", ["negative", "positive"], 2, 500)
  examples = _examples(source)
  assert len(examples) == 500 and sum(example["label"] for example in examples) == 250
  assert examples == _examples(data.load("demo", "validation", seed=3))
  assert examples != _examples(data.load("demo", "validation", seed=4))
  with pytest.raises(ValueError, match=r"has 2 classes, not num_classes=3"):
    data.load("demo", num_classes=3)


def test_docstring_example_runs():
  result = doctest.testmod(data, optionflags=doctest.NORMALIZE_WHITESPACE)
  assert result.attempted > 0 and result.failed == 0

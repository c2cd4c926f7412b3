"""Data sources: TFDS under tfds.testing.mock_data (no downloads), table files, text globs, demo."""

import doctest
import re

import pytest
import tensorflow as tf

from tests.tpu.data.source_checks import error_at as _at
from tests.tpu.data.source_checks import source_examples as _examples
from tests.tpu.data.source_checks import write_file as _write
from tpu import data
from tpu.data import DataError

# TFDS, under tfds.testing.mock_data: random text, nothing read from disk or network.

def test_tsv_with_class_names_maps_them_in_sorted_order(tmp_path):
  content = 'sentence\tlabel\tid\nit is "great\tpos\t1\n\nso dull\tneg\t2\nfine\tok\t3\n'
  source = data.load(f"tsv:{_write(tmp_path, 'train.tsv', content)}")
  assert (source.data_type, source.label_names, source.num_classes) == (
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
  source = data.load(f"csv:{csv_path}", label_column="score", data_type="regression")
  assert (source.data_type, source.num_classes, source.label_names) == ("regression", 1, None)
  assert source.dataset.element_spec["label"].dtype == tf.float32
  assert [example["label"] for example in _examples(source)] == [4.5, 1.0]
  jsonl_path = _write(tmp_path, "sts.jsonl", '{"a": "x", "score": 0.25}\n')
  source = data.load(f"jsonl:{jsonl_path}", text_columns=["a"], label_column="score", data_type="regression")
  assert _examples(source) == [{"text_a": b"x", "label": 0.25}]


def test_text_task_on_a_table_needs_no_label(tmp_path):
  path = _write(tmp_path, "corpus.tsv", "title\tbody\nA\tthe body\n")
  source = data.load(f"tsv:{path}", text_columns=("title", "body"), data_type="text")
  assert (source.data_type, source.num_classes) == ("text", None)
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
    data.load(f"tsv:{path}", data_type="regression")
  path = _write(tmp_path, "sts.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": null}\n')
  with pytest.raises(DataError, match=_at(path, 2) + r"regression label None is not a number"):
    data.load(f"jsonl:{path}", data_type="regression")


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
  # A symbolic link to nothing, named with its target, whether named or among a glob's files.
  (tmp_path / "train.tsv").symlink_to(tmp_path / "moved.tsv")
  with pytest.raises(DataError, match="^" + re.escape(f"{tmp_path}/train.tsv: a symbolic link to "
                                                      f"{tmp_path}/moved.tsv, which does not exist") + "$"):
    data.load(f"tsv:{tmp_path}/train.tsv")
  _write(tmp_path, "a.txt", "a document\n")
  (tmp_path / "b.txt").symlink_to(tmp_path / "gone.txt")
  dangling = f"{tmp_path}/b.txt: a symbolic link to {tmp_path}/gone.txt"
  with pytest.raises(DataError, match="^" + re.escape(dangling)):
    data.load(f"text:{pattern}")


# Pre-training text.

def test_text_glob_reads_sorted_files_one_document_per_line(tmp_path):
  _write(tmp_path, "b.txt", "third doc\n")
  _write(tmp_path, "a.txt", "first doc  \r\n\n   \nsecond doc")
  (tmp_path / "c.txt").mkdir()
  source = data.load(f"text:{tmp_path}/*.txt")
  assert (source.data_type, source.label_names, source.num_classes, source.sentence_pair) == (
      "text", None, None, False)
  assert list(source.dataset.element_spec) == ["text_a"]
  assert [example["text_a"] for example in _examples(source)] == [b"first doc", b"second doc", b"third doc"]


# Specs and options.

@pytest.mark.parametrize("spec, kwargs, message", [
    ("hf:glue", {}, r"unknown data spec 'hf:glue': expected one of tfds:NAME"),
    ("demo:7", {}, r"write just 'demo' \(its seed is the seed= option\)"),
    ("tsv:", {}, r"data spec 'tsv:' names no path after 'tsv:'"),
    ("csv:x.csv", {"data_dir": "/tmp"}, r"option\(s\) data_dir do not apply to csv specs"),
    ("demo", {"text_columns": "text"}, r"option\(s\) text_columns do not apply to demo specs"),
    ("text:*.txt", {"data_type": "classification"}, r"holds text data; data_type 'classification' does not"),
    ("csv:x.csv", {"data_type": "ranking"}, r"data_type must be one of \('classification', 'regression', "),
    ("csv:x.csv", {"text_columns": ["a", "b", "c"]}, r"text_columns must be one or two column names"),
    ("csv:x.csv", {"label_names": ["a"], "num_classes": 2}, r"num_classes=2 but 1 label_names were given"),
])
def test_bad_specs_and_options_say_what_is_expected(spec, kwargs, message):
  with pytest.raises(ValueError, match=message):
    data.load(spec, **kwargs)


def test_demo_source():
  source = data.load("demo", "validation", seed=3)
  assert (source.data_type, source.label_names, source.num_classes, source.num_examples) == (
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

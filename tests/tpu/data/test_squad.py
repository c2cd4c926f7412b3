"""SQuAD data sources: JSON files (v1.1 and v2.0 layouts), their errors, and TFDS mock data."""

import json

import pytest
import tensorflow_datasets as tfds

from tests.tpu.data.source_checks import source_examples as _examples
from tpu import data
from tpu.data import DataError

SQUAD = dict(version="v2.0", data=[dict(title="t", paragraphs=[dict(
    context="Paris is the capital of France.",
    qas=[dict(id="q1", question="What is the capital?", answers=[dict(text="Paris", answer_start=0)]),
         dict(id="q2", question="Who won?", answers=[], is_impossible=True)])])])


def test_squad_json(tmp_path):
  path = tmp_path / "dev.json"
  path.write_text(json.dumps(SQUAD), encoding="utf-8")
  source = data.load(f"squad:{path}")
  assert (source.data_type, source.num_examples, source.unanswerable) == ("question_answering", 2, True)
  first, second = _examples(source)
  assert first["text_a"] == b"What is the capital?" and first["text_b"].startswith(b"Paris is")
  assert first["answers"].tolist() == [b"Paris"] and first["answer_starts"].tolist() == [0]
  assert second["answers"].tolist() == [] and second["is_impossible"] and second["id"] == b"q2"
  v1 = json.loads(json.dumps(SQUAD))
  v1["data"][0]["paragraphs"][0]["qas"].pop()
  path.write_text(json.dumps(v1), encoding="utf-8")
  assert not data.load(f"squad:{path}").unanswerable


@pytest.mark.parametrize("content, message", [
    ('{"data": [', r"dev\.json:1: invalid JSON"),
    ('{"version": 1}', r"dev\.json:1: expected SQuAD's format"),
    ('{"data": [{"paragraphs": [{"qas": []}]}]}', r"dev\.json: data\[0\]\.paragraphs\[0\]: no 'context'"),
    ('{"data": [{"paragraphs": [{"context": "ab", "qas": [{"id": "x", "question": "q", "answers": '
     '[{"text": "a", "answer_start": 5}]}]}]}]}', r"answer_start 5 is outside the context \(2 characters\)"),
])
def test_malformed_squad_json(tmp_path, content, message):
  path = tmp_path / "dev.json"
  path.write_text(content, encoding="utf-8")
  with pytest.raises(DataError, match=message):
    data.load(f"squad:{path}")


@pytest.mark.parametrize("name, unanswerable", [("squad/v1.1", False), ("squad/v2.0", True)])
def test_tfds_squad_with_mock_data(name, unanswerable):
  with tfds.testing.mock_data(num_examples=4):
    source = data.load(f"tfds:{name}", "validation")
    examples = _examples(source)
    batch = next(iter(source.dataset.batch(4)))
  assert source.data_type == "question_answering" and source.unanswerable == unanswerable
  assert len(examples) == 4 and batch["answers"].shape[0] == 4
  assert all(len(e["answers"]) == len(e["answer_starts"]) for e in examples)
  assert all(len(e["answers"]) == 0 for e in examples if e["is_impossible"])

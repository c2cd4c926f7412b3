"""The source registry: `load` dispatches on the scheme, each source declares what it takes.

`ReversedLines` below is the whole diff of adding a data source: one class (in
`tpu/data/<name>.py`, which `tpu.data` imports by itself). The job's `--data` help,
its evaluation split and the options it passes follow from the declaration.
"""

import pytest

from tpu import data
from tpu import train
from tpu.data import source_registry
from tpu.data.source_registry import DataSource
from tpu.data.source_registry import from_columns


class ReversedLines(data.Source):
  """Each line of a file, reversed, labelled by whether it was a palindrome (a toy source)."""

  scheme = "reversed"
  usage = "reversed:PATH"
  description = "lines of a file, reversed (a toy source)"
  options = frozenset({"label_names"})
  data_types = ("classification",)

  def load(self, target, split, *, label_names):
    import numpy as np
    lines = [line for line in data.read_utf8(target).split("\n") if line]
    labels = np.array([int(line == line[::-1]) for line in lines], np.int64)
    return from_columns([[line[::-1] for line in lines]], "classification", labels,
                        label_names or ["no", "yes"])


@pytest.fixture
def toy_source():
  data.register(ReversedLines)
  yield
  source_registry.unregister(ReversedLines.scheme)


def test_a_registered_source_loads_and_shows_in_the_job_help(toy_source, tmp_path):
  path = tmp_path / "lines.txt"
  path.write_text("abc\nabba\n")
  source = data.load(f"reversed:{path}")
  assert isinstance(source, DataSource) and source.spec == f"reversed:{path}" and source.split is None
  rows = [(example["text_a"].numpy().decode(), int(example["label"])) for example in source.dataset]
  assert rows == [("cba", 0), ("abba", 1)]
  assert "reversed:PATH" in " ".join(train.parser().format_help().split())
  with pytest.raises(ValueError, match=r"option\(s\) text_columns do not apply to reversed specs"):
    data.load(f"reversed:{path}", text_columns=["a"])


def test_unknown_schemes_list_the_registered_ones():
  with pytest.raises(ValueError) as error:
    data.load("parquet:x.parquet")
  for usage in data.usages():
    assert usage in str(error.value)
  assert {"tfds:NAME[/CONFIG]", "tsv:PATH", "csv:PATH", "jsonl:PATH", "text:GLOB", "tfrecord:GLOB", "pydocs",
          "demo", "conll:PATH", "squad:PATH", "race:DIR", "swag:PATH", "beir:DIR"} == set(data.usages())


def test_declarations_are_checked():
  with pytest.raises(ValueError, match="new, non-empty scheme"):
    data.register(type("Again", (data.Source,), dict(scheme="demo")))
  with pytest.raises(ValueError, match="options must be among"):
    data.register(type("Odd", (data.Source,), dict(scheme="odd", options=frozenset({"colour"}))))
  with pytest.raises(TypeError, match="unknown option"):
    data.load("demo", colour="red")


def test_sources_with_splits_are_the_ones_evaluated_on_their_validation_split():
  with_splits = sorted(source.scheme for source in data.SOURCES.values() if source.splits)
  assert with_splits == ["beir", "demo", "pydocs", "race", "tfds"]
  typed = [source.scheme for source in data.SOURCES.values() if source.typed_by_caller]
  assert typed == ["tsv", "csv", "jsonl"]

"""Data of the training job: sources of raw examples, pre-tokenized records, input pipelines.

`load(spec, split)` returns a `DataSource`: a `tf.data.Dataset` of dicts of RAW text
(tokenization happens later, in the input pipeline's text encoder) plus its metadata
(data type, label names, sentence pairs, size). Each element is

  {"text_a": tf.string [],                  always
   "text_b": tf.string [],                  sentence-pair data only
   "label":  tf.int64 [] (classification) or tf.float32 [] (regression); absent for "text"}

and tagging and question-answering data add their own fields (`tagged`, `squad`).

`load` dispatches on the spec's scheme through the registry (`tpu.data.source_registry`);
each source is one module of this package and declares its scheme, its options, the
data types it yields and its splits:

    source_registry.py  Source, register, load, DataSource, DataError
    tables.py           tsv:PATH, csv:PATH, jsonl:PATH (labels read as the task says)
    tfds_datasets.py    tfds:NAME[/CONFIG] (GLUE, imdb_reviews, ag_news_subset; the
                        tagging and SQuAD datasets register themselves from their modules)
    text_files.py       text:GLOB, pre-training text, one document per line
    records.py          tfrecord:GLOB, pre-tokenized shards and their format
    shard_writer.py     the corpus -> packed chunks -> shards steps, run in one process
    beam_writer.py      the same steps as an Apache Beam pipeline
    pydocs.py           pydocs, Python's documentation as real prose
    demo.py             demo, a seeded synthetic sentiment set
    tagged.py           conll:PATH, tfds:conll2003, tagged JSON lines
    squad.py            squad:PATH, tfds:squad/v1.1 and v2.0
    choice_questions.py race:DIR, swag:PATH, multiple-choice JSON lines, tfds:race
    text_pairs.py       beir:DIR, text pairs in JSON lines and TSV (the embed task)
    pipeline.py         examples -> batched int32 features of static shape

and the steps they share: documents.py (one document per line or per blank-line block,
and their packing), corpus_reading.py and chunk_plan.py (the shard writer's chunks of a
corpus and its plan, resumed), chunk_packing.py (a chunk's documents packed into
examples), shard_assembly.py (the packed chunks into shards), fingerprints.py (what a
run's training files were, compared on resume).

Adding a source is one new module here: a `Source` subclass decorated with
`@register` (and its tests). Every module of this package is imported with it.

Example:
  >>> source = load("demo", "validation")
  >>> source.data_type, source.label_names, source.num_classes, source.num_examples
  ('classification', ['negative', 'positive'], 2, 500)
  >>> sorted(source.dataset.element_spec)
  ['label', 'text_a']
"""

import importlib
import pkgutil

from tpu.data.source_registry import DATA_TYPES
from tpu.data.source_registry import SOURCES
from tpu.data.source_registry import DataError
from tpu.data.source_registry import DataSource
from tpu.data.source_registry import Source
from tpu.data.source_registry import input_files
from tpu.data.source_registry import load
from tpu.data.source_registry import read_utf8
from tpu.data.source_registry import register
from tpu.data.source_registry import source_of
from tpu.data.source_registry import usages

__all__ = ["DATA_TYPES", "SOURCES", "DataError", "DataSource", "Source", "input_files", "load", "read_utf8",
           "register", "source_of", "usages"]

# The source modules register their sources when imported (tables, then the others by name).
_SHARED = ("source_registry", "pipeline")
for _module in ["tables"] + sorted(info.name for info in pkgutil.iter_modules(__path__)):
  if _module not in _SHARED:
    importlib.import_module(f"{__name__}.{_module}")

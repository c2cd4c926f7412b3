"""Text pairs (data type "pairs") and retrieval evaluation sets ("retrieval"), the embed task's data.

- `jsonl:PATH` with `--task embed`: one JSON object per line, `query` (or `anchor`,
  sentence-transformers' name), `positive` and an optional `negative` (a hard negative:
  a document that does not answer the query). Either every line has a negative or none.
- `tsv:PATH` with `--task embed`: `query<TAB>positive[<TAB>negative]` per line, no
  quoting (MS MARCO's triples); a first line naming the columns (`query` or `anchor`,
  `positive`, `negative`) is a header.
- `beir:DIR`: the BEIR / MTEB retrieval layout, as its archives unpack:
  `DIR/corpus.jsonl` (`_id`, `title`, `text`), `DIR/queries.jsonl` (`_id`, `text`) and
  `DIR/qrels/{train,dev,test}.tsv` (`query-id<TAB>corpus-id<TAB>score`, a header line).
  A document's text is its title, a space and its text (BEIR's models' convention). The
  split "train" is the pairs of each query with each relevant document (score > 0) of
  `qrels/train.tsv`; "validation" is the retrieval set of `qrels/dev.tsv` (`test.tsv`
  without one), "test" that of `test.tsv`.

Pair elements: {"query": string, "positive": string, "negative": string (only when the
data has negatives)}. A retrieval set (`RetrievalSource`) holds its queries, its corpus
and which documents answer which query; its elements are every text to embed, the
queries first: {"text": string, "index": int64 (the text's place in that order)}. Pairs
held out for evaluation become one with `retrieval_set` (the corpus: every distinct
positive and negative; a query's relevant documents: its positives).

A malformed file raises `DataError` naming the file and line, and what was expected.

Example:
  >>> rows = [(("a.jsonl", 1), "what is a list?", "A list is a sequence.", None),
  ...         (("a.jsonl", 2), "what is a dict?", "A dict maps keys to values.", None)]
  >>> evaluation = retrieval_set(pairs_source("a.jsonl", rows))
  >>> evaluation.queries, evaluation.relevant
  (['what is a list?', 'what is a dict?'], [(0,), (1,)])
"""

import dataclasses
import os
from collections.abc import Iterable
from collections.abc import Sequence

from tpu.data.source_registry import DataError
from tpu.data.source_registry import DataSource
from tpu.data.source_registry import Source
from tpu.data.source_registry import json_lines
from tpu.data.source_registry import read_utf8
from tpu.data.source_registry import register
from zoo.lazy import lazy_module

tf = lazy_module("tensorflow")

PAIRS = "pairs"
RETRIEVAL = "retrieval"
QUERY_KEYS = ("query", "anchor")
BEIR_FILES = ("corpus.jsonl", "queries.jsonl")
BEIR_SPLITS = dict(train=("train",), validation=("dev", "test"), test=("test",))

# A pair as read: `((file, line), query, positive, negative or None)`.
PairRow = tuple[tuple[str, int | None], str, str, str | None]


@dataclasses.dataclass(frozen=True, eq=False)
class PairsSource(DataSource):
  """A `DataSource` of (query, positive[, negative]) pairs; `rows` holds them as read:
  `[((file, line), query, positive, negative or None)]`."""

  rows: tuple = ()
  has_negatives: bool = False


@dataclasses.dataclass(frozen=True, eq=False)
class RetrievalSource(DataSource):
  """A retrieval evaluation set: `queries` and `documents` (texts), their ids, and `relevant[i]`, the
  indices of the documents that answer query i (each query has one or more)."""

  queries: tuple = ()
  documents: tuple = ()
  query_ids: tuple = ()
  document_ids: tuple = ()
  relevant: tuple = ()


def _text(file, line, record, key, required=True):
  value = record.get(key)
  if value is None and not required:
    return None
  if not isinstance(value, str) or not value.strip():
    what = "missing" if value is None else f"not a non-empty string ({value!r})"
    raise DataError(file, line, f"field {key!r} is {what}; each line needs "
                                f"{' or '.join(map(repr, QUERY_KEYS))}, 'positive' and optionally 'negative'")
  return value


def pairs_source(path: str, rows: Sequence[PairRow]) -> PairsSource:
  """The `PairsSource` of `rows` `[((file, line), query, positive, negative or None)]`; refuses a dataset
  where some rows have a negative and others not."""
  if not rows:
    raise DataError(path, None, "no pairs")
  has_negatives = rows[0][3] is not None
  for (file, line), _, _, negative in rows:
    if (negative is not None) != has_negatives:
      found = ("the first pair has a hard negative and this one none" if has_negatives
               else "the first pair has no hard negative and this one has one")
      raise DataError(file, line, f"{found}: either every pair has a hard negative or none has")
  tensors = dict(query=tf.constant([row[1] for row in rows], tf.string),
                 positive=tf.constant([row[2] for row in rows], tf.string))
  if has_negatives:
    tensors["negative"] = tf.constant([row[3] for row in rows], tf.string)
  return PairsSource(tf.data.Dataset.from_tensor_slices(tensors), PAIRS, num_examples=len(rows),
                     rows=tuple(rows), has_negatives=has_negatives)


def load_jsonl(path: str) -> PairsSource:
  """The pairs of a JSON-lines file (see the module docstring)."""
  path = os.path.expanduser(path)
  rows = []
  for line, record in json_lines(path):
    key = next((key for key in QUERY_KEYS if key in record), QUERY_KEYS[0])
    rows.append(((path, line), _text(path, line, record, key), _text(path, line, record, "positive"),
                 _text(path, line, record, "negative", required=False)))
  return pairs_source(path, rows)


def load_tsv(path: str) -> PairsSource:
  """The pairs of a TSV file: two or three columns per line, an optional header (module docstring)."""
  path = os.path.expanduser(path)
  rows, first = [], True
  for line, text in enumerate(read_utf8(path).split("\n"), start=1):
    text = text.rstrip("\r")
    if not text.strip():
      continue
    fields = text.split("\t")
    names = [field.strip().lower() for field in fields]
    if first and names[0] in QUERY_KEYS and names[1:] in (["positive"], ["positive", "negative"]):
      first = False
      continue   # the header
    first = False
    if len(fields) not in (2, 3) or not all(field.strip() for field in fields):
      raise DataError(path, line, f"expected query<TAB>positive[<TAB>negative], non-empty, got {len(fields)} "
                                  f"field(s): {text[:80]!r}")
    rows.append(((path, line), fields[0], fields[1], fields[2] if len(fields) == 3 else None))
  return pairs_source(path, rows)


def retrieval_source(queries: Sequence[str], documents: Sequence[str], query_ids: Sequence[str],
                     document_ids: Sequence[str], relevant: Iterable[Iterable[int]]) -> RetrievalSource:
  """A `RetrievalSource` whose elements are the queries, then the documents."""
  texts = list(queries) + list(documents)
  dataset = tf.data.Dataset.from_tensor_slices(dict(text=tf.constant(texts, tf.string),
                                                    index=tf.range(len(texts), dtype=tf.int64)))
  return RetrievalSource(dataset, RETRIEVAL, num_examples=len(texts), queries=tuple(queries),
                         documents=tuple(documents), query_ids=tuple(query_ids),
                         document_ids=tuple(document_ids), relevant=tuple(tuple(r) for r in relevant))


def retrieval_set(source: DataSource) -> RetrievalSource:
  """A retrieval set from held-out pairs: the distinct queries, the distinct positives and negatives as the
  corpus, and each query's positives as its relevant documents. A `RetrievalSource` is returned as it is."""
  if isinstance(source, RetrievalSource):
    return source
  if not isinstance(source, PairsSource):
    raise ValueError(f"{source.spec}: the embed task evaluates on pairs or a retrieval set (beir:DIR), not "
                     f"{source.data_type} data")
  queries: dict[str, int] = {}
  documents: dict[str, int] = {}
  relevant: dict[int, list[int]] = {}
  for _, query, positive, negative in source.rows:
    q = queries.setdefault(query, len(queries))
    d = documents.setdefault(positive, len(documents))
    relevant.setdefault(q, []).append(d)
    if negative is not None:
      documents.setdefault(negative, len(documents))
  return retrieval_source(list(queries), list(documents), [str(i) for i in range(len(queries))],
                          [str(i) for i in range(len(documents))],
                          [tuple(dict.fromkeys(relevant[q])) for q in range(len(queries))])


# ---------------------------------------------------------------------------------------------
# BEIR.


def _beir_texts(path, title):
  """`{id: text}` of a BEIR corpus or queries file (`title` adds the title before the text)."""
  texts = {}
  for line, record in json_lines(path):
    key = record.get("_id")
    if not isinstance(key, (str, int)) or isinstance(key, bool) or str(key) == "":
      raise DataError(path, line, f"field '_id' is missing or not a string: {key!r}")
    text = record.get("text")
    if not isinstance(text, str):
      raise DataError(path, line, f"field 'text' is {'missing' if text is None else 'not a string'}")
    heading = record.get("title") if title else None
    if heading is not None and not isinstance(heading, str):
      raise DataError(path, line, f"field 'title' is not a string: {heading!r}")
    if str(key) in texts:
      raise DataError(path, line, f"_id {key!r} appears twice")
    texts[str(key)] = f"{heading} {text}".strip() if heading else text
  return texts


def _qrels(path, queries, corpus):
  """`{query id: [corpus ids]}` of the relevant (score > 0) judgements of a qrels file, in file order."""
  judged = {}
  for line, text in enumerate(read_utf8(path).split("\n"), start=1):
    fields = text.rstrip("\r").split("\t")
    if not text.strip() or (line == 1 and fields[-1].strip().lower() == "score"):
      continue
    if len(fields) != 3:
      raise DataError(path, line, f"expected query-id<TAB>corpus-id<TAB>score, got {len(fields)} field(s)")
    query, document, score = fields
    try:
      score = int(score)
    except ValueError:
      raise DataError(path, line, f"score {score!r} is not an integer") from None
    if query not in queries:
      raise DataError(path, line, f"query-id {query!r} is not in queries.jsonl")
    if document not in corpus:
      raise DataError(path, line, f"corpus-id {document!r} is not in corpus.jsonl")
    if score > 0 and document not in judged.setdefault(query, []):
      judged[query].append(document)
  return {query: documents for query, documents in judged.items() if documents}


def beir_qrels_file(folder: str, split: str) -> str:
  """The qrels file of `split` in a BEIR folder (the first of `BEIR_SPLITS[split]` that exists)."""
  names = BEIR_SPLITS.get(split, (split,))
  for name in names:
    path = os.path.join(folder, "qrels", f"{name}.tsv")
    if tf.io.gfile.exists(path):
      return path
  raise DataError(os.path.join(folder, "qrels"), None, f"no {' or '.join(f'{n}.tsv' for n in names)} for "
                  f"split {split!r}: beir:DIR reads DIR/corpus.jsonl, DIR/queries.jsonl and DIR/qrels/"
                  "{train,dev,test}.tsv")


def load_beir(folder: str, split: str) -> PairsSource | RetrievalSource:
  """The pairs (split "train") or the retrieval set (other splits) of a BEIR folder."""
  folder = os.path.expanduser(folder)
  for name in BEIR_FILES:
    if not tf.io.gfile.exists(os.path.join(folder, name)):
      raise DataError(os.path.join(folder, name), None, "no such file: beir:DIR reads DIR/corpus.jsonl, "
                      "DIR/queries.jsonl and DIR/qrels/{train,dev,test}.tsv (the BEIR layout)")
  qrels_path = beir_qrels_file(folder, split)
  corpus = _beir_texts(os.path.join(folder, "corpus.jsonl"), title=True)
  queries = _beir_texts(os.path.join(folder, "queries.jsonl"), title=False)
  judged = _qrels(qrels_path, queries, corpus)
  if not judged:
    raise DataError(qrels_path, None, "no relevant (score > 0) judgement")
  if split == "train":
    rows = [((qrels_path, None), queries[query], corpus[document], None)
            for query, documents in judged.items() for document in documents]
    return pairs_source(qrels_path, rows)
  document_ids = list(corpus)
  place = {document: index for index, document in enumerate(document_ids)}
  query_ids = list(judged)
  return retrieval_source([queries[query] for query in query_ids], [corpus[d] for d in document_ids],
                          query_ids, document_ids, [[place[d] for d in judged[query]] for query in query_ids])


@register
class BeirSource(Source):
  scheme = "beir"
  usage = "beir:DIR"
  description = ("a retrieval dataset in the BEIR layout (corpus.jsonl, queries.jsonl, qrels/*.tsv): "
                 "pairs to train the embed task, a corpus to evaluate its retrieval")
  data_types = (PAIRS, RETRIEVAL)
  splits = ("train", "validation", "test")
  reads_files = True

  def load(self, target: str, split: str) -> DataSource:
    return load_beir(target, split)

  def input_files(self, target: str, data_dir: str | None = None) -> list[str]:
    folder = os.path.expanduser(target)
    qrels = sorted(tf.io.gfile.glob(os.path.join(folder, "qrels", "*.tsv")))
    return [os.path.join(folder, name) for name in BEIR_FILES] + qrels

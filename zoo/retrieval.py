"""Retrieval over text embeddings: exact (brute-force) and approximate search, and their metrics.

Similarity is the cosine: vectors are scaled to unit length first, so a dot product
ranks as the cosine does (the embed task's loss scores pairs by cosine too).

- `exact_search`: every document scored against every query (numpy, in blocks of
  queries), ties broken by the lower document index. The reference the index is
  measured against.
- `Index`: an approximate nearest-neighbour index, FAISS's HNSW graph over inner
  products (`faiss-cpu`; `IndexHNSWFlat`, no training step, so it indexes a corpus of
  any size, including one too small to train a quantiser on). FAISS rather than ScaNN:
  its wheels install on Linux, macOS and Windows without a TensorFlow of a matching
  release, the index is a file any FAISS reads back (`save`, `Index.load`), and the same
  library offers the exact flat index for checking. Built single-threaded, so the same
  vectors give the same graph and the same answers.
- `retrieval_metrics`: recall@k (the share of a query's relevant documents among its
  first k, averaged over queries, as BEIR's and sentence-transformers' evaluators
  compute it) and MRR@k (the mean of 1 / rank of the first relevant document in the
  first k, 0 without one).

Example:
  >>> documents = np.array([[1.0, 0.0], [0.0, 1.0], [0.7, 0.7]])
  >>> queries = np.array([[0.9, 0.1], [0.1, 0.9]])
  >>> ranked = exact_search(queries, documents, k=2)
  >>> ranked.tolist()
  [[0, 2], [1, 2]]
  >>> retrieval_metrics(ranked, [(2,), (1,)], ks=(1, 2), mrr_at=2)
  {'recall@1': 0.5, 'recall@2': 1.0, 'mrr@2': 0.75}
"""

import types
from collections.abc import Sequence
from typing import Any

import numpy as np

QUERY_BLOCK = 1024


def unit_rows(vectors: np.ndarray) -> np.ndarray:
  """float32 rows scaled to unit length (a zero row stays zero)."""
  vectors = np.asarray(vectors, np.float32)
  return vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)


def exact_search(queries: np.ndarray, documents: np.ndarray, k: int) -> np.ndarray:
  """int64 `[Q, min(k, N)]`: the indices of each query's k most similar documents, most similar first."""
  queries, documents = unit_rows(queries), unit_rows(documents)
  k = min(k, len(documents))
  ranked = np.empty([len(queries), k], np.int64)
  for start in range(0, len(queries), QUERY_BLOCK):
    scores = queries[start:start + QUERY_BLOCK] @ documents.T
    ranked[start:start + QUERY_BLOCK] = np.argsort(-scores, axis=1, kind="stable")[:, :k]
  return ranked


class Index:
  """An HNSW index of documents' unit vectors (FAISS); `search` returns document indices like `exact_search`.

  Args:
    documents: float `[N, D]`.
    neighbours: the graph's links per node (FAISS's M).
    build_depth: candidates kept while inserting (efConstruction).
    search_depth: candidates kept while searching (efSearch; raised to k when smaller).
    index: a FAISS index to wrap instead (`load`).
  """

  def __init__(self, documents: np.ndarray | None = None, neighbours: int = 32, build_depth: int = 200,
               search_depth: int = 128, index: Any = None):
    faiss = _faiss()
    self.search_depth = search_depth
    if index is not None:   # a FAISS index read back (`load`)
      self.index = index
      return
    if documents is None:
      raise ValueError("Index needs the documents' vectors")
    documents = unit_rows(documents)
    self.index = faiss.IndexHNSWFlat(documents.shape[1], neighbours, faiss.METRIC_INNER_PRODUCT)
    self.index.hnsw.efConstruction = build_depth
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)   # one thread inserts in a fixed order: the same graph every time
    try:
      self.index.add(documents)
    finally:
      faiss.omp_set_num_threads(threads)

  def __len__(self) -> int:
    return self.index.ntotal

  def search(self, queries: np.ndarray, k: int) -> np.ndarray:
    """int64 `[Q, min(k, N)]` approximate top-k document indices, most similar first."""
    k = min(k, len(self))
    self.index.hnsw.efSearch = max(self.search_depth, k)
    _, ranked = self.index.search(unit_rows(queries), k)
    return ranked.astype(np.int64)

  def save(self, path: str) -> None:
    """Writes the index to a file (FAISS's format)."""
    _faiss().write_index(self.index, path)

  @classmethod
  def load(cls, path: str, search_depth: int = 128) -> "Index":
    return cls(index=_faiss().read_index(path), search_depth=search_depth)


def _faiss() -> types.ModuleType:
  import logging
  logging.getLogger("faiss.loader").setLevel(logging.WARNING)   # which CPU build it picked, at INFO
  try:
    import faiss
  except ImportError:
    raise ImportError("approximate search needs FAISS: pip install faiss-cpu") from None
  return faiss


def retrieval_metrics(ranked: np.ndarray, relevant: Sequence[Sequence[int]], ks: Sequence[int] = (1, 10),
                      mrr_at: int = 10) -> dict[str, float]:
  """recall@k for each of `ks` and MRR@`mrr_at` of rankings `[Q, >= max k]` against each query's relevant
  document indices (module docstring); queries without a relevant document are an error."""
  if len(ranked) != len(relevant):
    raise ValueError(f"{len(ranked)} rankings for {len(relevant)} queries")
  if any(not documents for documents in relevant):
    raise ValueError("every query needs a relevant document")
  results = {}
  for k in ks:
    results[f"recall@{k}"] = float(np.mean([len(set(row[:k].tolist()) & set(documents)) / len(set(documents))
                                            for row, documents in zip(ranked, relevant, strict=True)]))
  reciprocal = []
  for row, documents in zip(ranked, relevant, strict=True):
    hits = [rank for rank, document in enumerate(row[:mrr_at].tolist(), start=1) if document in documents]
    reciprocal.append(1.0 / hits[0] if hits else 0.0)
  results[f"mrr@{mrr_at}"] = float(np.mean(reciprocal))
  return results

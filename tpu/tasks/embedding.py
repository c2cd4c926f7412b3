"""The embed task: a dual encoder trained on text pairs, evaluated by retrieval, served as vectors.

One encoder embeds queries and documents alike (`zoo.models.TextEmbedder`: the encoder's
output pooled by `cls`, `mean` or `max`, optionally L2-normalised). The loss is the
in-batch-negatives softmax of sentence-transformers' `MultipleNegativesRankingLoss`
(`zoo.models.losses.ranking_loss`): each query against every positive and hard negative
of the batch, scored by `similarity_scale · cos`, its own positive the target;
`symmetric_loss` adds each positive against every query
(`MultipleNegativesSymmetricRankingLoss`).

On several replicas (`gather_negatives`, the default) each replica's vectors are
all-gathered, so every query is scored against the documents of the whole global batch,
as on one device: the loss and its gradients equal one device's on the global batch
(sentence-transformers' `gather_across_devices=True`). The gather's gradient sums every
replica's loss terms before each replica keeps its own slice. What it costs: one
all-gather of `B·(K+1)·(D+1)` float32 values per step (queries, documents and weights of
every replica: 0.8 MB for B = 128, K = 1, D = 768), next to the gradients' all-reduce of
every weight (440 MB for BERT-base); a `[B/R, B·K]` score matrix per replica instead of
`[B/R, B/R·K]`; and a second forward pass. A distribution strategy takes no collective
inside a nested function or a `switch_case` (length buckets), so the step computes the
vectors, then the loss and its gradient with respect to this replica's vectors in the
replica function, then runs the model again with the same dropout draws and its
backward pass from that gradient (`tpu.trainer`, as GradCache does): about a third more
compute per step. Without it each replica's queries see only its own documents: fewer
negatives, an easier task, and a loss that depends on the number of replicas.

Evaluation embeds a held-out retrieval set (`beir:DIR`'s dev or test qrels, or held-out
pairs: `tpu.data.text_pairs`), then ranks the whole corpus for every query twice: exactly
(brute force, `zoo.retrieval.exact_search`) and through an approximate index (FAISS HNSW,
`zoo.retrieval.Index`), and reports recall@1, recall@10 and MRR@10 of both (`index_...`)
and `index_recall_gap@10`, the recall@10 the index loses.

The export's `embed` signature (also `serving_default`) takes raw text `[B]` and returns
`embeddings` `[B, D]`, the vectors the evaluation ranked.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import Any
from typing import cast

import numpy as np

from tpu.tasks.base import Config
from tpu.tasks.base import Features
from tpu.tasks.base import Stats
from tpu.tasks.base import Task
from tpu.tasks.base import build_encoder
from tpu.tasks.task_registry import Setting
from tpu.tasks.task_registry import register
from zoo.lazy import lazy_module

if TYPE_CHECKING:
  from tpu.data import DataSource
  from tpu.data.text_pairs import PairsSource
  from tpu.data.text_pairs import RetrievalSource
  from zoo.text import TextEncoder

tf = lazy_module("tensorflow")
log = logging.getLogger("tpu.train")

POOLING = ("cls", "mean", "max")
# Without a setting of their own or an --init-checkpoint directory's (a sentence-transformers model's).
DEFAULT_POOLING, DEFAULT_NORMALIZE = "mean", True
INDEXES = ("hnsw", "off")
RECALL_AT = (1, 10)
MRR_AT = 10


def encode_texts(texts: Any, text_encoder: TextEncoder) -> Features:
  """int32 `[B, N, T]` features of string `[B, N]` texts, each encoded alone."""
  texts = tf.convert_to_tensor(texts)
  shape = tf.shape(texts)
  features = text_encoder.encode(tf.reshape(texts, [-1]))
  return {name: tf.reshape(value, tf.concat([shape, [text_encoder.seq_length]], 0))
          for name, value in features.items()}


@register
class EmbedTask(Task):
  """Text embeddings for retrieval (see the module docstring)."""

  name = "embed"
  data_type = "pairs"
  description = "text embeddings: a dual encoder on text pairs, evaluated by retrieval"
  settings = (
      Setting("pooling", str, None, "how a text's vector comes from the encoder's output: cls (the first "
              "token's state), mean or max (over real tokens); mean unless --init-checkpoint's directory "
              "has its own", choices=POOLING, architecture=True),
      Setting("normalize", bool, None, "scale each text's vector to unit length (what the export returns); "
              "on unless --init-checkpoint's directory says otherwise", architecture=True),
      Setting("similarity_scale", float, 20.0, "the loss's inverse temperature: cosine similarities are "
              "multiplied by it before the softmax (sentence-transformers' scale)", minimum=0.0),
      Setting("symmetric_loss", bool, False, "add the document-to-query direction to the loss (each positive "
              "against every query of the batch)"),
      Setting("gather_negatives", bool, True, "on several replicas, score each query against the documents "
              "of every replica (one all-gather of the vectors per step), not only its own replica's"),
      Setting("retrieval_index", str, "hnsw", "the approximate index evaluation also ranks with (FAISS "
              "HNSW), or off", choices=INDEXES),
      Setting("hard_negatives", bool, None, "whether each training pair has a hard negative (from the "
              "training data)", flag=False, input=True),
  )
  stat_names = ()
  prediction_fields = (("embedding", "embeddings", "list"),)

  def __init__(self, config: Config) -> None:
    super().__init__(config)
    self._retrieval: RetrievalSource | None = None

  @classmethod
  def derived_settings(cls, config: Config) -> dict[str, Any]:
    return dict(pooling=config.pooling or DEFAULT_POOLING,
                normalize=DEFAULT_NORMALIZE if config.normalize is None else config.normalize)

  @property   # the setting's (the base class's is a class attribute)
  def gathers_across_replicas(self) -> bool:  # type: ignore[override]
    return self.config.gather_negatives

  def data_metadata(self, source: DataSource) -> dict[str, Any]:
    pairs = cast("PairsSource", source)   # the data type "pairs" (`check_source`)
    return dict(sentence_pair=False, hard_negatives=pairs.has_negatives, num_classes=None, label_names=None)

  def check_source(self, source: DataSource, spec: str) -> None:
    super().check_source(source, spec)
    pairs = cast("PairsSource", source)   # of the data type "pairs": `super().check_source` refuses others
    if self.config.hard_negatives is not None and pairs.has_negatives != self.config.hard_negatives:
      raise ValueError(f"{spec} {'has' if pairs.has_negatives else 'has no'} hard negatives, but this run "
                       f"was trained {'with' if self.config.hard_negatives else 'without'} them")

  def build(self) -> Any:
    from zoo.models import TextEmbedder
    config = self.config
    return TextEmbedder(build_encoder(config), pooling=config.pooling, normalize=config.normalize,
                        name="embedder")

  # Input pipeline: training pairs become [B, K, T] (query, positive, negative?); evaluation texts [B, 1, T].
  def features(self, raw: Features, text_encoder: TextEncoder, seed: Any = None) -> Features:
    if "text" in raw:
      features = encode_texts(raw["text"][:, tf.newaxis], text_encoder)
      features["index"] = tf.cast(raw["index"], tf.int64)
      return features
    columns = ["query", "positive"] + (["negative"] if "negative" in raw else [])
    features = encode_texts(tf.stack([raw[column] for column in columns], axis=1), text_encoder)
    for value in features.values():   # static shapes for TPUs: [B, K, T]
      value.set_shape([raw["query"].shape[0], len(columns), self.config.seq_length])
    features["weight"] = tf.ones(tf.shape(raw["query"])[:1], tf.float32)
    return features

  def denominators(self, features: Features) -> Features:
    return dict(examples=tf.reduce_sum(features["weight"]))

  def loss(self, features: Features, outputs: Any, denominator: Any = None) -> Any:
    """The ranking loss of vectors `[B, K, D]`: the query's, then its documents'."""
    from zoo.models import losses
    config = self.config
    return losses.ranking_loss(outputs[:, 0], outputs[:, 1:], scale=config.similarity_scale,
                               symmetric=config.symmetric_loss, weights=features["weight"],
                               denominator=denominator, across_replicas=config.gather_negatives)

  def loss_and_stats(self, features: Features, outputs: Any, denominators: Features) -> tuple[Any, Stats]:
    return self.loss(features, outputs, denominators["examples"]), {}

  # Evaluation: the retrieval set's texts embedded, then ranked on the host.
  def prepare_evaluation(self, source: DataSource) -> DataSource | None:
    from tpu.data.text_pairs import retrieval_set
    self._retrieval = retrieval_set(source)
    return self._retrieval

  def eval_outputs(self, features: Features, outputs: Any, denominators: Features) -> tuple[Stats, Features]:
    return {}, dict(vectors=outputs[:, 0], index=features["index"], weight=features["weight"])

  def metrics(self, stats: Stats, examples: dict[str, Any]) -> dict[str, float]:
    if self._retrieval is None:
      raise RuntimeError("prepare_evaluation(source) must read the retrieval set before metrics")
    retrieval = self._retrieval
    keep = examples["weight"] > 0
    vectors = examples["vectors"][keep][np.argsort(examples["index"][keep], kind="stable")]
    queries = len(retrieval.queries)
    if len(vectors) != queries + len(retrieval.documents):
      raise ValueError(f"{len(vectors)} vectors for {queries} queries and {len(retrieval.documents)} "
                       "documents")
    return retrieval_results(vectors[:queries], vectors[queries:], retrieval.relevant,
                             index=self.config.retrieval_index)

  # Serving: one text per example.
  def serving_network(self, model: Any) -> Any:
    return model

  def serving_text_inputs(self) -> tuple[str, ...]:
    return ("text",)

  def serving_signature_aliases(self) -> dict[str, str]:
    return dict(embed="serving_default")

  def serving_outputs(self, network: Any, features: Features, label_names: Any) -> Features:
    vectors = network({name: value[:, tf.newaxis] for name, value in features.items()}, training=False)
    return dict(embeddings=tf.cast(vectors[:, 0], tf.float32))

  def export_info(self) -> dict[str, Any]:
    config = self.config
    return dict(super().export_info(), pooling=config.pooling, normalize=config.normalize,
                similarity="cosine")


def retrieval_results(queries: np.ndarray, documents: np.ndarray, relevant: Sequence[Sequence[int]],
                      index: str | None = "hnsw") -> dict[str, float]:
  """recall@1, recall@10 and MRR@10 of an exact ranking of `documents` for `queries` (vectors) against each
  query's `relevant` document indices; with an index (`zoo.retrieval.Index`), the same through it
  (`index_...`) and `index_recall_gap@10`, exact minus index recall@10."""
  from zoo import retrieval
  depth = max(*RECALL_AT, MRR_AT)
  results = retrieval.retrieval_metrics(retrieval.exact_search(queries, documents, depth), relevant,
                                        ks=RECALL_AT, mrr_at=MRR_AT)
  if index != "off":
    found = retrieval.Index(documents).search(queries, depth)
    approximate = retrieval.retrieval_metrics(found, relevant, ks=RECALL_AT, mrr_at=MRR_AT)
    results.update({f"index_{name}": value for name, value in approximate.items()})
    results["index_recall_gap@10"] = results["recall@10"] - approximate["recall@10"]
  results.update(queries=len(queries), documents=len(documents))
  return results

"""The embed task: its loss against sentence-transformers' `MultipleNegativesRankingLoss`, pooling against
numpy, pairs and BEIR files as users have them (and their errors), retrieval metrics against a plain
reimplementation, and a run on the standard library's docstrings whose reported recall@10 is recomputed
by brute force from its SavedModel's vectors."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from export import serving_ops
from tpu import data
from tpu.data import pydocs
from tpu.data.text_pairs import retrieval_set
from zoo import retrieval
from zoo.models import TextEmbedder
from zoo.models import TransformerEncoder
from zoo.models.losses import ranking_loss

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _st_loss(embeddings, symmetric, scale=20.0):
  """sentence-transformers' loss on a list of [B, D] arrays (anchor, positive, negative...)."""
  import torch
  from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
  from sentence_transformers.util import cos_sim
  options = {}
  if symmetric:
    options = dict(directions=("query_to_doc", "doc_to_query"), partition_mode="per_direction")
  loss = MultipleNegativesRankingLoss.__new__(MultipleNegativesRankingLoss)
  torch.nn.Module.__init__(loss)   # its constructor keeps the model, which the loss of embeddings never reads
  loss.scale, loss.similarity_fct, loss.gather_across_devices = scale, cos_sim, False
  loss.directions = options.get("directions", ("query_to_doc",))
  loss.partition_mode = options.get("partition_mode", "joint")
  loss.hardness_mode, loss.hardness_strength = None, 0.0
  return float(loss.compute_loss_from_embeddings([torch.tensor(e) for e in embeddings], None))


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("negatives", [0, 1, 2])
def test_the_loss_is_sentence_transformers(symmetric, negatives):
  rng = np.random.default_rng(negatives)
  columns = [rng.normal(size=(6, 8)).astype(np.float32) for _ in range(2 + negatives)]
  documents = np.stack(columns[1:], axis=1)
  ours = float(ranking_loss(columns[0], documents, scale=13.0, symmetric=symmetric))
  assert ours == pytest.approx(_st_loss(columns, symmetric, scale=13.0), abs=2e-5)
  # Padding (weight 0) is neither a query nor a candidate: the loss is that of the real rows.
  padded = [np.concatenate([column, rng.normal(size=(2, 8)).astype(np.float32)]) for column in columns]
  weights = np.array([1.0] * 6 + [0.0] * 2, np.float32)
  ours = float(ranking_loss(padded[0], np.stack(padded[1:], 1), scale=13.0, symmetric=symmetric,
                            weights=weights))
  assert ours == pytest.approx(_st_loss(columns, symmetric, scale=13.0), abs=2e-5)


def _numpy_pool(sequence, mask, mode, normalize):
  real = mask.astype(bool)
  if mode == "cls":
    vectors = sequence[:, 0]
  elif mode == "mean":
    vectors = np.stack([rows[keep].mean(0) for rows, keep in zip(sequence, real, strict=True)])
  else:
    vectors = np.stack([rows[keep].max(0) for rows, keep in zip(sequence, real, strict=True)])
  return vectors / np.linalg.norm(vectors, axis=-1, keepdims=True) if normalize else vectors


@pytest.mark.parametrize("mode, normalize", [("cls", False), ("mean", True), ("max", False), ("max", True)])
def test_pooling_is_numpys_over_real_tokens(mode, normalize):
  encoder = TransformerEncoder(vocab_size=40, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32,
                               seq_length=10)
  embedder = TextEmbedder(encoder, pooling=mode, normalize=normalize)
  lengths = np.array([[10, 3], [1, 6]])
  mask = (np.arange(10) < lengths[..., None]).astype(np.int32)                       # [2, 2, 10]
  ids = np.random.default_rng(0).integers(5, 40, size=mask.shape).astype(np.int32) * mask
  features = dict(input_word_ids=ids, input_mask=mask, input_type_ids=0 * ids)
  vectors = embedder(features).numpy()
  flat = {name: value.reshape(-1, 10) for name, value in features.items()}
  sequence = encoder(flat)["sequence_output"].numpy()
  expected = _numpy_pool(sequence, flat["input_mask"], mode, normalize).reshape(2, 2, -1)
  np.testing.assert_allclose(vectors, expected, atol=1e-5)
  assert TextEmbedder.from_config(embedder.get_config()).get_config() == embedder.get_config()


def test_an_encoder_only_funnel_pools_its_shorter_output_over_its_pooled_mask():
  from zoo.models import FunnelEncoder
  encoder = FunnelEncoder(vocab_size=40, hidden_size=16, num_heads=2, intermediate_size=32,
                          block_sizes=(1, 1, 1), seq_length=16)
  embedder = TextEmbedder(encoder, pooling="mean", normalize=False)
  lengths = np.array([16, 9, 2])
  mask = (np.arange(16) < lengths[:, None]).astype(np.int32)
  ids = np.random.default_rng(1).integers(5, 40, size=mask.shape).astype(np.int32) * mask
  features = dict(input_word_ids=ids, input_mask=mask, input_type_ids=0 * ids)
  sequence = encoder(features)["sequence_output"].numpy()
  pooled_mask = encoder.sequence_mask(tf.constant(mask)).numpy()
  assert sequence.shape[1] == pooled_mask.shape[1] < 16
  # The zoo's pooling keeps a window that holds a real token: a full text keeps every position, the
  # shortest ([CLS] and one token) its first ones only.
  assert pooled_mask[0].all() and 0 < pooled_mask[2].sum() < pooled_mask[1].sum() < pooled_mask.shape[1]
  vectors = embedder({name: value[:, None] for name, value in features.items()}).numpy()[:, 0]
  np.testing.assert_allclose(vectors, _numpy_pool(sequence, pooled_mask, "mean", False), atol=1e-5)


# ---------------------------------------------------------------------------------------------
# Data.


def _write(path, text):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(text, encoding="utf-8")
  return str(path)


def test_pairs_from_json_lines_and_tsv(tmp_path):
  jsonl = _write(tmp_path / "a.jsonl", '{"anchor": "wie geht’s?", "positive": "gut 🙂", "negative": "nein"}'
                                       '\n\n{"query": "q2", "positive": "p2", "negative": "n2"}\n')
  source = data.load(f"jsonl:{jsonl}", data_type="pairs")
  assert source.has_negatives and source.num_examples == 2
  first = next(iter(source.dataset))
  assert first["query"].numpy().decode() == "wie geht’s?" and first["negative"].numpy().decode() == "nein"
  tsv = _write(tmp_path / "a.tsv", "query\tpositive\nq1\tp1\r\nq2\tp2\n")
  source = data.load(f"tsv:{tsv}", data_type="pairs")
  assert [row[1:] for row in source.rows] == [("q1", "p1", None), ("q2", "p2", None)]
  assert sorted(source.dataset.element_spec) == ["positive", "query"]


@pytest.mark.parametrize("name, text, message", [
    ("missing.jsonl", '{"query": "q", "positive": "p"}\n{"query": "q"}\n',
     r"missing.jsonl:2: field 'positive' is missing"),
    ("empty.jsonl", '{"query": "q", "positive": " "}\n',
     r"empty.jsonl:1: field 'positive' is not a non-empty string"),
    ("mixed.jsonl", '{"query": "q", "positive": "p"}\n{"query": "q", "positive": "p", "negative": "n"}\n',
     r"mixed.jsonl:2: the first pair has no hard negative and this one has one: either every pair has a "),
    ("bad.jsonl", '{"query": "q", "positive": "p"}\n{"query": \n', r"bad.jsonl:2: invalid JSON"),
    ("four.tsv", "q\tp\tn\tx\n",
     r"four.tsv:1: expected query<TAB>positive\[<TAB>negative\], non-empty, got 4"),
    ("blank.tsv", "q\tp\n\nq\t\n", r"blank.tsv:3: expected query<TAB>positive"),
])
def test_malformed_pairs_name_file_and_line(tmp_path, name, text, message):
  path = _write(tmp_path / name, text)
  with pytest.raises(data.DataError, match=message):
    data.load(f"{name.rsplit('.', 1)[1]}:{path}", data_type="pairs")


def _beir(folder, qrels):
  _write(folder / "corpus.jsonl", '{"_id": "d1", "title": "Lists", "text": "A list is a sequence."}\n'
                                  '{"_id": 2, "text": "A dict maps keys to values."}\n'
                                  '{"_id": "d3", "title": "", "text": "Sets hold unique items."}\n')
  _write(folder / "queries.jsonl",
         '{"_id": "q1", "text": "what is a list?"}\n{"_id": "q2", "text": "dicts?"}\n')
  for name, text in qrels.items():
    _write(folder / "qrels" / name, "query-id\tcorpus-id\tscore\n" + text)
  return str(folder)


def test_a_beir_folder_gives_training_pairs_and_a_retrieval_set(tmp_path):
  folder = _beir(tmp_path / "beir", {"train.tsv": "q1\td1\t1\nq2\t2\t2\nq2\td3\t0\n",
                                     "test.tsv": "q2\t2\t1\n"})
  train = data.load(f"beir:{folder}", "train")
  assert [row[1:3] for row in train.rows] == [("what is a list?", "Lists A list is a sequence."),
                                                ("dicts?", "A dict maps keys to values.")]
  evaluation = data.load(f"beir:{folder}", "validation")   # no dev.tsv: test.tsv
  assert evaluation.data_type == "retrieval" and evaluation.queries == ("dicts?",)
  assert evaluation.documents[evaluation.relevant[0][0]] == "A dict maps keys to values."
  assert len(evaluation.documents) == 3 and evaluation.num_examples == 4
  texts = [example["text"].numpy().decode() for example in evaluation.dataset]
  assert texts[0] == "dicts?" and texts[1:] == list(evaluation.documents)
  assert data.input_files(f"beir:{folder}")[-2:] == [f"{folder}/qrels/test.tsv", f"{folder}/qrels/train.tsv"]


@pytest.mark.parametrize("qrels, message", [
    ("q1\td9\t1\n", r"qrels/dev.tsv:2: corpus-id 'd9' is not in corpus.jsonl"),
    ("q1\td1\t1\nq7\td1\t1\n", r"qrels/dev.tsv:3: query-id 'q7' is not in queries.jsonl"),
    ("q1\td1\thigh\n", r"qrels/dev.tsv:2: score 'high' is not an integer"),
    ("q1\td1\n", r"qrels/dev.tsv:2: expected query-id<TAB>corpus-id<TAB>score, got 2"),
    ("q1\td1\t0\n", r"qrels/dev.tsv: no relevant \(score > 0\) judgement"),
])
def test_malformed_beir_files_name_file_and_line(tmp_path, qrels, message):
  folder = _beir(tmp_path / "beir", {"dev.tsv": qrels})
  with pytest.raises(data.DataError, match=message):
    data.load(f"beir:{folder}", "validation")


def test_a_beir_folder_without_its_files_says_what_it_reads(tmp_path):
  with pytest.raises(data.DataError, match=r"corpus.jsonl: no such file: beir:DIR reads DIR/corpus.jsonl"):
    data.load(f"beir:{tmp_path}", "validation")
  folder = _beir(tmp_path / "beir", {"train.tsv": "q1\td1\t1\n"})
  with pytest.raises(data.DataError, match=r"no dev.tsv or test.tsv for split 'validation'"):
    data.load(f"beir:{folder}", "validation")
  _write(tmp_path / "beir" / "corpus.jsonl", '{"_id": "d1"}\n')
  with pytest.raises(data.DataError, match=r"corpus.jsonl:1: field 'text' is missing"):
    data.load(f"beir:{folder}", "train")


def test_held_out_pairs_become_a_retrieval_set(tmp_path):
  path = _write(tmp_path / "p.jsonl", "\n".join(json.dumps(row) for row in [
      dict(query="a", positive="A", negative="B"), dict(query="a", positive="A2", negative="C")]) + "\n")
  evaluation = retrieval_set(data.load(f"jsonl:{path}", data_type="pairs"))
  assert evaluation.queries == ("a",) and evaluation.documents == ("A", "B", "A2", "C")
  assert evaluation.relevant == ((0, 2),)


# ---------------------------------------------------------------------------------------------
# Retrieval metrics.


def _plain_metrics(queries, documents, relevant, k):
  """recall@k and MRR@k written out query by query (the reference)."""
  recalls, reciprocal = [], []
  for query, answers in zip(queries, relevant, strict=True):
    scores = [float(np.dot(query, document) / np.linalg.norm(query) / np.linalg.norm(document))
              for document in documents]
    order = sorted(range(len(documents)), key=lambda index: (-scores[index], index))[:k]
    recalls.append(sum(index in answers for index in set(order)) / len(set(answers)))
    ranks = [rank for rank, index in enumerate(order, start=1) if index in answers]
    reciprocal.append(1 / ranks[0] if ranks else 0.0)
  return np.mean(recalls), np.mean(reciprocal)


def test_exact_metrics_and_the_index_against_a_plain_ranking():
  rng = np.random.default_rng(0)
  centres = rng.normal(size=(40, 24))
  documents = centres[rng.integers(0, 40, 600)] + 0.5 * rng.normal(size=(600, 24))
  answers = rng.integers(0, 600, size=(50, 2))
  queries = documents[answers[:, 0]] + 0.6 * rng.normal(size=(50, 24))
  relevant = [tuple(pair) for pair in answers]
  ranked = retrieval.exact_search(queries, documents, 10)
  metrics = retrieval.retrieval_metrics(ranked, relevant, ks=(1, 10), mrr_at=10)
  recall, mrr = _plain_metrics(queries, documents, relevant, 10)
  assert metrics["recall@10"] == pytest.approx(recall) and metrics["mrr@10"] == pytest.approx(mrr)
  assert metrics["recall@1"] == pytest.approx(_plain_metrics(queries, documents, relevant, 1)[0])
  index = retrieval.Index(documents)
  found = index.search(queries, 10)
  overlap = [len(set(a) & set(b)) / 10 for a, b in zip(found, ranked, strict=True)]
  assert found.shape == (50, 10) and np.mean(overlap) > 0.9
  assert (retrieval.Index(documents).search(queries, 10) == found).all()   # built alike every time


# ---------------------------------------------------------------------------------------------
# A run on real prose.


@pytest.fixture(scope="module")
def docstring_run(tmp_path_factory):
  """A tiny embed run on the standard library's docstring pairs (train.jsonl), evaluated on the held-out
  modules' BEIR folder, exported."""
  from tests.tpu.tasks.losses import tiny_config
  from tpu import train
  folder = tmp_path_factory.mktemp("embed")
  pydocs.write_pairs(str(folder / "pairs"))
  config = tiny_config(folder / "run", model="bert_small", task="embed", steps=30, batch_size=16,
                       seq_length=32, vocab_size=600, eval_batch_size=64, export=True, learning_rate=2e-3,
                       checkpoint_every=30,
                       model_overrides=dict(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64),
                       data=f"jsonl:{folder}/pairs/train.jsonl", eval_data=f"beir:{folder}/pairs/validation")
  results = train.run(config)
  return folder, results


@pytest.mark.slow
def test_a_run_reports_the_recall_its_export_gives(docstring_run):
  folder, results = docstring_run
  export = results["export"]
  assert results["queries"] == len(pydocs.docstring_pairs("validation")) == results["documents"]
  assert results["recall@10"] > 0.2   # far above chance (10 / 193) after 30 steps
  assert serving_ops.problems(export) == []
  loaded = tf.saved_model.load(export)
  queries = [json.loads(line)["text"] for line in open(f"{folder}/pairs/validation/queries.jsonl")]
  corpus = [json.loads(line)["text"] for line in open(f"{folder}/pairs/validation/corpus.jsonl")]
  embed = lambda texts: loaded.signatures["embed"](text=tf.constant(texts))["embeddings"].numpy()  # noqa: E731
  query_vectors, corpus_vectors = embed(queries), embed(corpus)
  np.testing.assert_allclose(np.linalg.norm(query_vectors, axis=1), 1.0, atol=1e-5)
  recall, mrr = _plain_metrics(query_vectors, corpus_vectors, [(i,) for i in range(len(queries))], 10)
  assert results["recall@10"] == pytest.approx(recall, abs=1e-9)
  assert results["mrr@10"] == pytest.approx(mrr, abs=1e-6)
  assert abs(results["index_recall_gap@10"]) < 0.05
  served = loaded.signatures["serving_default"](text=tf.constant(queries[:3]))["embeddings"].numpy()
  np.testing.assert_allclose(served, query_vectors[:3], atol=1e-6)
  predicted = subprocess.run([sys.executable, "-m", "export.predict", "--saved-model", export, *queries[:2]],
                             cwd=ROOT, capture_output=True, text=True, timeout=300,
                             env=dict(os.environ, PYTHONPATH=ROOT))
  assert predicted.returncode == 0, predicted.stderr[-2000:]
  lines = [json.loads(line) for line in predicted.stdout.splitlines()]
  assert [line["text"] for line in lines] == queries[:2]
  np.testing.assert_allclose([line["embedding"] for line in lines], query_vectors[:2], atol=1e-6)


TWO_REPLICAS = """
import json, sys
import numpy as np
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from tests.tpu.tasks.losses import tiny_config
from tpu import train
from zoo.model_dir import ModelDir
from zoo.models.losses import ranking_loss
two = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
rng = np.random.default_rng(0)
queries, documents = rng.normal(size=(8, 6)).astype(np.float32), rng.normal(size=(8, 2, 6)).astype(np.float32)
losses = dict(reference=float(ranking_loss(queries, documents, symmetric=True)))
for gather in (True, False):
  def replica(context):
    part = slice(4 * context.replica_id_in_sync_group, 4 * context.replica_id_in_sync_group + 4)
    return queries[part], documents[part]
  values = two.experimental_distribute_values_from_function(replica)
  run = tf.function(lambda values: two.reduce("SUM", two.run(
      lambda q, d: ranking_loss(q, d, symmetric=True, denominator=8.0, across_replicas=gather), args=values),
      axis=None))
  losses[f"gathered={gather}"] = float(run(values))
for name, strategy in (("one", tf.distribute.OneDeviceStrategy("/cpu:0")), ("two", two)):
  config = tiny_config(sys.argv[1] + "/" + name, model="bert_small", task="embed", steps=4, batch_size=8,
                       seq_length=32, vocab_size=300, checkpoint_every=4, dropout=0.0, length_buckets="auto",
                       data="jsonl:" + sys.argv[2], symmetric_loss=True,
                       model_overrides=dict(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64))
  train.run(config, strategy=strategy)
  losses[name] = [record["loss"] for record in ModelDir(config.model_dir).read_history() if "loss" in record]
print(json.dumps(losses))
"""


@pytest.mark.slow
def test_two_replicas_score_every_replicas_documents_as_one_device(docstring_run, tmp_path):
  """With the negatives gathered, two replicas' loss is the loss of the global batch on one device, step
  after step (with length buckets: the gather runs outside the step's switch); without, each replica's
  queries see half the documents."""
  folder, _ = docstring_run
  env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
  result = subprocess.run([sys.executable, "-c", TWO_REPLICAS, str(tmp_path), f"{folder}/pairs/train.jsonl"],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  losses = json.loads(result.stdout.strip().splitlines()[-1])
  assert losses["gathered=True"] == pytest.approx(losses["reference"], abs=1e-5)
  assert losses["gathered=False"] < losses["reference"] - 0.1
  assert len(losses["one"]) == 4 and losses["one"][0] != losses["one"][-1]
  np.testing.assert_allclose(losses["two"], losses["one"], atol=1e-5)


def test_pooling_comes_from_the_init_checkpoint_unless_a_flag_names_one(tmp_path):
  from tpu.config import TrainConfig
  from tpu.config import apply_init_checkpoint
  from tpu.train import config_from_args
  from tpu.train import parser
  init = TrainConfig(model="bert_small", task="embed", pooling="cls", normalize=False)
  args = ["--task", "embed", "--data", "jsonl:x", "--model-dir", str(tmp_path), "--init-checkpoint", "x"]
  for flags, expected in (([], ("cls", False)), (["--pooling", "mean", "--normalize"], ("mean", True)),
                          (["--pooling", "max"], ("max", False))):
    config = apply_init_checkpoint(config_from_args(parser().parse_args(args + flags)), init)
    assert (config.pooling, config.normalize) == expected, flags
  fresh = config_from_args(parser().parse_args(args[:6])).replace(model="bert_small").validate()
  assert (fresh.pooling, fresh.normalize) == ("mean", True)
  assert fresh.recorded().to_dict()["pooling"] == "mean"

"""Pre-training data: packed TFRecord shards of real prose, dynamic core-op masking, the job reading them."""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from tests.tpu.data.source_checks import shard_word_ids
from tpu import data
from tpu import train
from tpu.config import TrainConfig
from tpu.data import pipeline
from tpu.data import pydocs
from tpu.data import records as pretraining_data
from tpu.data import shard_writer
from tpu.tasks import get_task
from zoo.text import TextEncoder
from zoo.text import build_vocab
from zoo.text import write_vocab

ROOT = str(pathlib.Path(__file__).resolve().parents[3])
T = 64
TINY = dict(hidden_size=32, num_heads=2, intermediate_size=64, num_layers=1)


def _documents():
  """Real prose: multi-paragraph documents of Python's docstrings, plus one 6,000-word one-line document."""
  docs = [text.split("\n") for _, text in pydocs.documents("validation")[:40]]
  words = " ".join(" ".join(doc) for doc in docs).split()
  docs.insert(7, [" ".join(words[i % len(words)] for i in range(6000))])
  return docs


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  folder = tmp_path_factory.mktemp("corpus")
  docs = _documents()
  half = len(docs) // 2
  for name, part in (("a.txt", docs[:half]), ("b.txt", docs[half:])):
    with open(folder / name, "w", encoding="utf-8") as file:
      file.write("\n\n".join("\n".join(doc) for doc in part) + "\n")
  vocab = build_vocab([str(folder / "a.txt"), str(folder / "b.txt")], 1000)
  write_vocab(vocab, str(folder / "wordpiece.vocab"))
  return folder, docs


def _write(corpus_folder, out, shards=4, **kwargs):
  return shard_writer.write_pretraining_data([str(corpus_folder / "*.txt")],
                                             str(corpus_folder / "wordpiece.vocab"), T, str(out), shards,
                                             progress=False, **kwargs)


@pytest.mark.slow
def test_shards_hold_every_token_in_document_order(corpus, tmp_path):
  folder, docs = corpus
  metadata = _write(folder, tmp_path / "out")
  encoder = TextEncoder(str(folder / "wordpiece.vocab"), seq_length=T)
  cls, sep, pad = encoder.cls_id, encoder.sep_id, encoder.pad_id
  # The independent reference: every document tokenized line by line, [SEP] between documents (none
  # at the start of an example), cut into bodies of T - 2; example k goes to shard k mod 4.
  stream, expected_total = [], 0
  lines = iter(encoder.tokenize(tf.constant([line for doc in docs for line in doc], tf.string)).to_list())
  for doc in docs:
    ids = [id_ for _ in doc for id_ in next(lines)]   # each line on its own, concatenated
    if stream and len(stream) % (T - 2):
      stream.append(sep)
    stream.extend(ids)
    expected_total += len(ids)
  bodies = [stream[start:start + T - 2] for start in range(0, len(stream), T - 2)]
  shards = [shard_word_ids(tmp_path / "out" / pretraining_data.shard_name(shard, 4, False), T)
            for shard in range(4)]
  assert [len(examples) for examples in shards] == [len(bodies[shard::4]) for shard in range(4)]
  for shard, examples in enumerate(shards):
    for number, ids in enumerate(examples):
      assert ids[0] == cls and len(ids) == T
      real = ids[ids != pad]
      assert real[-1] == sep
      assert real[1:-1].tolist() == bodies[shard + 4 * number]
  assert [shard["examples"] for shard in metadata["shards"]] == [len(examples) for examples in shards]
  assert metadata["tokens"] == expected_total   # every WordPiece token of the corpus is in an example
  assert metadata["full_examples"] >= 0.95 * metadata["examples"]
  assert metadata["documents"] == len(docs)
  assert metadata["special_ids"] == encoder.special_ids and metadata["seq_length"] == T
  assert max(shard["examples"] for shard in metadata["shards"]) - min(
      shard["examples"] for shard in metadata["shards"]) <= 1


@pytest.mark.parametrize("compress", [False, True])
def test_reruns_are_byte_identical_and_keep_complete_shards(corpus, tmp_path, compress, capsys):
  folder, _ = corpus
  _write(folder, tmp_path / "one", compress=compress)
  _write(folder, tmp_path / "two", compress=compress)
  names = sorted(os.listdir(tmp_path / "one"))
  assert names == sorted(os.listdir(tmp_path / "two"))
  assert sum(name.endswith(".tfrecord.gz" if compress else ".tfrecord") for name in names) == 4
  for name in names:
    assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes(), name

  # A finished output is kept as it is; a lost shard is written again, alone, and stale temporaries go.
  kept = tmp_path / "one" / pretraining_data.shard_name(0, 4, compress)
  os.utime(kept, (1, 1))
  capsys.readouterr()
  _write(folder, tmp_path / "one", compress=compress)
  assert "complete already" in capsys.readouterr().err and os.stat(kept).st_mtime == 1
  lost = tmp_path / "one" / pretraining_data.shard_name(2, 4, compress)
  lost.rename(tmp_path / "one" / f".{lost.name}.tmp-99")
  _write(folder, tmp_path / "one", compress=compress)
  assert "keeping 0 of 1 packed chunks and 3 of 4 shards" in capsys.readouterr().err
  assert os.stat(kept).st_mtime == 1
  assert sorted(os.listdir(tmp_path / "one")) == names, "stale temporaries or the work folder stay"
  for name in names:
    assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes(), name


def test_errors_name_the_file(corpus, tmp_path):
  folder, _ = corpus
  vocab = str(folder / "wordpiece.vocab")
  empty = tmp_path / "empty.txt"
  empty.write_text("\n\n  \n")
  with pytest.raises(pretraining_data.CorpusError, match=f"{empty}: the corpus holds no text"):
    shard_writer.write_pretraining_data([str(empty)], vocab, T, str(tmp_path / "o1"), 2, progress=False)
  bad = tmp_path / "bad.txt"
  bad.write_bytes(b"fine line\nsecond line\nbroken \xff\xfe here\n")
  with pytest.raises(pretraining_data.CorpusError, match=f"{bad}:3: not UTF-8"):
    shard_writer.write_pretraining_data([str(bad)], vocab, T, str(tmp_path / "o2"), 2, progress=False)
  assert not [name for name in os.listdir(tmp_path / "o2") if "tfrecord" in name]   # nothing half-written
  with pytest.raises(pretraining_data.CorpusError, match="nothing.*no file matches"):
    shard_writer.write_pretraining_data([str(tmp_path / "nothing*.txt")], vocab, T,
                                            str(tmp_path / "o3"), 1, progress=False)
  plain = tmp_path / "plain_vocab.txt"
  plain.write_text("the\nof\nand\n")
  with pytest.raises(pretraining_data.CorpusError, match=f"{plain}: .*lacks the special tokens"):
    shard_writer.write_pretraining_data([str(bad)], str(plain), T, str(tmp_path / "o4"), 1,
                                            progress=False)


def test_a_tfds_text_dataset(corpus, tmp_path):
  folder, _ = corpus
  with tfds.testing.mock_data(num_examples=12):
    metadata = shard_writer.write_pretraining_data(
        ["tfds:imdb_reviews"], str(folder / "wordpiece.vocab"), T, str(tmp_path / "out"), 2, text_key="text",
        progress=False)
    assert metadata["documents"] == 12 and metadata["examples"] >= 2
    with pytest.raises(pretraining_data.CorpusError, match="no feature 'body'"):
      shard_writer.write_pretraining_data(["tfds:imdb_reviews"], str(folder / "wordpiece.vocab"), T,
                                              str(tmp_path / "out2"), 2, text_key="body", progress=False)


@pytest.mark.slow
def test_a_prepared_tfds_dataset_is_one_chunk_per_file_shard(corpus, tmp_path):
  """A TFDS dataset as `download_and_prepare` leaves it (3 file shards): each shard a chunk, packed
  on its own, documents in the order the TFDS API reads each shard."""
  folder, docs = corpus
  texts = ["\n".join(doc) for doc in docs]
  builder = tfds.dataset_builders.TfDataBuilder(
      name="prose_corpus", config="default", version="1.0.0", data_dir=str(tmp_path / "tfds"),
      split_datasets={"train": tf.data.Dataset.from_tensor_slices({"text": texts})},
      features=tfds.features.FeaturesDict({"text": tfds.features.Text()}))
  builder.download_and_prepare(download_config=tfds.download.DownloadConfig(num_shards=3))
  vocab = str(folder / "wordpiece.vocab")
  metadata = shard_writer.write_pretraining_data(["tfds:prose_corpus"], vocab, T, str(tmp_path / "out"), 2,
                                                 data_dir=str(tmp_path / "tfds"), progress=False)
  assert metadata["chunks"] == 3 and metadata["documents"] == len(texts)

  encoder = TextEncoder(vocab, seq_length=T)
  bodies = []
  for shard in range(3):   # the reference: each file shard's documents, joined with [SEP], cut into T - 2
    stream = []
    part = tfds.load("prose_corpus", split=f"train[{shard}shard]", data_dir=str(tmp_path / "tfds"))
    for example in part.as_numpy_iterator():
      lines = [line for line in example["text"].decode("utf-8").splitlines() if line.strip()]
      if stream and len(stream) % (T - 2):
        stream.append(encoder.sep_id)
      stream.extend(encoder.tokenize(tf.constant(lines)).flat_values.numpy().tolist())
    bodies.extend(stream[start:start + T - 2] for start in range(0, len(stream), T - 2))
  for shard in range(2):
    written = shard_word_ids(tmp_path / "out" / pretraining_data.shard_name(shard, 2, False), T)
    assert [ids[ids != encoder.pad_id][1:-1].tolist() for ids in written] == bodies[shard::2]
  # On Beam (in-process DirectRunner: the shards are steps of its own), the same bytes.
  from tpu.data import beam_writer
  beam_writer.write_with_beam(["tfds:prose_corpus"], vocab, T, str(tmp_path / "beam"), 2,
                              runner="DirectRunner", data_dir=str(tmp_path / "tfds"))
  for name in sorted(os.listdir(tmp_path / "out")):
    assert (tmp_path / "beam" / name).read_bytes() == (tmp_path / "out" / name).read_bytes(), name


@pytest.mark.slow
def test_command_line(corpus, tmp_path):
  folder, _ = corpus
  command = [sys.executable, "-m", "tpu.pretraining_data", "--input", str(folder / "a.txt"),
             str(folder / "b.txt"), "--vocab", str(folder / "wordpiece.vocab"), "--seq-length", str(T),
             "--out", str(tmp_path / "out"),
             "--shards", "3"]
  result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=ROOT), timeout=300)
  assert result.returncode == 0, result.stderr
  summary = json.loads(result.stdout)
  written = sum(len(shard_word_ids(tmp_path / "out" / pretraining_data.shard_name(i, 3, False), T))
                for i in range(3))
  assert summary["seq_length"] == T and summary["examples"] == written
  assert "tokens/s" in result.stderr and "cuda" not in result.stderr.lower()


# ---------------------------------------------------------------------------------------------
# The training job's side.


@pytest.fixture(scope="module")
def records(corpus, tmp_path_factory):
  folder, _ = corpus
  out = tmp_path_factory.mktemp("records")
  _write(folder, out, shards=4)
  return out


def _config(model_dir, records_dir, **changes):
  values = dict(model="bert_small", model_overrides=TINY, task="mlm",
                data=f"tfrecord:{records_dir}/*.tfrecord",
                model_dir=str(model_dir), steps=3, batch_size=4, seq_length=T, export=False,
                checkpoint_every=3, learning_rate=1e-3, warmup_steps=0)
  values.update(changes)
  return TrainConfig(**values)


@pytest.mark.slow
def test_the_record_pipeline_holds_core_ops_only(records, tmp_path):
  source = data.load(f"tfrecord:{records}/*.tfrecord")
  config = _config(tmp_path, records, whole_word_masking=True).validate()
  encoder = TextEncoder(str(records / "vocab.txt"), seq_length=T)
  dataset = pipeline.train_dataset(source, get_task(config), encoder, 4, seed=1)
  graph = tf.compat.v1.GraphDef.FromString(dataset._as_serialized_graph().numpy())   # noqa: SLF001
  ops = {node.op for node in graph.node} | {node.op for function in graph.library.function
                                            for node in function.node_def}
  assert {"ParseExampleV2", "TFRecordDataset", "StatelessRandomUniformV2"} <= ops
  # Every op is registered by TensorFlow itself: checked in a process that never imports tensorflow_text.
  probe = ("import sys, tensorflow as tf\nfrom tensorflow.python.framework import op_def_registry\n"
           "missing = [op for op in sys.argv[1:] if op_def_registry.get(op) is None]\n"
           "assert 'tensorflow_text' not in sys.modules\nprint(','.join(missing))")
  result = subprocess.run([sys.executable, "-c", probe, *sorted(ops)], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  assert result.returncode == 0, result.stderr
  assert result.stdout.strip() == "", f"ops outside core TensorFlow: {result.stdout}"


@pytest.mark.slow
def test_masking_is_dynamic_and_seeded(records, tmp_path):
  source = data.load(f"tfrecord:{records}/*.tfrecord")
  config = _config(tmp_path, records).validate()
  encoder = TextEncoder(str(records / "vocab.txt"), seq_length=T)
  count = source.num_examples
  # Batches of one example, no shuffling: example k comes back after `count` batches, masked anew.
  first = list(pipeline.train_dataset(source, get_task(config), encoder, 1, shuffle_buffer=1, seed=3)
               .take(3 * count).as_numpy_iterator())
  again = list(pipeline.train_dataset(source, get_task(config), encoder, 1, shuffle_buffer=1, seed=3)
               .take(3 * count).as_numpy_iterator())
  for a, b in zip(first, again, strict=True):
    np.testing.assert_array_equal(a["masked_lm_positions"], b["masked_lm_positions"])
  by_example = {}
  for batch in first:
    original = batch["input_word_ids"].copy()
    positions = batch["masked_lm_positions"][0][batch["masked_lm_weights"][0] > 0]
    original[0, positions] = batch["masked_lm_ids"][0][batch["masked_lm_weights"][0] > 0]
    by_example.setdefault(original.tobytes(), []).append(tuple(positions))
  assert len(by_example) == count
  changed = sum(len(set(masks)) > 1 for masks in by_example.values())
  assert changed >= 0.9 * count, "each pass over the data masks other positions"


@pytest.mark.slow
def test_training_reads_records_and_refuses_a_mismatch(records, tmp_path):
  results = train.run(_config(tmp_path / "mlm", records, eval_data=f"tfrecord:{records}/*.tfrecord"))
  assert np.isfinite(results["mlm_loss"]) and 0 <= results["mlm_accuracy"] <= 1
  electra = train.run(_config(tmp_path / "electra", records, task="electra", whole_word_masking=True))
  assert electra == {}
  with pytest.raises(ValueError, match=f"holds examples of {T} ids, but --seq-length is 32"):
    train.run(_config(tmp_path / "short", records, seq_length=32))
  other = tmp_path / "other_vocab.txt"
  other.write_text((records / "vocab.txt").read_text() + "extra\n")
  with pytest.raises(ValueError, match=r"another vocabulary \(\d+ tokens.*than this run's \(\d+ tokens"):
    train.run(_config(tmp_path / "vocab", records, vocab=str(other)))


def test_online_text_is_concatenated_without_truncation(tmp_path):
  vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "alpha", "beta", "gamma", "##s"]
  encoder = TextEncoder(vocab, seq_length=16)
  long_line = " ".join(["alpha", "betas", "gamma"] * 2000)   # 8,000 WordPiece tokens on one line
  (tmp_path / "corpus.txt").write_text(f"{long_line}\ngamma alpha\n")
  source = data.load(f"text:{tmp_path}/corpus.txt")
  examples = list(pipeline.concatenated_text(source.dataset, encoder).as_numpy_iterator())
  body = [int(i) for example in examples for i in example["input_word_ids"][example["input_mask"] > 0][1:-1]]
  expected = encoder.tokenize(tf.constant([long_line])).flat_values.numpy().tolist() + [3, 7, 5]
  assert len(expected) == 8000 + 3 and body == expected
  assert all(example["input_mask"].sum() == 16 for example in examples[:-1])


FUNNEL_TOKENS = dict(pad="<pad>", unk="<unk>", cls="<cls>", sep="<sep>", mask="<mask>")
FUNNEL_TOKENIZER = dict(special_tokens=FUNNEL_TOKENS, cls_type_id=2, max_chars_per_word=100)


def _funnel_model_dir(corpus_folder, path):
  """A model directory as `zoo.convert hf-funnel` writes it: FunnelTokenizer's `<cls>`-style
  special tokens and [CLS] token type 2, with the corpus's vocabulary."""
  from zoo.model_dir import ModelDir
  tokens = (corpus_folder / "wordpiece.vocab").read_text(encoding="utf-8").split("\n")[:-1]
  renamed = {"[PAD]": "<pad>", "[UNK]": "<unk>", "[CLS]": "<cls>", "[SEP]": "<sep>", "[MASK]": "<mask>"}
  model_dir = ModelDir(str(path))
  model_dir.makedirs()
  model_dir.write_vocab([renamed.get(token, token) for token in tokens])
  model_dir.write_config(dict(model="funnel_b4_4_4", model_overrides={}, lower_case=True,
                              tokenizer=FUNNEL_TOKENIZER))
  return model_dir


@pytest.mark.slow
def test_a_converted_funnel_directory_gives_its_special_tokens_to_the_records_and_the_job(corpus, tmp_path):
  folder, _ = corpus
  model_dir = _funnel_model_dir(folder, tmp_path / "converted")
  metadata = shard_writer.write_pretraining_data([str(folder / "*.txt")], model_dir.path, T,
                                                     str(tmp_path / "records"), 2, progress=False)
  assert metadata["tokenizer"] == FUNNEL_TOKENIZER
  vocab = model_dir.read_vocab()
  ids = np.stack(shard_word_ids(tmp_path / "records" / "pretrain-00000-of-00002.tfrecord", T))
  assert (ids[:, 0] == vocab.index("<cls>")).all() and (ids[:-1, -1] == vocab.index("<sep>")).all()
  # The same corpus through BERT's names gives the same examples with the ids of "[CLS]" and "[SEP]".
  bert = _write(folder, tmp_path / "bert", shards=2)
  assert bert["tokens"] == metadata["tokens"] and bert["examples"] == metadata["examples"]
  with pytest.raises(pretraining_data.CorpusError, match="the checkpoint is uncased"):
    shard_writer.write_pretraining_data([str(folder / "*.txt")], model_dir.path, T, str(tmp_path / "c"),
                                            1, lower_case=False, progress=False)

  # The job takes the records' tokenizer settings; [CLS] gets token type 2 in its batches.
  config = _config(tmp_path / "run", tmp_path / "records", model="funnel_b4_4_4_decoder",
                   model_overrides=dict(hidden_size=32, num_heads=2, intermediate_size=64,
                                        block_sizes=[1, 1, 1], num_decoder_layers=1), steps=2)
  train.run(config)
  saved = TrainConfig.from_model_dir(str(tmp_path / "run"))
  assert saved.tokenizer["special_tokens"] == FUNNEL_TOKENS and saved.tokenizer["cls_type_id"] == 2
  encoder = TextEncoder(vocab, seq_length=T, **saved.text_encoder_args())
  batch = next(iter(pipeline.train_dataset(data.load(f"tfrecord:{tmp_path}/records/*.tfrecord"),
                                           get_task(saved), encoder, 4)))
  types = batch["input_type_ids"].numpy()
  assert types[:, 0].tolist() == [2] * 4 and types[:, 1:].max() == 0
  with pytest.raises(ValueError, match="other tokenizer settings: cls_type_id: 2 in the records, 0 here"):
    train.run(config.replace(model_dir=str(tmp_path / "zero"),
                             tokenizer=dict(FUNNEL_TOKENIZER, cls_type_id=0)))

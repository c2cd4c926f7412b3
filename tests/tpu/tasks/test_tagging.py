"""The tag task: BIO entity metrics against a hand-computed set, word/first-piece alignment,
tagged-word sources (CoNLL files, jsonl, tfds:conll2003 mock data) and their errors, the
exact loss over replicas, and a run that trains, evaluates and exports."""

import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from tpu import data
from tpu import tasks
from tpu import train
from tpu.config import TrainConfig
from tpu.data import DataError
from tpu.tasks import tagging
from zoo.model_dir import ModelDir
from zoo.text import TextEncoder

TINY_DECODER = dict(hidden_size=32, num_heads=2, intermediate_size=64, block_sizes=[1, 1, 1],
                    num_decoder_layers=1)
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "dog", "##s", "run", ".", "u", "s", "in",
         "paris"]


# ---------------------------------------------------------------------------------------------
# Metrics.

# Gold and predicted tags; the entities, worked out by hand, are in the comments.
GOLD = [["B-PER", "I-PER", "O", "B-LOC"],             # PER 0-2, LOC 3-4
        ["B-ORG", "I-ORG", "I-ORG", "O", "B-MISC"],   # ORG 0-3, MISC 4-5
        ["O", "O", "B-LOC", "I-LOC"],                 # LOC 2-4
        ["B-PER", "B-PER"],                           # PER 0-1, PER 1-2 (adjacent)
        ["O", "O"]]                                   # none
PREDICTED = [["B-PER", "O", "O", "B-LOC"],            # PER 0-1 (partial: wrong), LOC 3-4 (right)
             ["B-ORG", "I-ORG", "I-ORG", "O", "B-PER"],   # ORG 0-3 (right), PER 4-5 (type mismatch)
             ["I-LOC", "I-LOC", "O", "B-LOC"],        # IOB1: LOC 0-2 and LOC 3-4 (both wrong)
             ["B-PER", "I-PER"],                      # PER 0-2 (wrong: the gold has two)
             ["B-MISC", "O"]]                         # MISC 0-1 (spurious)


def test_entity_metrics_on_a_hand_computed_set():
  # 7 gold entities, 8 predicted, 2 right; 9 of 17 tags equal.
  results = tagging.entity_metrics(GOLD, PREDICTED)
  assert results["entities"] == 7
  np.testing.assert_allclose(results["precision"], 2 / 8, rtol=1e-12)
  np.testing.assert_allclose(results["recall"], 2 / 7, rtol=1e-12)
  np.testing.assert_allclose(results["f1"], 4 / 15, rtol=1e-12)
  np.testing.assert_allclose(results["token_accuracy"], 9 / 17, rtol=1e-12)
  perfect = tagging.entity_metrics(GOLD, GOLD)
  assert (perfect["precision"], perfect["recall"], perfect["f1"], perfect["token_accuracy"]) == (1, 1, 1, 1)


def test_spans_follow_conlleval():
  assert tagging.spans(["I-PER", "I-PER", "B-PER", "I-LOC", "O", "I-LOC"]) == [
      ("PER", 0, 2), ("PER", 2, 3), ("LOC", 3, 4), ("LOC", 5, 6)]
  assert tagging.spans(["B-PER", "I-ORG", "I-ORG"]) == [("PER", 0, 1), ("ORG", 1, 3)]
  assert tagging.spans(["X", "B-A-B", "I-A-B"]) == [("A-B", 1, 3)]   # a non-BIO tag is outside
  with pytest.raises(ValueError, match="sentence 0: 2 gold tags but 1 predicted"):
    tagging.entity_metrics([["O", "O"]], [["O"]])


def test_sentences_of_reads_missing_predictions_as_outside():
  names = ["B-PER", "I-PER", "O"]
  gold, predicted = tagging.sentences_of([[0, 1, 2, -1]], [[0, -1, 2, 1]], names)
  assert gold == [["B-PER", "I-PER", "O"]] and predicted == [["B-PER", "O", "O"]]


def test_each_word_is_labelled_on_its_first_piece():
  encoder = TextEncoder(VOCAB, seq_length=8)
  words = tf.ragged.constant([["The", "dogs", "run", "U.S."], ["dog", "", "paris"]])
  features = tagging.encode_words(encoder, words, 6)
  # [CLS] the dog ##s run u . [SEP] : "U.S." splits into u . s . and is cut after its first piece.
  assert features["input_word_ids"].numpy().tolist()[0] == [2, 5, 6, 7, 8, 10, 9, 3]
  assert features["word_positions"].numpy().tolist() == [[1, 2, 4, 5, 0, 0], [1, 0, 2, 0, 0, 0]]
  longer = tagging.encode_words(encoder, tf.ragged.constant([["the"] * 9]), 4)
  assert longer["word_positions"].numpy().tolist() == [[1, 2, 3, 4]]


# ---------------------------------------------------------------------------------------------
# Sources.

CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER
"""


def _write(tmp_path, name, content):
  path = tmp_path / name
  path.write_text(content, encoding="utf-8")
  return str(path)


def _examples(source):
  return [{key: value.numpy() for key, value in example.items()} for example in source.dataset]


def test_conll_and_jsonl_sources(tmp_path):
  source = data.load(f"conll:{_write(tmp_path, 'train.conll', CONLL)}")
  assert source.data_type == "tagging" and source.num_examples == 2
  assert source.label_names == ["B-MISC", "B-ORG", "B-PER", "I-PER", "O"]
  examples = _examples(source)
  assert examples[0]["words"].tolist() == [b"EU", b"rejects", b"German"]
  assert examples[0]["tags"].tolist() == [1, 4, 0] and examples[1]["text_a"] == b"Peter Blackburn"
  batch = next(iter(source.dataset.batch(2)))   # sentences of different lengths batch as ragged
  assert batch["words"].row_lengths().numpy().tolist() == [3, 2]
  lines = [json.dumps(dict(words=["Paris", "!"], tags=["B-LOC", "O"]))]
  jsonl = data.load(f"jsonl:{_write(tmp_path, 'a.jsonl', chr(10).join(lines))}", data_type="tagging",
                    label_names=["B-LOC", "O"])
  assert [e["tags"].tolist() for e in _examples(jsonl)] == [[0, 1]]


@pytest.mark.parametrize("name, content, kwargs, line, message", [
    ("a.conll", "EU B-ORG\nrejects\n", {}, 2,
     r"expected a word and its tag \(the last column\), found 'rejects'"),
    ("a.conll", "EU B-ORG\n\nParis B-LOC\n", dict(label_names=["B-ORG", "O"]), 3,
     r"unknown tag 'B-LOC'; the tags are \['B-ORG', 'O'\]"),
    ("a.conll", "\n-DOCSTART- O\n", {}, 1, "no sentences"),
    ("a.jsonl", '{"words": ["a", "b"], "tags": ["O", "O"]}\n{"words": ["a", "b"], "tags": ["O"]}\n',
     dict(data_type="tagging"), 2, "2 words but 1 tags"),
    ("a.jsonl", '{"words": ["a"], "tags": ["O"]}\n\n{"words": ["a"], "labels": ["O"]}\n',
     dict(data_type="tagging"), 3, "no key 'tags'"),
    ("a.jsonl", '{"words": "a b", "tags": ["O"]}\n', dict(data_type="tagging"), 1,
     "'words' must be a list of strings"),
])
def test_malformed_tagging_files_name_file_and_line(tmp_path, name, content, kwargs, line, message):
  path = _write(tmp_path, name, content)
  scheme = "conll" if name.endswith(".conll") else "jsonl"
  with pytest.raises(DataError, match="^" + re.escape(f"{path}:{line}: ") + message):
    data.load(f"{scheme}:{path}", **kwargs)


def test_tfds_conll2003_with_mock_data():
  with tfds.testing.mock_data(num_examples=5):
    source = data.load("tfds:conll2003", "validation")
    examples = _examples(source)
  assert source.data_type == "tagging" and source.label_names[:3] == ["O", "B-PER", "I-PER"]
  assert len(examples) == 5
  assert all(len(e["words"]) == len(e["tags"]) and e["tags"].max(initial=0) < 9 for e in examples)


# ---------------------------------------------------------------------------------------------
# Loss and a run.


def _tag_config(model_dir, **changes):
  values = dict(model="funnel_b4_4_4_decoder", model_overrides=TINY_DECODER, task="tag",
                model_dir=str(model_dir), steps=4, batch_size=4, eval_batch_size=8, seq_length=16,
                vocab_size=120, checkpoint_every=2, export=False, learning_rate=1e-3, warmup_steps=1,
                num_classes=3, label_names=["B-X", "I-X", "O"])
  values.update(changes)
  return TrainConfig(**values)


def test_tag_loss_is_exact_over_replicas(tmp_path):
  rng = np.random.default_rng(3)
  batch, length, words, classes = 6, 8, 5, 3
  positions = rng.integers(0, length, [batch, words]).astype(np.int32)
  labels = rng.integers(-1, classes, [batch, words]).astype(np.int32)
  logits = rng.normal(size=[batch, length, classes]).astype(np.float32)
  weights = ((positions > 0) & (labels >= 0)).astype(np.float32)
  features = dict(word_positions=positions, word_labels=labels, word_weights=weights)
  word_logits = np.take_along_axis(logits, positions[..., None], 1)
  shifted = word_logits - word_logits.max(-1, keepdims=True)
  log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
  losses = -np.take_along_axis(log_probs, np.maximum(labels, 0)[..., None], -1)[..., 0]
  expected = (losses * weights).sum() / weights.sum()
  task = tasks.get_task(_tag_config(tmp_path, data="demo").validate())
  halves = [(slice(0, 2)), slice(2, None)]
  total = sum(float(task.denominators({k: v[part] for k, v in features.items()})["words"]) for part in halves)
  shares = sum(float(task.loss_and_stats({k: v[part] for k, v in features.items()}, logits[part],
                                         dict(words=total))[0]) for part in halves)
  np.testing.assert_allclose(shares, expected, rtol=1e-5)


def _tagged_corpus(tmp_path, count=24):
  rng = np.random.default_rng(0)
  names = ["paris", "london", "rome"]
  lines = []
  for i in range(count):
    words, tags = [], []
    for _ in range(int(rng.integers(2, 7))):
      if rng.random() < 0.3:
        words += [str(rng.choice(names)).capitalize(), "city"]
        tags += ["B-LOC", "I-LOC"]
      else:
        words.append(str(rng.choice(["the", "a", "visit", "we", "saw", f"w{i % 5}", "U.S."])))
        tags.append("O")
    lines.append("\n".join(f"{w} {t}" for w, t in zip(words, tags, strict=True)))
  return _write(tmp_path, "tags.conll", "\n\n".join(lines) + "\n")


@pytest.mark.slow
def test_tag_run_trains_evaluates_and_exports(tmp_path):
  corpus = _tagged_corpus(tmp_path)
  config = _tag_config(tmp_path / "run", data=f"conll:{corpus}", eval_data=f"conll:{corpus}", export=True,
                       steps=6, steps_per_execution=2, num_classes=None, label_names=None)
  results = train.run(config)
  expected = {"loss", "precision", "recall", "f1", "token_accuracy", "entities", "examples", "export"}
  assert expected <= set(results)
  assert results["examples"] == 24 and 0 <= results["f1"] <= 1 and np.isfinite(results["loss"])
  saved = TrainConfig.from_model_dir(str(tmp_path / "run"))
  assert saved.label_names == ["B-LOC", "I-LOC", "O"] and saved.num_classes == 3

  # The export: raw text in, the encoder's words with one tag each, as the Keras model predicts them.
  loaded = tf.saved_model.load(results["export"])
  serve = loaded.signatures["serving_default"]
  assert sorted(serve.structured_input_signature[1]) == ["text"]
  outputs = serve(text=tf.constant(["We saw Paris city!", "", "rome " * 30]))
  assert outputs["num_words"].numpy().tolist() == [5, 0, 14]   # 16 - [CLS] - [SEP]
  assert outputs["words"].numpy()[0].tolist() == [b"we", b"saw", b"paris", b"city", b"!"] + [b""] * 9
  from tpu.serving import restore_model
  from zoo.model_dir import ModelDir
  model = restore_model(saved, ModelDir(str(tmp_path / "run")).latest_checkpoint())
  encoder = TextEncoder(ModelDir(str(tmp_path / "run")).read_vocab(), seq_length=16)
  features = tagging.encode_words(encoder, tf.ragged.constant([["we", "saw", "paris", "city", "!"]]), 5)
  probabilities = tf.nn.softmax(model({k: features[k] for k in model.input}, training=False)).numpy()
  expected = probabilities[0, features["word_positions"].numpy()[0]]   # [5, C]
  np.testing.assert_allclose(outputs["tag_probabilities"].numpy()[0, :5], expected.max(-1), atol=1e-5)
  assert outputs["tag_ids"].numpy()[0, :5].tolist() == expected.argmax(-1).tolist()
  names = np.array(saved.label_names)
  assert outputs["tags"].numpy()[0, :5].astype(str).tolist() == names[expected.argmax(-1)].tolist()
  tokens = loaded.signatures["from_token_ids"](**{k: features[k] for k in model.input})
  np.testing.assert_allclose(tokens["probabilities"].numpy(), probabilities, atol=1e-5)

  from export import predict
  result = predict.load(os.path.dirname(results["export"])).predict(["We saw Paris city!"])[0]
  assert result["text"] == "We saw Paris city!" and result["words"] == ["we", "saw", "paris", "city", "!"]
  assert len(result["tags"]) == len(result["probabilities"]) == 5 and set(result["tags"]) <= set(names)

  from export import serving_ops
  assert serving_ops.problems(results["export"]) == []


@pytest.mark.slow
def test_tag_on_tfds_conll2003_mock_data_resumes_under_xla_and_bfloat16(tmp_path):
  with tfds.testing.mock_data(num_examples=12):
    config = _tag_config(tmp_path / "run", data="tfds:conll2003", steps=2, num_classes=None, label_names=None)
    first = train.run(config)
    second = train.run(config.replace(steps=4, jit_compile=True, mixed_precision="bfloat16"))
  assert first["examples"] == second["examples"] == 12 and np.isfinite(second["loss"])
  records = ModelDir(str(tmp_path / "run")).read_history()
  assert [record["step"] for record in records if "learning_rate" in record] == [1, 2, 3, 4]   # resumed at 2
  assert TrainConfig.from_model_dir(str(tmp_path / "run")).num_classes == 9

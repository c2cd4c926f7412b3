"""The tag task: entity metrics against a hand-computed set and against seqeval in every tag
scheme, sentence windows against a Python reference, tagged-word sources (CoNLL files, jsonl,
tfds:conll2003 mock data) and their errors, the exact loss over replicas, and a run on
sentences longer than the sequence that trains, scores every gold entity as seqeval does,
and exports."""

import itertools
import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds
from seqeval import metrics as seqeval_metrics
from seqeval import scheme as seqeval_scheme

from tests.tpu.data.source_checks import source_examples as _examples
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
  with pytest.raises(ValueError, match="unknown tag scheme 'bio'"):
    tagging.spans(["O"], scheme="bio")


SEQEVAL_SCHEMES = {"iobes": seqeval_scheme.IOBES, "bilou": seqeval_scheme.BILOU}


def _random_sentences(scheme, count, seed):
  """Random tag sequences of a scheme's prefixes, ill-formed ones included (as a model predicts)."""
  rng = np.random.default_rng(seed)
  prefixes = data.tagged.TAG_SCHEMES[scheme]
  tags = ["O"] + [f"{prefix}-{kind}" for prefix in prefixes for kind in ("PER", "LOC")]
  return [[str(rng.choice(tags)) for _ in range(int(rng.integers(1, 12)))] for _ in range(count)]


@pytest.mark.parametrize("scheme", ["iob1", "iob2", "iobes", "bilou"])
def test_entity_scores_equal_seqeval(scheme):
  """seqeval's default mode for IOB1/IOB2, strict mode with the scheme for IOBES/BILOU."""
  kwargs = dict(mode="strict", scheme=SEQEVAL_SCHEMES[scheme]) if scheme in SEQEVAL_SCHEMES else {}
  for seed in range(20):
    gold = _random_sentences(scheme, 30, seed)
    noise = np.random.default_rng(seed + 100)
    other = _random_sentences(scheme, 30, seed + 200)
    predicted = [[g if noise.random() < 0.7 else o for g, o in zip(sentence, itertools.cycle(alternative))]
                 for sentence, alternative in zip(gold, other, strict=True)]
    ours = tagging.entity_metrics(gold, predicted, scheme)
    for name in ("precision", "recall", "f1"):
      expected = getattr(seqeval_metrics, f"{name}_score")(gold, predicted, zero_division=0, **kwargs)
      assert ours[name] == pytest.approx(expected, abs=1e-12), (scheme, seed, name)
    for tags in gold + predicted:   # the entities themselves, sentence by sentence
      if scheme in SEQEVAL_SCHEMES:
        entities = seqeval_scheme.Tokens(tags, SEQEVAL_SCHEMES[scheme]).entities
        expected = [(entity.tag, entity.start, entity.end) for entity in entities]
      else:
        found = seqeval_metrics.sequence_labeling.get_entities(tags)
        expected = [(kind, start, end + 1) for kind, start, end in found]
      assert sorted(tagging.spans(tags, scheme)) == sorted(expected), (scheme, tags)


def test_schemes_are_detected_and_unknown_prefixes_refused():
  detect = data.tagged.detect_scheme
  assert detect([["B-PER", "I-PER", "O", "B-LOC"]]) == "iob2"
  assert detect([["I-PER", "I-PER", "B-PER", "O", "I-LOC"]]) == "iob1"
  assert detect([["B-PER", "E-PER", "S-LOC"]]) == "iobes"
  assert detect([["U-PER", "B-LOC", "L-LOC"]]) == "bilou"
  with pytest.raises(ValueError, match="mix IOBES's E-/S- and BILOU's L-/U- prefixes"):
    detect([["S-PER", "U-LOC"]])
  with pytest.raises(ValueError, match="tag 'M-PER' has an unknown prefix"):
    detect([["M-PER"]])


def test_sentence_predictions_take_each_word_from_its_max_context_window():
  windows = dict(example=np.array([0, 0, 1]), word_index=np.array([[0, 1, -1], [1, 2, -1], [0, -1, -1]]),
                 word_predictions=np.array([[5, 6, -1], [7, 8, -1], [9, -1, -1]]),
                 max_context=np.array([[True, False, False], [True, True, False], [True, False, False]]))
  predicted = tagging.sentence_predictions(windows, [4, 1])
  assert [p.tolist() for p in predicted] == [[5, 7, 8, -1], [9]]   # word 3 had no piece: no prediction


def _reference_windows(piece_counts, slots, stride):
  """Python reference: per window of one sentence, [(word, position, max context)]."""
  firsts = list(itertools.accumulate([0] + piece_counts))[:len(piece_counts)]
  length = sum(piece_counts)
  count = 1 if length <= slots else -(-(length - slots) // stride) + 1
  windows = []
  for k in range(count):
    start = k * stride
    used = min(slots, length - start)
    held = [(w, first - start + 1) for w, first in enumerate(firsts)
            if piece_counts[w] and start <= first < start + used]
    windows.append((used, held))
  best = {}
  for k, (used, held) in enumerate(windows):
    for w, position in held:
      score = min(position - 1, used - position) + 0.01 * used
      if w not in best or score > best[w][0]:
        best[w] = (score, k)
  return [[(w, position, best[w][1] == k) for w, position in held] for k, (_, held) in enumerate(windows)]


def test_windows_match_a_python_reference():
  encoder = TextEncoder(VOCAB, seq_length=8)
  rng = np.random.default_rng(0)
  vocabulary = ["The", "dogs", "run", "U.S.", "paris", "in", "", "dog"]
  sentences = [[str(w) for w in rng.choice(vocabulary, size=int(rng.integers(0, 14)))] for _ in range(12)]
  features = tagging.word_windows(encoder, tf.ragged.constant(sentences, dtype=tf.string), stride=3)
  pieces = {word: len(encoder.tokenize(tf.constant([word])).flat_values) for word in vocabulary}
  got = {}
  columns = [features[key].numpy() for key in ("word_index", "word_positions", "max_context")]
  for k, sentence in enumerate(features["example"].numpy()):
    held = [(int(w), int(p), bool(m)) for w, p, m in zip(*(column[k] for column in columns), strict=True)
            if w >= 0]
    got.setdefault(int(sentence), []).append(held)
  for index, sentence in enumerate(sentences):
    assert got[index] == _reference_windows([pieces[w] for w in sentence], 6, 3), sentence
  # Each window is [CLS] its pieces [SEP]: "U.S." is u . s . and a word's first piece holds its position.
  first = tagging.word_windows(encoder, tf.ragged.constant([["The", "dogs", "U.S."]]), stride=3)
  assert first["input_word_ids"].numpy().tolist()[0] == [2, 5, 6, 7, 10, 9, 11, 3]
  assert first["word_positions"].numpy().tolist()[0] == [1, 2, 4, 0, 0, 0]
  with pytest.raises(ValueError, match=r"stride must be in \[1, 6\]"):
    tagging.word_windows(encoder, tf.ragged.constant([["the"]]), stride=7)


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
    ("a.conll", "EU B-ORG\nParis M-LOC\n", {}, 2, r"tag 'M-LOC' has an unknown prefix: tags are O or B-, I-"),
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


def _tagged_corpus(tmp_path, count=24, longest=7, name="tags.conll"):
  rng = np.random.default_rng(0)
  names = ["paris", "london", "rome"]
  lines = []
  for i in range(count):
    words, tags = [], []
    for _ in range(int(rng.integers(2, longest))):
      if rng.random() < 0.3:
        words += [str(rng.choice(names)).capitalize(), "city"]
        tags += ["B-LOC", "I-LOC"]
      else:
        words.append(str(rng.choice(["the", "a", "visit", "we", "saw", f"w{i % 5}", "U.S."])))
        tags.append("O")
    lines.append("\n".join(f"{w} {t}" for w, t in zip(words, tags, strict=True)))
  return _write(tmp_path, name, "\n\n".join(lines) + "\n")


@pytest.mark.slow
def test_tag_run_on_long_sentences_scores_every_gold_entity_and_exports(tmp_path):
  corpus = _tagged_corpus(tmp_path)
  # Sentences of up to 38 words (U.S. alone is four pieces) against windows of 14 pieces.
  long_corpus = _tagged_corpus(tmp_path, count=10, longest=30, name="long.conll")
  config = _tag_config(tmp_path / "run", data=f"conll:{corpus}", eval_data=f"conll:{long_corpus}",
                       export=True, steps=6, steps_per_execution=2, num_classes=None, label_names=None,
                       tag_stride=5)
  results = train.run(config)
  assert {"loss", "precision", "recall", "f1", "token_accuracy", "entities", "examples", "windows",
          "export"} <= set(results)
  assert results["examples"] == 10 and results["windows"] > 20 and np.isfinite(results["loss"])
  saved = TrainConfig.from_model_dir(str(tmp_path / "run"))
  assert saved.label_names == ["B-LOC", "I-LOC", "O"] and saved.num_classes == 3
  assert (saved.tag_scheme, saved.tag_stride) == ("iob2", 5)

  # Every word of every sentence was predicted, and the run's scores are seqeval's over all gold entities.
  gold = [[tag for _, tag in sentence] for _, _, sentence in data.tagged.parse_conll(long_corpus)]
  with open(ModelDir(str(tmp_path / "run")).eval_predictions_path) as file:
    predictions = json.load(file)
  predicted = [predictions[str(index)] for index in range(len(gold))]
  assert [len(p) for p in predicted] == [len(g) for g in gold] and max(len(g) for g in gold) > 30
  assert results["entities"] == sum(tag.startswith("B-") for sentence in gold for tag in sentence)
  for name in ("precision", "recall", "f1"):
    assert results[name] == pytest.approx(getattr(seqeval_metrics, f"{name}_score")(gold, predicted,
                                                                                     zero_division=0))

  # The export: every word of the raw text as it is written, its characters and its tag, from the
  # same windows and max-context choice as the evaluation.
  loaded = tf.saved_model.load(results["export"])
  serve = loaded.signatures["serving_default"]
  assert sorted(serve.structured_input_signature[1]) == ["text"]
  text = "We saw Paris city! À Rome " + "rome " * 30
  outputs = serve(text=tf.constant(["We saw Paris city!", "", text]))
  assert outputs["num_words"].numpy().tolist() == [5, 0, 37]
  words = [w.decode() for w in outputs["words"].numpy()[2, :37]]
  starts, ends = outputs["starts"].numpy()[2, :37], outputs["ends"].numpy()[2, :37]
  assert words[:7] == ["We", "saw", "Paris", "city", "!", "À", "Rome"]
  assert [text[a:b] for a, b in zip(starts, ends, strict=True)] == words
  assert outputs["words"].numpy()[0].tolist()[5:] == [b""] * 32 and outputs["starts"].numpy()[0, 5] == -1
  names = np.array(saved.label_names)
  from tpu.serving import restore_model
  model = restore_model(saved, ModelDir(str(tmp_path / "run")).latest_checkpoint())
  encoder = TextEncoder(ModelDir(str(tmp_path / "run")).read_vocab(), seq_length=16)
  split = encoder.split_words(tf.constant([text]))
  windows = tagging.word_windows(encoder, split, stride=5)
  probabilities = tf.nn.softmax(model({k: windows[k] for k in model.input}, training=False)).numpy()
  by_word = {}
  word_index, positions = windows["word_index"].numpy(), windows["word_positions"].numpy()
  for k in range(len(windows["example"])):
    for slot in np.nonzero(windows["max_context"].numpy()[k])[0]:
      by_word[int(word_index[k, slot])] = probabilities[k, positions[k, slot]]
  expected = np.stack([by_word[w] for w in range(37)])
  np.testing.assert_allclose(outputs["tag_probabilities"].numpy()[2, :37], expected.max(-1), atol=1e-5)
  assert outputs["tags"].numpy()[2, :37].astype(str).tolist() == names[expected.argmax(-1)].tolist()

  from export import predict
  result = predict.load(os.path.dirname(results["export"])).predict(["We saw Paris city!"])[0]
  assert result["text"] == "We saw Paris city!" and result["words"] == ["We", "saw", "Paris", "city", "!"]
  assert result["starts"] == [0, 3, 7, 13, 17] and result["ends"] == [2, 6, 12, 17, 18]
  assert len(result["tags"]) == len(result["probabilities"]) == 5 and set(result["tags"]) <= set(names)

  from export import serving_ops
  assert serving_ops.problems(results["export"]) == []


@pytest.mark.slow
def test_tag_on_tfds_conll2003_mock_data(tmp_path):
  """TFDS's CoNLL-2003 trains and evaluates (the job's resume under XLA and bfloat16 is checked once,
  for every task, by the classify and squad runs)."""
  with tfds.testing.mock_data(num_examples=12):
    config = _tag_config(tmp_path / "run", data="tfds:conll2003", steps=2, num_classes=None, label_names=None)
    results = train.run(config)
  assert results["examples"] == 12 and np.isfinite(results["loss"])
  saved = TrainConfig.from_model_dir(str(tmp_path / "run"))
  assert (saved.num_classes, saved.tag_scheme) == (9, "iob2")

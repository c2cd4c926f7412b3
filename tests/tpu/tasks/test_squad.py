"""The squad task: windows against Model Garden's SQuAD feature writer (BERT's `run_squad.py`
logic) on real prose, span decoding against a brute-force search, EM/F1 against the official
SQuAD v1.1 and v2.0 evaluation scripts on a hand-made set, the exact loss over replicas, and
runs that train, evaluate and export, answered in a fresh process."""

import json
import os
import pathlib
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds
from official.nlp.data import squad_lib
from official.nlp.tools import squad_evaluate_v1_1
from official.nlp.tools import squad_evaluate_v2_0
from official.nlp.tools import tokenization

from tests.zoo.text.test_reference import stdlib_prose
from tpu import tasks
from tpu import train
from tpu.config import TrainConfig
from tpu.tasks import squad
from zoo.text import TextEncoder

TINY = dict(hidden_size=32, num_heads=2, intermediate_size=64, num_layers=1)
TINY_DECODER = dict(hidden_size=32, num_heads=2, intermediate_size=64, block_sizes=[1, 1, 1],
                    num_decoder_layers=1)


def squad_json(count, seed=0, impossible=0.0, lines_per_context=(2, 8)):
  """A SQuAD v2.0-style file's content from the standard library's docstrings: each context is
  consecutive lines of prose, each answer a run of its whitespace-separated words."""
  rng = random.Random(seed)
  prose = stdlib_prose()
  articles = []
  for index in range(count):
    start = rng.randrange(len(prose) - 10)
    context = " ".join(prose[start:start + rng.randint(*lines_per_context)])
    words = context.split(" ")
    first = rng.choice([index for index, word in enumerate(words) if word])   # "" between double spaces
    last = min(len(words), first + rng.randint(1, 4))
    while not words[last - 1]:
      last -= 1
    answer = " ".join(words[first:last])
    answer_start = len(" ".join(words[:first])) + (1 if first else 0)
    assert context[answer_start:answer_start + len(answer)] == answer
    unanswerable = rng.random() < impossible
    question = f"What follows {words[first - 1] if first else 'the start'} in {words[-1]}?"
    qa = dict(id=f"q{index}", question=question, is_impossible=unanswerable,
              answers=[] if unanswerable else [dict(text=answer, answer_start=answer_start)])
    articles.append(dict(title=f"a{index}", paragraphs=[dict(context=context, qas=[qa])]))
  return dict(version="v2.0", data=articles)


def _write_json(path, content):
  with open(path, "w", encoding="utf-8") as file:
    json.dump(content, file, ensure_ascii=False)
  return str(path)


@pytest.fixture(scope="module")
def lowercase_vocab(prose_vocab):
  """The prose vocabulary, lower-cased. Learning it takes about 13 CPU-s, so the tests that read it
  are marked slow: `make test-fast` keeps the metrics and span tests, which need no vocabulary."""
  return prose_vocab(True)


# ---------------------------------------------------------------------------------------------
# Windows.

@pytest.mark.slow
def test_windows_match_model_gardens_squad_features(tmp_path, lowercase_vocab):
  """Ids, types, mask, answer positions and maximum context of every window, against
  `official.nlp.data.squad_lib.convert_examples_to_features` with BERT's reference tokenizer."""
  content = squad_json(150, seed=1, impossible=0.2, lines_per_context=(1, 12))
  path = _write_json(tmp_path / "train.json", content)
  length, stride, query = 64, 24, 10
  examples = squad_lib.read_squad_examples(path, is_training=True, version_2_with_negative=True)
  assert len(examples) == 150
  expected = []
  reference = tokenization.FullTokenizer(lowercase_vocab, do_lower_case=True)
  squad_lib.convert_examples_to_features(examples, reference, length, stride, query, is_training=True,
                                         output_fn=expected.append)
  qas = [(paragraph["context"], qa) for article in content["data"] for paragraph in article["paragraphs"]
         for qa in paragraph["qas"]]
  answers = [qa["answers"][0]["text"] if qa["answers"] else "" for _, qa in qas]
  starts = [qa["answers"][0]["answer_start"] if qa["answers"] else -1 for _, qa in qas]
  questions = tf.constant([qa["question"] for _, qa in qas])
  contexts = tf.constant([context for context, _ in qas])
  encoder = TextEncoder(lowercase_vocab, seq_length=length)
  ours = squad.windows(encoder, questions, contexts, max_query_length=query, doc_stride=stride,
                       answers=tf.constant(answers), answer_starts=tf.constant(starts))
  ours = {key: value.numpy() for key, value in ours.items()}
  assert len(expected) == len(ours["example"]) > 200   # many contexts take several windows
  for index, feature in enumerate(expected):
    assert ours["example"][index] == feature.example_index
    assert ours["input_word_ids"][index].tolist() == feature.input_ids
    assert ours["input_mask"][index].tolist() == feature.input_mask
    assert ours["input_type_ids"][index].tolist() == feature.segment_ids
    assert (ours["start_positions"][index], ours["end_positions"][index]) == (
        feature.start_position, feature.end_position), index
    max_context = [position for position, best in feature.token_is_max_context.items() if best]
    assert np.flatnonzero(ours["max_context"][index]).tolist() == sorted(max_context)
    assert sorted(feature.token_to_orig_map) == np.flatnonzero(ours["token_starts"][index] >= 0).tolist()
  assert sum(feature.start_position > 0 for feature in expected) > 50


@pytest.mark.slow
def test_answer_positions_map_back_to_the_answer_text(lowercase_vocab):
  """Characters -> tokens -> bytes: the span of the answer tokens is the answer, accents and all."""
  encoder = TextEncoder(lowercase_vocab, seq_length=32)
  context = "Le café où Zoë a bu: « naïve » façade (1990), près de Saint-Étienne."
  answers = ["café", "Zoë", "naïve", "1990", "Saint-Étienne", "bu"]
  count = len(answers)
  features = squad.windows(encoder, tf.constant(["où?"] * count), tf.constant([context] * count),
                           max_query_length=8, doc_stride=8, answers=tf.constant(answers),
                           answer_starts=tf.constant([context.index(answer) for answer in answers]))
  raw = context.encode()
  found = {}
  for window in range(len(features["example"])):
    start, end = int(features["start_positions"][window]), int(features["end_positions"][window])
    if start:
      text = raw[features["token_starts"][window, start]:features["token_ends"][window, end]].decode()
      found.setdefault(int(features["example"][window]), set()).add(text)
  assert found == {index: {answer} for index, answer in enumerate(answers)}


# ---------------------------------------------------------------------------------------------
# Decoding.

def test_window_spans_are_the_best_valid_spans():
  rng = np.random.default_rng(0)
  windows, length, longest = 12, 10, 3
  start_logits, end_logits = rng.normal(size=[2, windows, length]).astype(np.float32)
  token_starts = np.where(rng.random([windows, length]) < 0.7, rng.integers(0, 50, [windows, length]), -1)
  token_starts[-1] = -1   # a window without context
  max_context = ((token_starts >= 0) & (rng.random([windows, length]) < 0.7)).astype(np.int32)
  score, start, end, null = (value.numpy() for value in squad.window_spans(
      start_logits, end_logits, token_starts, max_context, longest))
  for window in range(windows):
    pairs = [(start_logits[window, i] + end_logits[window, j], i, j) for i in range(length)
             for j in range(i, min(length, i + longest))
             if max_context[window, i] and token_starts[window, j] >= 0]
    if pairs:
      best = max(pairs, key=lambda pair: pair[0])
      assert (start[window], end[window]) == best[1:] and score[window] == pytest.approx(best[0])
    else:
      assert score[window] == -np.inf
    assert null[window] == pytest.approx(start_logits[window, 0] + end_logits[window, 0])


@pytest.mark.slow
def test_serving_answers_equal_evaluation_answers(lowercase_vocab):
  """`answers_of` (TensorFlow, serving) and `decode` (evaluation) pick the same spans of the same logits."""
  content = squad_json(20, seed=2, lines_per_context=(4, 12))
  contexts = [article["paragraphs"][0]["context"] for article in content["data"]]
  questions = [article["paragraphs"][0]["qas"][0]["question"] for article in content["data"]]
  encoder = TextEncoder(lowercase_vocab, seq_length=48)
  features = squad.windows(encoder, tf.constant(questions), tf.constant(contexts), max_query_length=8,
                           doc_stride=16)
  rng = np.random.default_rng(1)
  count = len(features["example"])
  logits = rng.normal(size=[2, count, 48]).astype(np.float32)
  arrays = {key: value.numpy() for key, value in features.items()}
  answers, best, nulls = squad.decode(dict(arrays, start_logits=logits[0], end_logits=logits[1]), contexts,
                                      max_answer_length=5)
  threshold = float(np.median(nulls - best))   # half of the questions get no answer
  served = squad.answers_of(features, logits[0], logits[1], tf.constant(contexts), max_answer_length=5,
                            num_questions=len(contexts), unanswerable=True,
                            null_score_diff_threshold=threshold)
  no_answer = nulls - best > threshold
  assert served["no_answer"].numpy().tolist() == no_answer.tolist() and 0 < no_answer.sum() < len(contexts)
  expected = ["" if none else answer for answer, none in zip(answers, no_answer, strict=True)]
  assert [answer.decode() for answer in served["answer"].numpy()] == expected
  np.testing.assert_allclose(served["null_score_diff"].numpy(), nulls - best, rtol=1e-6)
  for context, answer, start, end in zip(contexts, expected, served["start"].numpy(), served["end"].numpy(),
                                         strict=True):
    assert (context[start:end] == answer) if answer else (start, end) == (-1, -1)


# ---------------------------------------------------------------------------------------------
# Metrics.

# Gold answers (several per question where SQuAD has several) and predictions covering
# articles, punctuation, case, partial overlaps, repeated tokens and no answers.
HAND_MADE = [
    ("q1", ["Denver Broncos"], "Denver Broncos"),
    ("q2", ["the Broncos", "Broncos"], "Broncos!"),
    ("q3", ["Santa Clara, California"], "Santa Clara"),
    ("q4", ["1990"], "in 1990 or 1991"),
    ("q5", ["a golden anniversary", "golden"], "The Golden anniversary."),
    ("q6", ["Levi's Stadium"], "Stadium"),
    ("q7", ["three", "3"], "four"),
    ("q8", ["Peyton Manning"], "manning manning peyton"),
    ("q9", [], ""),                # unanswerable, predicted so
    ("q10", [], "Carolina"),       # unanswerable, answered
    ("q11", ["Cam Newton"], ""),   # answerable, predicted unanswerable
    ("q12", ["an", "the"], "a"),   # gold answers that normalise to nothing
]
NULL_SCORE_DIFFS = {"q1": -3.0, "q2": -1.5, "q3": 0.2, "q4": 0.7, "q5": -2.0, "q6": 1.4, "q7": 0.9,
                    "q8": -0.4, "q9": 2.5, "q10": 1.1, "q11": 3.0, "q12": 0.0}


def _official_dataset(items, version_2):
  qas = [dict(id=question, question="?", answers=[dict(text=text, answer_start=0) for text in golds])
         for question, golds, _ in items if golds or version_2]
  return [dict(title="t", paragraphs=[dict(context="c", qas=qas)])]


def test_v1_metrics_equal_the_official_script():
  items = [item for item in HAND_MADE if item[1]]
  golds = {question: answers for question, answers, _ in items}
  predictions = {question: prediction for question, _, prediction in items}
  ours = squad.squad_v1_metrics(golds, predictions)
  official = squad_evaluate_v1_1.evaluate(_official_dataset(items, False), predictions)
  assert ours["exact_match"] == pytest.approx(100 * official["exact_match"], abs=1e-9)
  assert ours["f1"] == pytest.approx(100 * official["final_f1"], abs=1e-9)
  assert 0 < ours["exact_match"] < ours["f1"] < 100
  # A missing prediction scores 0, as there.
  del predictions["q1"]
  assert squad.squad_v1_metrics(golds, predictions)["exact_match"] == pytest.approx(
      100 * squad_evaluate_v1_1.evaluate(_official_dataset(items, False), predictions)["exact_match"])


def test_v2_metrics_equal_the_official_script():
  golds = {question: answers for question, answers, _ in HAND_MADE}
  predictions = {question: prediction for question, _, prediction in HAND_MADE}
  dataset = _official_dataset(HAND_MADE, True)
  ours = squad.squad_v2_metrics(golds, predictions, NULL_SCORE_DIFFS)
  official = squad_evaluate_v2_0.evaluate(dataset, predictions)
  for key in ("exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total", "NoAns_exact", "NoAns_f1",
              "NoAns_total"):
    assert ours[key] == pytest.approx(official[key], abs=1e-9), key
  with_thresholds = squad_evaluate_v2_0.evaluate(dataset, predictions, NULL_SCORE_DIFFS)
  for name in ("exact", "f1"):
    assert ours[f"best_{name}"] == pytest.approx(with_thresholds[f"final_{name}"], abs=1e-9)
    assert ours[f"best_{name}_thresh"] == pytest.approx(with_thresholds[f"final_{name}_thresh"], abs=1e-9)
  assert ours["best_f1"] > ours["f1"] and ours["NoAns_total"] == 2


# ---------------------------------------------------------------------------------------------
# The task.

def _squad_config(model_dir, **changes):
  values = dict(model="bert_small", model_overrides=TINY, task="squad", model_dir=str(model_dir), steps=4,
                batch_size=8, eval_batch_size=8, seq_length=48, vocab_size=400, checkpoint_every=2,
                export=False, learning_rate=2e-3, warmup_steps=1, max_query_length=12, doc_stride=16,
                max_answer_length=8)
  values.update(changes)
  return TrainConfig(**values)


def test_squad_loss_is_exact_over_replicas(tmp_path):
  rng = np.random.default_rng(3)
  batch, length = 6, 8
  features = dict(start_positions=rng.integers(0, length, [batch]).astype(np.int32),
                  end_positions=rng.integers(0, length, [batch]).astype(np.int32),
                  weight=np.array([1, 1, 1, 1, 0, 1], np.float32))
  outputs = dict(start_logits=rng.normal(size=[batch, length]).astype(np.float32),
                 end_logits=rng.normal(size=[batch, length]).astype(np.float32))

  def cross_entropy(logits, labels):
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    return -log_probs[np.arange(len(labels)), labels]

  losses = 0.5 * (cross_entropy(outputs["start_logits"], features["start_positions"])
                  + cross_entropy(outputs["end_logits"], features["end_positions"]))
  expected = (losses * features["weight"]).sum() / features["weight"].sum()
  task = tasks.get_task(_squad_config(tmp_path, data="demo").validate())
  halves = [slice(0, 2), slice(2, None)]
  total = sum(float(task.denominators({k: v[part] for k, v in features.items()})["windows"])
              for part in halves)
  shares = sum(float(task.loss_and_stats({k: v[part] for k, v in features.items()},
                                         {k: v[part] for k, v in outputs.items()}, dict(windows=total))[0])
               for part in halves)
  np.testing.assert_allclose(shares, expected, rtol=1e-5)


def test_an_encoder_only_funnel_and_a_short_sequence_are_refused(tmp_path):
  with pytest.raises(ValueError, match="funnel_b6_6_6_decoder"):
    config = _squad_config(tmp_path, model="funnel_b4_4_4", model_overrides={}, data="demo")
    tasks.get_task(config.validate()).build()
  with pytest.raises(ValueError, match="max_query_length 64"):
    _squad_config(tmp_path, data="demo", seq_length=64, max_query_length=64).validate()


FRESH_PROCESS = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # registers the tokenizer's ops
    served = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
    outputs = served(question=tf.constant([sys.argv[2]]), context=tf.constant([sys.argv[3]]))
    print(json.dumps({name: value.numpy()[0].item() if value.dtype != tf.string else value.numpy()[0].decode()
                      for name, value in outputs.items()}))
    print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0] in ("tpu", "zoo", "export"))))
""")


@pytest.mark.slow
def test_squad_run_trains_evaluates_and_exports(tmp_path):
  """SQuAD v2.0 JSON: training, evaluation with the official metrics' keys, an export that a fresh
  process with only tensorflow and tensorflow_text loads, and answers as the evaluation decodes them."""
  content = squad_json(48, seed=3, impossible=0.25)
  path = _write_json(tmp_path / "train-v2.0.json", content)
  config = _squad_config(tmp_path / "run", data=f"squad:{path}", eval_data=f"squad:{path}", export=True,
                         steps=6, steps_per_execution=2)
  results = train.run(config)
  expected = {"loss", "exact", "f1", "HasAns_exact", "NoAns_exact", "best_f1", "best_f1_thresh", "examples",
              "windows", "export"}
  assert expected <= set(results), results
  assert results["examples"] == 48 and results["windows"] > 48 and 0 <= results["f1"] <= 100
  saved = TrainConfig.from_model_dir(str(tmp_path / "run"))
  assert saved.unanswerable and saved.sentence_pair
  # The predictions file the run writes, scored by the official script, gives the run's numbers.
  predictions = json.load(open(tmp_path / "run" / "eval_predictions.json", encoding="utf-8"))
  null_odds = json.load(open(tmp_path / "run" / "eval_null_odds.json"))
  official = squad_evaluate_v2_0.evaluate(content["data"], predictions, null_odds)
  assert len(predictions) == 48 and official["HasAns_total"] + official["NoAns_total"] == 48
  unthresholded = squad_evaluate_v2_0.evaluate(content["data"], predictions)
  for key in ("exact", "f1", "HasAns_f1", "NoAns_exact"):
    assert results[key] == pytest.approx(unthresholded[key], abs=1e-9), key
  assert results["best_f1"] == pytest.approx(official["final_f1"], abs=1e-9)

  info = json.load(open(os.path.join(results["export"], "model_info.json")))
  assert info["task"] == "squad" and info["unanswerable"] and info["max_query_length"] == 12
  assert sorted(info["signatures"]["serving_default"]["inputs"]) == ["context", "question"]
  assert sorted(info["signatures"]["serving_default"]["outputs"]) == [
      "answer", "end", "no_answer", "null_score_diff", "score", "start"]

  # The export answers as the evaluation decodes the Keras model's logits.
  article = content["data"][5]["paragraphs"][0]
  question, context = article["qas"][0]["question"], article["context"]
  from tpu.serving import restore_model
  from zoo.model_dir import ModelDir
  model_dir = ModelDir(str(tmp_path / "run"))
  model = restore_model(saved, model_dir.latest_checkpoint())
  encoder = TextEncoder(model_dir.read_vocab(), seq_length=48)
  features = squad.windows(encoder, tf.constant([question]), tf.constant([context]), max_query_length=12,
                           doc_stride=16)
  logits = model({key: features[key] for key in model.input}, training=False)
  arrays = {key: value.numpy() for key, value in features.items()}
  arrays.update(start_logits=logits["start_logits"].numpy(), end_logits=logits["end_logits"].numpy())
  answers, best, nulls = squad.decode(arrays, [context], max_answer_length=8)
  expected_answer = "" if nulls[0] - best[0] > 0 else answers[0]

  script = tmp_path / "answer.py"
  script.write_text(FRESH_PROCESS)
  environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
  process = subprocess.run([sys.executable, str(script), results["export"], question, context], cwd=tmp_path,
                           env=dict(environment, TF_CPP_MIN_LOG_LEVEL="3"), capture_output=True, text=True,
                           timeout=300, check=True)
  answer, modules = (json.loads(line) for line in process.stdout.strip().splitlines()[-2:])
  assert modules == []
  assert answer["answer"] == expected_answer and answer["no_answer"] == (expected_answer == "")
  if expected_answer:
    assert context[answer["start"]:answer["end"]] == expected_answer
  assert answer["null_score_diff"] == pytest.approx(nulls[0] - best[0], abs=1e-4)

  from export import predict
  predicted = predict.load(os.path.dirname(results["export"])).predict([question], [context])[0]
  assert predicted["question"] == question and predicted["answer"] == expected_answer
  assert isinstance(predicted["start"], int) and isinstance(predicted["no_answer"], bool)

  from export import serving_ops
  assert serving_ops.problems(results["export"]) == []


@pytest.mark.slow
@pytest.mark.parametrize("version", ["v1.1", "v2.0"])
def test_squad_on_tfds_mock_data_with_a_funnel_decoder(tmp_path, version):
  """Both TFDS versions train and evaluate; v2.0 also resumes (XLA and bfloat16 resumes: the classify
  run of tests/tpu/test_train.py)."""
  with tfds.testing.mock_data(num_examples=10):
    config = _squad_config(tmp_path / "run", data=f"tfds:squad/{version}", model="funnel_b4_4_4_decoder",
                           model_overrides=TINY_DECODER, seq_length=48, steps=2)
    first = second = train.run(config)
    if version == "v2.0":
      second = train.run(config.replace(steps=4))
  key = "exact_match" if version == "v1.1" else "exact"
  assert first["examples"] == second["examples"] == 10 and np.isfinite(second["loss"]) and key in second
  assert TrainConfig.from_model_dir(str(tmp_path / "run")).unanswerable == (version == "v2.0")


@pytest.mark.slow
def test_two_replicas_follow_one_device_and_evaluate_the_same(tmp_path):
  """Two replicas hold different numbers of windows of the same global batch: the losses follow
  one device's, and the evaluation (each replica decodes its slice, gathered) gives the same EM/F1."""
  path = _write_json(tmp_path / "squad.json", squad_json(40, seed=4, impossible=0.25))
  root = str(pathlib.Path(__file__).resolve().parents[3])
  script = textwrap.dedent(f"""
      import json
      import tensorflow as tf
      cpu = tf.config.list_physical_devices("CPU")[0]
      tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
      from tpu import train
      from tpu.config import TrainConfig
      from zoo.model_dir import ModelDir
      results = {{}}
      for name, strategy in (("one", tf.distribute.OneDeviceStrategy("/cpu:0")),
                             ("two", tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))):
        model_dir = {str(tmp_path)!r} + "/" + name
        config = TrainConfig(model="bert_small", model_overrides={TINY!r}, task="squad", data="squad:{path}",
                             eval_data="squad:{path}", model_dir=model_dir, steps=5, batch_size=8,
                             eval_batch_size=6, seq_length=48, vocab_size=400, dropout=0.0, export=False,
                             learning_rate=3e-3, warmup_steps=0, max_query_length=12, doc_stride=16)
        metrics = train.run(config, strategy=strategy)
        history = ModelDir(model_dir).read_history()
        losses = [record["loss"] for record in history if "learning_rate" in record]
        results[name] = dict(losses=losses, metrics=metrics)
      print(json.dumps(results))
  """)
  env = dict(os.environ, PYTHONPATH=root, TF_CPP_MIN_LOG_LEVEL="2")
  result = subprocess.run([sys.executable, "-c", script], env=env, cwd=root, capture_output=True, text=True,
                          timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  results = json.loads(result.stdout.strip().splitlines()[-1])
  one, two = results["one"], results["two"]
  assert len(one["losses"]) == 5 and one["losses"][0] != one["losses"][-1]
  np.testing.assert_allclose(two["losses"], one["losses"], atol=1e-5)
  for key in ("exact", "f1", "HasAns_f1", "NoAns_exact", "best_f1", "examples", "windows"):
    assert two["metrics"][key] == pytest.approx(one["metrics"][key], abs=1e-6), key
  np.testing.assert_allclose(two["metrics"]["loss"], one["metrics"]["loss"], rtol=1e-5)

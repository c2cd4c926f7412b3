"""The multiple_choice task: each option's text pair against a Python reference in both layouts
(cloze blanks on any line, truncation that keeps the option, Unicode), the refusal of a max_qa_length
that leaves the context no room and of served calls with another number of options, and a RACE-layout
run whose evaluation, SavedModel and `export.predict` agree with each other and with the files'
answers."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from export import predict
from export import saved_model
from export import serving_ops
from tests.tpu.tasks.choices_data import colour_articles
from tests.tpu.tasks.choices_data import write_race
from tests.tpu.tasks.losses import TINY_FUNNEL
from tests.tpu.tasks.losses import tiny_config
from tpu import train
from tpu.config import TrainConfig
from tpu.tasks import get_task
from tpu.tasks.multiple_choice import checked_choices
from tpu.tasks.multiple_choice import encode_choices
from tpu.tasks.multiple_choice import question_with_options
from zoo.model_dir import ModelDir
from zoo.text import TextEncoder

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "a", "mat", "hat", "why",
         "?", "yes", "no", ".", "cafe", "猫", "##s"]


def _reference(encoder, context, question, option, max_qa_length, layout):
  """One option's ids and types, in Python: the option in the question's blanks or after it, the last
  `max_qa_length` of those tokens (or, where these hold none of the option, the `max_qa_length` that end
  with it: the first ones if it is nearer the start), the context's first tokens that fit."""
  tokens = lambda text: encoder.tokenize(tf.constant([text]))[0].numpy().tolist()   # noqa: E731
  pieces = question.split("_")
  qa = tokens(option.join(pieces) if len(pieces) > 1 else f"{question} {option}")
  end = len(qa)
  if len(pieces) > 1:
    through_option = len(tokens(option.join(pieces[:-1]) + option))
    if len(qa) - through_option >= max_qa_length:
      end = max(through_option, min(max_qa_length, len(qa)))
  qa = qa[max(end - max_qa_length, 0):end]
  rest = tokens(context)[:max(encoder.seq_length - 3 - len(qa), 0)]
  first, second = (rest, qa) if layout == "context_first" else (qa, rest)
  ids = [encoder.cls_id] + first + [encoder.sep_id] + second + [encoder.sep_id]
  types = [encoder.cls_type_id] + [0] * (len(first) + 1) + [1] * (len(second) + 1)
  padding = encoder.seq_length - len(ids)
  return ids + [encoder.pad_id] * padding, types + [0] * padding


@pytest.mark.parametrize("layout", ["context_first", "question_first"])
def test_each_option_is_the_text_pair_of_the_reference(layout):
  encoder = TextEncoder(VOCAB, seq_length=12, cls_type_id=2)
  contexts = ["The cat sat on the mat, the cat sat.", "Why? Café 猫!", "", "the cat", "the cat", "yes"]
  questions = ["The cat sat on _ .", "why ?", "the cats sat on a mat , yes ? no . the cat",
               "why ?\nthe cat sat on _ .",                                  # the blank after a line break
               "why ? the cat sat on _ . the cat sat on the mat , the cat",   # a long text after the blank
               "_ sat on the mat . the cat sat on a hat ."]                   # ... and the blank first
  options = [["a mat", "a hat"], ["yes", "no"], ["a", "mat mat mat"], ["a mat", "a hat"], ["a mat", "a hat"],
             ["the cat", "a cat"]]
  features = encode_choices(encoder, tf.constant(contexts), tf.constant(questions), tf.constant(options),
                            max_qa_length=5, layout=layout)
  assert features["input_word_ids"].shape == [6, 2, 12]
  for b in range(6):
    for n in range(2):
      ids, types = _reference(encoder, contexts[b], questions[b], options[b][n], 5, layout)
      assert features["input_word_ids"][b, n].numpy().tolist() == ids, (b, n)
      assert features["input_type_ids"][b, n].numpy().tolist() == types, (b, n)
      assert features["input_mask"][b, n].numpy().tolist() == [int(i != 0) for i in ids]
  # Cloze questions: each option's own words are in its pair, so no two options' pairs are the same.
  for b in (3, 4, 5):
    for n, option in enumerate(options[b]):
      word_ids = encoder.tokenize(tf.constant([option]))[0].numpy().tolist()
      row = features["input_word_ids"][b, n].numpy().tolist()
      assert any(row[i:i + len(word_ids)] == word_ids for i in range(len(row))), (b, n)
    assert not np.array_equal(features["input_word_ids"][b, 0], features["input_word_ids"][b, 1])


def test_a_blank_on_any_line_takes_the_option():
  questions = tf.constant(["Read this.\nThe cat sat on _ .", "Line one\r\n\n_ is it", "No blank\nhere"])
  options = tf.constant([["a mat", "a hat"], ["red", "blue"], ["yes", "no"]])
  filled = [[text.decode() for text in row] for row in question_with_options(questions, options).numpy()]
  assert filled == [["Read this.\nThe cat sat on a mat .", "Read this.\nThe cat sat on a hat ."],
                    ["Line one\r\n\nred is it", "Line one\r\n\nblue is it"],
                    ["No blank\nhere yes", "No blank\nhere no"]]


def test_max_qa_length_must_leave_the_context_room():
  """At most seq_length - 4 ([CLS], two [SEP]s, a context token); the default, a quarter of seq_length,
  always does."""
  config = lambda **values: TrainConfig(task="multiple_choice", **values).validate_fields()   # noqa: E731
  assert config().max_qa_length == 32 and config(seq_length=512).max_qa_length == 128
  assert config(seq_length=5).max_qa_length == 1
  assert config(seq_length=128, max_qa_length=124).max_qa_length == 124
  for length in (125, 126, 128, 1000):
    with pytest.raises(ValueError, match=rf"^max_qa_length {length} leaves the context no room in pairs of "
                                         r"seq_length 128 .*: the largest valid max_qa_length is 124 "):
      config(seq_length=128, max_qa_length=length)
  with pytest.raises(ValueError, match=r"seq_length 4 is too short for multiple choice"):
    config(seq_length=4)
  # What reads a model directory without validating it refuses too: the export builds the model, and
  # anything that encodes pairs calls encode_choices.
  with pytest.raises(ValueError, match="max_qa_length 128 leaves the context no room"):
    get_task(TrainConfig(task="multiple_choice", seq_length=128, max_qa_length=128, num_choices=4)).build()
  encoder = TextEncoder(VOCAB, seq_length=12)
  with pytest.raises(ValueError, match="largest valid max_qa_length is 8"):
    encode_choices(encoder, tf.constant(["the cat"]), tf.constant(["why ?"]), tf.constant([["yes", "no"]]),
                   max_qa_length=9, layout="context_first")


def test_served_calls_take_the_trained_number_of_options():
  """The check of the serving graph, traced as the export traces it: another number of options, or none, is
  refused naming both counts, and a call of zero examples passes; the text signatures (`encode_text`) check
  before encoding, the token-id ones (`serving_outputs`) before the network runs."""
  shapes = [tf.TensorSpec([None, None], tf.string)]
  check = tf.function(lambda options: checked_choices(options, 3, "options"), input_signature=shapes,
                      autograph=False)
  assert check(tf.fill([2, 3], "yes")).shape == [2, 3] and check(tf.zeros([0, 5], tf.string)).shape == [0, 3]
  trained = r"options: this model takes 3 options per example \(the count it was trained with\)"
  with pytest.raises(tf.errors.InvalidArgumentError, match=trained + ", a call gave 4"):
    check(tf.fill([2, 4], "yes"))
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"options: an example needs options; this model takes 3 options per example, a "
                           r"call gave none"):
    check(tf.zeros([2, 0], tf.string))

  task = get_task(TrainConfig(task="multiple_choice", seq_length=12, max_qa_length=5, num_choices=3))
  encoder = TextEncoder(VOCAB, seq_length=12)
  for count in (2, 0):
    with pytest.raises(tf.errors.InvalidArgumentError, match="options: "):
      task.encode_text(dict(context=tf.constant(["the cat"]), question=tf.constant(["why ?"]),
                            options=tf.fill([1, count], "yes")), encoder)
  features = task.encode_text(dict(context=tf.constant(["the cat"]), question=tf.constant(["why ?"]),
                                   options=tf.constant([["yes", "no", "a mat"]])), encoder)
  assert features["input_word_ids"].shape == [1, 3, 12]
  names = ("input_word_ids", "input_mask", "input_type_ids")
  network = lambda features, training: tf.cast(tf.reduce_sum(features["input_mask"], -1), tf.float32)  # noqa: E731
  score = tf.function(lambda *ids: task.serving_outputs(network, dict(zip(names, ids, strict=True)), None),
                      input_signature=[tf.TensorSpec([None, None, 12], tf.int32)] * 3, autograph=False)
  assert score(*(features[name] for name in names))["scores"].shape == [1, 3]
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"input_word_ids: this model takes 3 .* gave 2"):
    score(*(features[name][:, :2] for name in names))


@pytest.mark.slow
def test_a_race_run_evaluates_exports_and_serves_the_same_choices(tmp_path, capsys):
  articles = colour_articles(24, seed=1)
  root = write_race(tmp_path / "RACE", dict(train=articles[:16], dev=articles[16:]))
  config = tiny_config(tmp_path / "run", task="multiple_choice", data=f"race:{root}", steps=4, batch_size=4,
                       seq_length=48, max_qa_length=16, eval_batch_size=6, export=True, vocab_size=300,
                       model_overrides=TINY_FUNNEL)
  results = train.run(config)
  run = ModelDir(config.model_dir)
  saved = run.read_config()
  assert saved["num_choices"] == 4 and saved["choice_layout"] == "context_first"
  assert results["examples"] == 16   # dev: 8 articles, 2 questions each

  # The SavedModel, from raw text: its choices score the dev set as the evaluation did.
  export = results["export"]
  assert serving_ops.problems(export) == []
  loaded = tf.saved_model.load(export)
  serve = loaded.signatures["serving_default"]
  dev = [(article["article"], question, options, "ABCD".index(answer)) for article in articles[16:]
         for question, options, answer in zip(article["questions"], article["options"], article["answers"],
                                              strict=True)]
  outputs = serve(context=tf.constant([d[0] for d in dev]), question=tf.constant([d[1] for d in dev]),
                  options=tf.constant([d[2] for d in dev]))
  scores = outputs["scores"].numpy()
  labels = np.array([d[3] for d in dev])
  assert results["accuracy"] == pytest.approx(float((scores.argmax(-1) == labels).mean()))
  np.testing.assert_allclose(outputs["probabilities"].numpy(), tf.nn.softmax(scores).numpy(), atol=1e-6)
  np.testing.assert_array_equal(outputs["choices"].numpy(), scores.argmax(-1))

  # export.predict reads JSON lines of the same fields.
  lines = "".join(json.dumps(dict(context=d[0], question=d[1], options=d[2])) + "\n" for d in dev[:3])
  process = subprocess.run([sys.executable, "-m", "export.predict", "--saved-model", export], input=lines,
                           capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT),
                           timeout=300)
  assert process.returncode == 0, process.stderr[-2000:]
  predicted = [json.loads(line) for line in process.stdout.splitlines()]
  assert [p["choice"] for p in predicted] == scores.argmax(-1)[:3].tolist()
  assert predicted[0]["options"] == dev[0][2]
  np.testing.assert_allclose([p["probabilities"] for p in predicted], outputs["probabilities"].numpy()[:3],
                             atol=1e-6)

  # Calls with another number of options than the trained 4, or none, are refused naming both counts; so
  # are export.predict's lines, by their line, before the model runs.
  first = dict(context=tf.constant([dev[0][0]]), question=tf.constant([dev[0][1]]))
  refused = pytest.raises(tf.errors.InvalidArgumentError,
                          match=r"options: this model takes 4 options per example \(the count it was trained "
                                r"with\), a call gave 3")
  with refused:
    serve(**first, options=tf.constant([dev[0][2][:3]]))
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"options: an example needs options; .* none"):
    serve(**first, options=tf.zeros([1, 0], tf.string))
  assert serve(context=tf.zeros([0], tf.string), question=tf.zeros([0], tf.string),
               options=tf.zeros([0, 0], tf.string))["scores"].shape == [0, 4]
  ids = tf.zeros([1, 5, 48], tf.int32)
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"input_word_ids: this model takes 4 .* gave 5"):
    loaded.signatures["from_token_ids"](input_word_ids=ids, input_mask=ids, input_type_ids=ids)
  predictor = predict.load(export)
  assert predictor.list_inputs == {"options": 4}
  records = [dict(context=d[0], question=d[1], options=d[2]) for d in dev[:2]]
  with pytest.raises(ValueError, match=r"^example 2: options has 5 texts; the model takes 4 per example"):
    predictor.predict_records([records[0], dict(records[1], options=[*dev[1][2], "white"])])

  # A model directory whose max_qa_length leaves the context no room is not exported.
  written = json.loads((tmp_path / "run" / "config.json").read_text())
  (tmp_path / "run" / "config.json").write_text(json.dumps(dict(written, max_qa_length=45)))
  capsys.readouterr()
  assert saved_model.main(["--model-dir", config.model_dir, "--out", str(tmp_path / "refused")]) == 2
  assert capsys.readouterr().err.startswith(
      "export.saved_model: error: max_qa_length 45 leaves the context no room in pairs of seq_length 48")
  assert not (tmp_path / "refused").exists()

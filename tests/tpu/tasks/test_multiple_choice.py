"""The multiple_choice task: each option's text pair against a Python reference in both layouts
(cloze blanks, truncation, Unicode), and a RACE-layout run whose evaluation, SavedModel and
`export.predict` agree with each other and with the files' answers."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from export import serving_ops
from tests.tpu.tasks.choices_data import colour_articles
from tests.tpu.tasks.choices_data import write_race
from tests.tpu.tasks.losses import TINY_FUNNEL
from tests.tpu.tasks.losses import tiny_config
from tpu import train
from tpu.tasks.multiple_choice import encode_choices
from zoo.model_dir import ModelDir
from zoo.text import TextEncoder

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "a", "mat", "hat", "why",
         "?", "yes", "no", ".", "cafe", "猫", "##s"]


def _reference(encoder, context, question, option, max_qa_length, layout):
  """One option's ids and types, in Python: the option in the question's blank or after it, the last
  `max_qa_length` of those tokens, the context's first tokens that fit."""
  tokens = lambda text: encoder.tokenize(tf.constant([text]))[0].numpy().tolist()   # noqa: E731
  qa = tokens(question.replace("_", option) if "_" in question else f"{question} {option}")[-max_qa_length:]
  rest = tokens(context)[:max(encoder.seq_length - 3 - len(qa), 0)]
  first, second = (rest, qa) if layout == "context_first" else (qa, rest)
  ids = [encoder.cls_id] + first + [encoder.sep_id] + second + [encoder.sep_id]
  types = [encoder.cls_type_id] + [0] * (len(first) + 1) + [1] * (len(second) + 1)
  padding = encoder.seq_length - len(ids)
  return ids + [encoder.pad_id] * padding, types + [0] * padding


@pytest.mark.parametrize("layout", ["context_first", "question_first"])
def test_each_option_is_the_text_pair_of_the_reference(layout):
  encoder = TextEncoder(VOCAB, seq_length=12, cls_type_id=2)
  contexts = ["The cat sat on the mat, the cat sat.", "Why? Café 猫!", ""]
  questions = ["The cat sat on _ .", "why ?", "the cats sat on a mat , yes ? no . the cat"]
  options = [["a mat", "a hat"], ["yes", "no"], ["a", "mat mat mat"]]
  features = encode_choices(encoder, tf.constant(contexts), tf.constant(questions), tf.constant(options),
                            max_qa_length=5, layout=layout)
  assert features["input_word_ids"].shape == [3, 2, 12]
  for b in range(3):
    for n in range(2):
      ids, types = _reference(encoder, contexts[b], questions[b], options[b][n], 5, layout)
      assert features["input_word_ids"][b, n].numpy().tolist() == ids, (b, n)
      assert features["input_type_ids"][b, n].numpy().tolist() == types, (b, n)
      assert features["input_mask"][b, n].numpy().tolist() == [int(i != 0) for i in ids]


@pytest.mark.slow
def test_a_race_run_evaluates_exports_and_serves_the_same_choices(tmp_path):
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
  serve = tf.saved_model.load(export).signatures["serving_default"]
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

"""Multiple-choice models both ways: transformers' `...ForMultipleChoice` (Funnel, BERT, ALBERT) converted
into zoo model directories whose encoder and `choice_head` score as transformers does, a converted
directory fine-tuned and served by `tpu.train`, and multiple-choice runs written back as
`...ForMultipleChoice` that `AutoModelForMultipleChoice` loads.

Tiny random-weight models (width 32, 2 heads, 1-2 layers), eval mode: no dropout. `make test-fast` runs
Funnel and BERT in, Funnel out and the refusals; the full suite also ALBERT, BERT and ALBERT out, and the
converted model fine-tuned and served."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
import torch
import transformers

from tests.conftest import fast_or_slow
from tests.zoo.text import sentencepiece_files
from tpu.config import TrainConfig
from zoo import models
from zoo import presets
from zoo.convert import ConversionError
from zoo.convert.__main__ import main
from zoo.model_dir import CHOICE_HEAD_ROOT
from zoo.model_dir import ENCODER_ROOT
from zoo.model_dir import ModelDir
from zoo.model_dir import checkpoint_roots

LENGTH, CHOICES = 16, 3
TOLERANCE = 1e-5
WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "box", "is", "what", "colour", "?", ".",
         "red", "blue", "green", "yellow", "black", "white", "purple", "orange", "this", "story", "in"]
VOCAB = WORDS + [f"w{i}" for i in range(64 - len(WORDS))]
ALBERT_VOCAB = 400   # the SentencePiece model's pieces
HF_CONFIGS = dict(
    funnel=lambda: transformers.FunnelConfig(vocab_size=len(VOCAB), d_model=32, n_head=2, d_head=16,
                                             d_inner=64, block_sizes=[1, 1], num_decoder_layers=1,
                                             hidden_act="gelu_new"),
    bert=lambda: transformers.BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2,
                                         num_attention_heads=2, intermediate_size=64,
                                         max_position_embeddings=64),
    albert=lambda: transformers.AlbertConfig(vocab_size=ALBERT_VOCAB, embedding_size=16, hidden_size=32,
                                             num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                             max_position_embeddings=64, hidden_act="gelu_new"),
)
MODEL_CLASSES = dict(funnel=transformers.FunnelForMultipleChoice, bert=transformers.BertForMultipleChoice,
                     albert=transformers.AlbertForMultipleChoice)


@pytest.fixture(scope="module")
def spiece():
  return sentencepiece_files.train_model(ALBERT_VOCAB)


def hf_choice_model(path, family, spiece=None, seed=0):
  """A random `...ForMultipleChoice` of `family` saved in `path` with its vocabulary; returns it in eval
  mode. Every weight but the layer norms' is drawn wider than transformers' initializer (std 0.2), so each
  counts and the options score apart."""
  torch.manual_seed(seed)
  model = MODEL_CLASSES[family](HF_CONFIGS[family]()).eval()
  with torch.no_grad():
    for name, parameter in model.named_parameters():
      if "norm" not in name.lower():
        parameter.normal_(0, 0.2)
  model.save_pretrained(path)
  if family == "albert":
    sentencepiece_files.save_hf_tokenizer(spiece, str(path))
  else:
    (path / "vocab.txt").write_text("".join(f"{token}\n" for token in VOCAB))
  return model


def choice_inputs(family, batch=2, seed=0):
  """int32 `[B, N, T]` encoder inputs: random ids, real lengths from 5 to T, a second segment, the
  first token [CLS] (Funnel: its token type 2, as its tokenizer gives it)."""
  rng = np.random.default_rng(seed)
  vocab = ALBERT_VOCAB if family == "albert" else len(VOCAB)
  ids = rng.integers(5, vocab, size=[batch, CHOICES, LENGTH]).astype(np.int32)
  ids[:, :, 0] = 2
  lengths = rng.integers(5, LENGTH + 1, size=[batch, CHOICES])
  positions = np.arange(LENGTH)
  mask = (positions < lengths[..., None]).astype(np.int32)
  types = ((positions >= 4) & (mask > 0)).astype(np.int32)
  if family == "funnel":
    types[:, :, 0] = 2
  return dict(input_word_ids=ids * mask, input_mask=mask, input_type_ids=types)


def hf_logits(model, inputs):
  with torch.no_grad():
    return model(input_ids=torch.from_numpy(inputs["input_word_ids"]).long(),
                 attention_mask=torch.from_numpy(inputs["input_mask"]).long(),
                 token_type_ids=torch.from_numpy(inputs["input_type_ids"]).long()).logits.numpy()


def restored_choice_model(model_dir):
  """`zoo.models.MultipleChoice` on the encoder of a model directory's config.json, its encoder and scorer
  restored from the roots `encoder` and `choice_head`, as `tpu.train --init-checkpoint` restores them."""
  config = TrainConfig.from_model_dir(model_dir)
  encoder = presets.build(config.model, **config.model_overrides, seq_length=config.seq_length,
                          vocab_size=config.vocab_size)
  model = models.MultipleChoice(encoder, dropout=0.0)
  items = model.checkpoint_items
  tf.train.Checkpoint(**{ENCODER_ROOT: items["encoder"], CHOICE_HEAD_ROOT: items[CHOICE_HEAD_ROOT]}).read(
      ModelDir(model_dir).latest_checkpoint()).assert_existing_objects_matched().expect_partial()
  return model


FORMATS = dict(funnel="hf-funnel", bert="hf-bert", albert="hf-albert")


@pytest.mark.parametrize("family", fast_or_slow(["funnel", "bert", "albert"], fast=("funnel", "bert")))
def test_a_multiple_choice_model_converts_with_its_head(family, request, tmp_path):
  spiece = request.getfixturevalue("spiece") if family == "albert" else None   # trained for ALBERT only
  model = hf_choice_model(tmp_path / "hf", family, spiece)
  out = str(tmp_path / "zoo")
  assert main([FORMATS[family], str(tmp_path / "hf"), "--out", out, "--seq-length", str(LENGTH)]) == 0
  assert CHOICE_HEAD_ROOT in checkpoint_roots(ModelDir(out).latest_checkpoint())
  source = ModelDir(out).read_source()
  assert source["heads"] == [CHOICE_HEAD_ROOT] and "dropped" not in source
  assert source["hf_config"]["architectures"] == [MODEL_CLASSES[family].__name__]
  chooser = restored_choice_model(out)
  inputs = choice_inputs(family)
  scores = chooser(inputs, training=False).numpy()
  expected = hf_logits(model, inputs)
  assert scores.shape == expected.shape == (2, CHOICES)
  difference = float(np.abs(scores - expected).max())
  print(f"{MODEL_CLASSES[family].__name__} -> zoo MultipleChoice: scores max |diff| {difference:.2e}")
  assert difference < TOLERANCE
  assert np.std(expected) > 0.05   # the options score differently: the comparison is not vacuous

  # And back: to-hf writes the same class with the same tensors, name for name.
  from safetensors.numpy import load_file

  from zoo.convert.to_hf.export import to_hf
  assert to_hf(out, str(tmp_path / "back")).architecture == MODEL_CLASSES[family].__name__
  before = load_file(str(tmp_path / "hf" / "model.safetensors"))
  after = load_file(str(tmp_path / "back" / "model.safetensors"))
  assert sorted(after) == sorted(before)
  assert [name for name in before if not np.array_equal(after[name], before[name])] == []


def test_heads_of_other_task_models_are_refused_by_name(tmp_path):
  from zoo.convert.bert import convert_hf_bert
  from zoo.convert.hf_funnel import convert_hf_funnel
  torch.manual_seed(0)
  bert = transformers.BertForSequenceClassification(HF_CONFIGS["bert"]())
  bert.save_pretrained(tmp_path / "bert")
  with pytest.raises(ConversionError, match=r"unexpected weight\(s\): classifier.bias, classifier.weight "
                                            r"\(a head of a BertFor... task model\? BertForMultipleChoice's"):
    convert_hf_bert(str(tmp_path / "bert"), seq_length=LENGTH)
  # A multiple-choice model whose config.json does not name its class: its head is not guessed.
  hf_choice_model(tmp_path / "funnel", "funnel")
  config = json.loads((tmp_path / "funnel" / "config.json").read_text())
  config.pop("architectures")
  (tmp_path / "funnel" / "config.json").write_text(json.dumps(config))
  with pytest.raises(ConversionError, match=r"unexpected weight\(s\): classifier.linear_hidden.bias.*"
                                            r"FunnelForMultipleChoice's heads convert"):
    convert_hf_funnel(str(tmp_path / "funnel"), seq_length=LENGTH)


@pytest.fixture(scope="module")
def race(tmp_path_factory):
  """A tiny RACE folder (`race:DIR`): 6 training articles and 2 for validation, 2 questions each."""
  from tests.tpu.tasks.choices_data import colour_articles
  from tests.tpu.tasks.choices_data import write_race
  articles = colour_articles(8, seed=3)
  return write_race(tmp_path_factory.mktemp("race") / "RACE", dict(train=articles[:6], dev=articles[6:]))


def race_examples(root, split="dev"):
  """(contexts, questions, options) of a RACE folder's split, one row per question."""
  rows = []
  for level in ("middle", "high"):
    folder = os.path.join(root, split, level)
    for name in sorted(os.listdir(folder)):
      with open(os.path.join(folder, name), encoding="utf-8") as file:
        article = json.load(file)
      rows += [(article["article"], question, options)
               for question, options in zip(article["questions"], article["options"], strict=True)]
  return [list(column) for column in zip(*rows, strict=True)]


def encoded_choices(model_dir, contexts, questions, options):
  """The run's own `[B, N, T]` features of the examples (`tpu.tasks.multiple_choice.encode_choices`)."""
  from tpu.tasks.multiple_choice import encode_choices
  from zoo.text import TextEncoder
  config = TrainConfig.from_model_dir(model_dir)
  text = TextEncoder(ModelDir(model_dir).read_vocab(), seq_length=config.seq_length,
                     **config.text_encoder_args())
  features = encode_choices(text, tf.constant(contexts), tf.constant(questions), tf.constant(options),
                            config.max_qa_length, config.choice_layout)
  return {name: value.numpy() for name, value in features.items()}


def hf_features(family, features):
  """The features as transformers' model takes them: a Funnel's [CLS] has token type 2 there (the zoo's
  Funnel gives the first token segment 2 whatever its type)."""
  features = {name: value.copy() for name, value in features.items()}
  if family == "funnel":
    features["input_type_ids"][..., 0] = 2
  return features


RUNS = dict(
    funnel=dict(),
    bert=dict(model="bert_small", model_overrides=dict(hidden_size=32, num_heads=2, intermediate_size=64,
                                                       num_layers=2)),
    albert=dict(model="albert_base", model_overrides=dict(hidden_size=32, num_heads=2, intermediate_size=64,
                                                          num_layers=2, embedding_width=16)),
)
AUTO_CLASSES = dict(funnel="FunnelForMultipleChoice", bert="BertForMultipleChoice",
                    albert="AlbertForMultipleChoice")


def perturbed(run, scale=0.1):
  """The run's task model, its weights moved by noise of `scale` and saved as the run's next checkpoint
  under the trainer's roots (a tiny model two steps from its initialisation scores every option of an
  example alike: with the noise, a wrong weight shows)."""
  from tpu.tasks.task_registry import build_model
  model_dir = ModelDir(run)
  chooser = build_model(TrainConfig.from_model_dir(run))
  roots = dict(model=chooser, **chooser.checkpoint_items)
  prefix = model_dir.latest_checkpoint()
  tf.train.Checkpoint(**roots).read(prefix).expect_partial().assert_existing_objects_matched()
  rng = np.random.default_rng(0)
  for variable in chooser.trainable_weights:
    variable.assign_add(rng.normal(0, scale, variable.shape).astype(np.float32))
  step = int(prefix.rsplit("-", 1)[1])
  tf.train.CheckpointManager(tf.train.Checkpoint(**roots), model_dir.checkpoint_dir, max_to_keep=None).save(
      checkpoint_number=step + 1)
  return chooser


@pytest.mark.slow
@pytest.mark.parametrize("family", ["funnel", "bert", "albert"])
def test_a_multiple_choice_run_goes_to_transformers(family, race, tmp_path):
  from tests.tpu.tasks.losses import tiny_config
  from tpu import train
  from zoo.convert.to_hf.export import to_hf
  config = tiny_config(tmp_path / "run", task="multiple_choice", data=f"race:{race}", steps=2, batch_size=4,
                       eval_batch_size=4, seq_length=32, max_qa_length=12, **RUNS[family])
  train.run(config)
  run = str(tmp_path / "run")
  chooser = perturbed(run)
  plan = to_hf(run, str(tmp_path / "hf"))
  assert plan.architecture == AUTO_CLASSES[family]
  model = transformers.AutoModelForMultipleChoice.from_pretrained(str(tmp_path / "hf")).eval()
  assert type(model).__name__ == AUTO_CLASSES[family]

  features = encoded_choices(run, *race_examples(race))
  scores = chooser(features, training=False).numpy()
  logits = hf_logits(model, hf_features(family, features))
  assert scores.shape == logits.shape == (4, 4)
  difference = float(np.abs(scores - logits).max())
  print(f"{family} multiple_choice run -> {AUTO_CLASSES[family]}: logits max |diff| {difference:.2e}")
  assert difference < TOLERANCE
  # Not vacuous: the options of every example score apart by far more than the tolerance.
  assert np.ptp(logits, axis=-1).min() > 100 * TOLERANCE, logits


@pytest.mark.slow
def test_a_converted_multiple_choice_model_fine_tunes_and_serves_transformers_scores(race, tmp_path):
  """hf-bert on a BertForMultipleChoice, then `tpu.train --task multiple_choice --init-checkpoint DIR` for
  one step at a learning rate of 1e-9: the run starts from the encoder and the choice head, and its
  SavedModel scores raw text as transformers scores the same token ids."""
  from tpu import train
  model = hf_choice_model(tmp_path / "hf", "bert")
  converted = str(tmp_path / "converted")
  assert main(["hf-bert", str(tmp_path / "hf"), "--out", converted, "--seq-length", str(LENGTH)]) == 0
  config = TrainConfig(model_dir=str(tmp_path / "run"), task="multiple_choice", data=f"race:{race}",
                       init_checkpoint=converted, steps=1, batch_size=4, eval_batch_size=4, seq_length=32,
                       max_qa_length=12, learning_rate=1e-9, warmup_steps=0, checkpoint_every=1, export=True)
  results = train.run(config)
  contexts, questions, options = race_examples(race)
  serve = tf.saved_model.load(results["export"]).signatures["serving_default"]
  scores = serve(context=tf.constant(contexts), question=tf.constant(questions),
                 options=tf.constant(options))["scores"].numpy()
  logits = hf_logits(model, encoded_choices(str(tmp_path / "run"), contexts, questions, options))
  assert scores.shape == logits.shape == (4, 4)
  difference = float(np.abs(scores - logits).max())
  print(f"BertForMultipleChoice -> hf-bert -> tpu.train (1 step) -> SavedModel: scores max |diff| "
        f"{difference:.2e}")
  assert difference < 1e-4
  assert np.ptp(logits, axis=-1).min() > 100 * 1e-4, logits

"""Multiple-choice models both ways: transformers' `...ForMultipleChoice` (Funnel, BERT, ALBERT) converted
into zoo model directories whose encoder and `choice_head` score as transformers does, a converted
directory fine-tuned and served by `tpu.train`, and multiple-choice runs written back as
`...ForMultipleChoice` that `AutoModelForMultipleChoice` loads.

Tiny random-weight models (width 32, 2 heads, 1-2 layers), eval mode: no dropout."""

import json

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
def test_a_multiple_choice_model_converts_with_its_head(family, spiece, tmp_path):
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

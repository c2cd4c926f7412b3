"""zoo.convert funnel-tf: the Funnel-Transformer authors' TensorFlow checkpoints.

The tests write each release in the authors' layout (`model.ckpt.*` in their variable
names and shapes, their `net_config.json`, a vocabulary) from a random Hugging Face
`FunnelModel` / `FunnelBaseModel`, with the optimizer's slots, ELECTRA's generator and
pre-training heads beside the encoder as the full releases hold them: the names every
weight maps to, and what a release that does not convert is told. What the converted
encoder computes is checked against the authors' own code in `test_funnel_authors.py`.
"""

import json
import os

import numpy as np
import pytest
import torch
import transformers

from tests.zoo.convert.test_bert import save_tf1_checkpoint
from tests.zoo.convert.test_hf_funnel import BLOCKS
from tests.zoo.convert.test_hf_funnel import LENGTH
from tests.zoo.convert.test_hf_funnel import TINY
from tests.zoo.convert.test_hf_funnel import TOLERANCE
from tests.zoo.convert.test_hf_funnel import hf_reference
from tests.zoo.convert.test_hf_funnel import make_inputs
from tests.zoo.convert.test_hf_funnel import max_difference
from zoo.convert import ConversionError
from zoo.convert import funnel_tf
from zoo.convert.__main__ import main
from zoo.convert.model_dir_writer import read_checkpoint
from zoo.model_dir import ModelDir

SPECIAL = ["<pad>", "<unk>", "<cls>", "<sep>", "<mask>", "<s>", "</s>"]
VOCAB = SPECIAL + [f"w{i}" for i in range(TINY["vocab_size"] - len(SPECIAL))]
# Beside the encoder in a full release: the optimizer's slots and step, the generator and the heads.
EXTRAS = {"global_step": np.array(1000, np.int64), "model/encoder/layer_0/rel_attn/q/kernel/adam_m": None,
          "generator/encoder/layer_0/rel_attn/q/kernel": np.zeros([8, 1, 8], np.float32),
          "model/binary_proj/dense/kernel": np.zeros([32, 32], np.float32),
          "model/binary_loss/bias": np.zeros([1], np.float32)}


def their_shape(how, value, n_head, d_head):
  """The shape the authors' code gives a weight Hugging Face holds as `value`."""
  if how == "heads_in":     # [N·H, D] -> [D, N, H]
    return (value.shape[1], n_head, d_head)
  if how == "heads_out":    # [D, N·H] -> [N, H, D]
    return (n_head, d_head, value.shape[0])
  if how == "flat":         # [N·H] -> [N, H]
    return (n_head, d_head)
  if how == "transpose":
    return value.shape[::-1]
  return value.shape


def blocks_text(sizes, repeats):
  return "_".join(f"{size}x{repeat}" if repeat > 1 else str(size)
                  for size, repeat in zip(sizes, repeats, strict=True))


def write_release(folder, model, extras=EXTRAS, **net_config):
  """Writes `model`'s weights as the authors' release: model.ckpt.*, net_config.json, vocab.txt."""
  os.makedirs(folder, exist_ok=True)
  config = model.config
  state = {name: value.detach().numpy() for name, value in model.state_dict().items()}
  hf_fields = dict(block_sizes=config.block_sizes, num_decoder_layers=config.num_decoder_layers
                   if isinstance(model, transformers.FunnelModel) else 0)
  values = {}
  for theirs, (hf, how) in funnel_tf.tf_names(hf_fields).items():
    value = state[hf]
    values[theirs] = funnel_tf._from_hf(value, how, their_shape(how, value, config.n_head, config.d_head))
  for name, value in extras.items():
    values[name] = values[name[:-len("/adam_m")]] * 0 if value is None else value
  save_tf1_checkpoint(values, os.path.join(folder, "model.ckpt"))
  fields = dict(
      block_size=blocks_text(config.block_sizes, config.block_repeats),
      decoder_size=str(hf_fields["num_decoder_layers"]), vocab_size=config.vocab_size, d_embed=config.d_model,
      d_model=config.d_model, n_head=config.n_head, d_head=config.d_head, d_inner=config.d_inner,
      ff_activation="gelu", dropout=0.1, dropatt=0.1, dropact=0.0,
      rel_attn_type={"factorized": "factorized", "relative_shift": "rel_shift"}[config.attention_type],
      separate_cls=config.separate_cls, pooling_type=config.pooling_type, pooling_size=2,
      pool_q_only=config.pool_q_only, init="truncated_normal", init_std=0.02, init_range=0.1)
  fields.update(net_config)
  with open(os.path.join(folder, "net_config.json"), "w") as file:
    json.dump(fields, file)
  with open(os.path.join(folder, "vocab.txt"), "w") as file:
    file.write("".join(token + "\n" for token in VOCAB))
  return str(folder)


def hf_model(decoder=True, **overrides):
  config = transformers.FunnelConfig(**{**TINY, **BLOCKS, "hidden_act": "gelu_new",
                                        "layer_norm_eps": funnel_tf.LAYER_NORM_EPSILON, **overrides})
  torch.manual_seed(0)
  return (transformers.FunnelModel if decoder else transformers.FunnelBaseModel)(config).eval()


@pytest.mark.slow
def test_the_command_writes_a_model_directory_that_exports_to_hugging_face(tmp_path, capsys):
  reference = hf_model(True, block_repeats=[1, 1, 2])   # block 0 unrepeated: Hugging Face's decoder residual
  release = write_release(tmp_path / "release", reference)
  out = tmp_path / "converted"
  assert main(["funnel-tf", release, "--out", str(out), "--seq-length", str(LENGTH)]) == 0
  settings = ModelDir(str(out)).read_config()
  assert settings["model_overrides"]["pooling_semantics"] == "funnel_authors"
  tokenizer = settings["tokenizer"]
  assert tokenizer["special_tokens"]["cls"] == "<cls>" and tokenizer["cls_type_id"] == 2
  # Out again, with Hugging Face's pooling as asked: the tensors of the model the release was written from.
  assert main(["to-hf", str(out), "--out", str(tmp_path / "hf"), "--change-pooling"]) == 0
  exported = transformers.FunnelModel.from_pretrained(str(tmp_path / "hf")).eval()
  inputs = make_inputs(True)
  difference = max_difference(hf_reference(exported, inputs).last_hidden_state,
                              hf_reference(reference, inputs).last_hidden_state, inputs["input_mask"],
                              reference.config)
  assert difference < TOLERANCE


@pytest.mark.parametrize("net_config, message", [
    (dict(d_embed=16), "d_embed=16 is not supported"),
    (dict(block_size="2_x"), "must be blocks like '6_3x2_3x2'"),
    (dict(decoder_size="2x2"), "decoder_size='2x2' is not supported"),
    (dict(rel_attn_type="absolute"), "rel_attn_type='absolute' must be one of"),
    (dict(ff_activation="swish"), "ff_activation='swish' is not supported"),
    (dict(block_size="1_2"), "missing weight(s): model/decoder/layer_3"),
])
def test_a_release_that_does_not_convert_is_named(net_config, message, tmp_path):
  release = write_release(tmp_path / "release", hf_model(True), **net_config)
  with pytest.raises(ConversionError) as error:
    read_checkpoint("funnel-tf", release, seq_length=LENGTH)
  assert message in str(error.value)


def test_unknown_variables_are_refused_by_name(tmp_path):
  release = write_release(tmp_path / "release", hf_model(True),
                          extras=dict(EXTRAS, **{"model/encoder/input_projection/kernel": np.zeros([32, 32],
                                                                                                  np.float32)}))
  with pytest.raises(ConversionError, match="unexpected weight.*model/encoder/input_projection/kernel"):
    read_checkpoint("funnel-tf", release, seq_length=LENGTH)

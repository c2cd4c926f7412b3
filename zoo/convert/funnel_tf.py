"""The Funnel-Transformer authors' TensorFlow checkpoints -> zoo `FunnelEncoder`.

The paper's released models are TensorFlow checkpoints (`model.ckpt.*`) with the
authors' `net_config.json`, in the variable names of their TensorFlow code
(`model/encoder/layer_L/rel_attn/q/kernel`, ...), and their vocabulary
`vocab.uncased.txt`. `python -m zoo.convert funnel-tf` reads them with TensorFlow's
checkpoint reader and maps every name onto Hugging Face's Funnel names (`hf_weights`),
so the weights go in as `zoo.convert.hf_funnel`'s do. What the encoder computes is the
authors' TensorFlow code's, not Hugging Face's port (`zoo_arguments`): their padding
semantics, their position rules and their decoder residual, checked against fixtures
their own code wrote (`tests/zoo/convert/test_funnel_authors.py`).

Axes: V vocabulary, D model width, E embedding width, N heads, H head width, F
feed-forward width.

`net_config.json` (the authors' `ModelConfig`): `block_size` "6_3x2_3x2" (layers with
parameters per block, "xR" repeats them), `decoder_size` ("2"), `vocab_size`,
`d_embed` (must equal `d_model`), `d_model`, `n_head`, `d_head`, `d_inner`,
`ff_activation` ("gelu" is the tanh approximation, as in their `ops.py`; "relu"),
`dropout`, `dropatt`, `dropact`, `rel_attn_type` ("factorized" or "rel_shift"),
`separate_cls`, `pooling_type`, `pooling_size` (2), `pool_q_only`, `init_range`.
`truncate_seq` is a flag of their scripts, not a config field (default true).

Variables (their `ops.dense` kernels are `[inputs..., outputs...]`; the query has no bias):

  model/input/word_embedding/lookup_table     [V, E]
  model/input/layer_norm/{gamma,beta}         [E]
  model/encoder/layer_L/rel_attn/{q,k,v}/kernel   [D, N, H]   ({k,v}/bias [N, H])
  model/encoder/layer_L/rel_attn/o/{kernel,bias}  [N, H, D], [D]
  model/encoder/layer_L/rel_attn/r/kernel          [D, N, H]
  model/encoder/layer_L/rel_attn/{r_w_bias,r_r_bias,r_s_bias} [N, H], seg_embed [2, N, H]
  model/encoder/layer_L/rel_attn/layer_norm/{gamma,beta}
  model/encoder/layer_L/ff/layer_1/{kernel,bias}   [D, F], [F]
  model/encoder/layer_L/ff/layer_2/{kernel,bias}   [F, D], [D]
  model/encoder/layer_L/ff/layer_norm/{gamma,beta}
  model/decoder/layer_M/...                    the same, M counting on after the encoder's

`L` counts the layers with parameters over all blocks (a repeated layer is one), in the
order Hugging Face's `encoder.blocks.B.I` lists them; the decoder's continue the count.
Left out on purpose and listed as dropped: the optimizer's slots and step, ELECTRA's
generator (`generator/...`) and the pre-training and task heads (`model/lm_proj`,
`model/lm_loss`, `model/binary_*`, `model/sequnece_summary`, ...).

Their TensorFlow layer norm uses epsilon 1e-8 (`ops.layer_norm_op`; not in the config):
the converted encoder does too.
"""

import os
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from zoo.choices import AUTHORS_POOLING
from zoo.choices import AUTHORS_TF_POSITIONS
from zoo.configs import FunnelConfig
from zoo.convert import releases
from zoo.convert import tokenizer_files
from zoo.convert.errors import ConversionError

CONFIG_FILE = "net_config.json"
CHECKPOINT = "model.ckpt"
# The vocabulary beside the checkpoint: the archives ship vocab.uncased.txt (their README,
# scripts/finetune.sh); a cased one, or one renamed to vocab.txt, is read too.
UNCASED_VOCAB_FILE = "vocab.uncased.txt"
CASED_VOCAB_FILE = "vocab.cased.txt"
VOCAB_FILES = (UNCASED_VOCAB_FILE, CASED_VOCAB_FILE, "vocab.txt")
LAYER_NORM_EPSILON = 1e-8
ACTIVATIONS = {"gelu": "gelu_new", "relu": "relu"}   # theirs -> Hugging Face's hidden_act
ATTENTION_TYPES = {"factorized": "factorized", "rel_shift": "relative_shift"}
REQUIRED_FIELDS = ("block_size", "vocab_size", "d_model", "n_head", "d_head", "d_inner")
OPTIMIZER_NAMES = ("global_step",)
OPTIMIZER_MARKS = ("/adam_m", "/adam_v", "AdamWeightDecayOptimizer", "/Adam")
# Their heads and ELECTRA's generator: not the encoder.
DROPPED_PREFIXES = ("generator/", "model/lm_proj/", "model/lm_loss/", "model/binary_proj/",
                    "model/binary_loss/", "model/sequnece_summary/")
# Their name inside a layer -> (Hugging Face's name, how the value becomes Hugging Face's).
LAYER_WEIGHTS = {
    "rel_attn/q/kernel": ("attention.q_head.weight", "heads_in"),
    "rel_attn/k/kernel": ("attention.k_head.weight", "heads_in"),
    "rel_attn/v/kernel": ("attention.v_head.weight", "heads_in"),
    "rel_attn/k/bias": ("attention.k_head.bias", "flat"),
    "rel_attn/v/bias": ("attention.v_head.bias", "flat"),
    "rel_attn/o/kernel": ("attention.post_proj.weight", "heads_out"),
    "rel_attn/o/bias": ("attention.post_proj.bias", "same"),
    "rel_attn/r/kernel": ("attention.r_kernel", "same"),
    "rel_attn/r_w_bias": ("attention.r_w_bias", "same"),
    "rel_attn/r_r_bias": ("attention.r_r_bias", "same"),
    "rel_attn/r_s_bias": ("attention.r_s_bias", "same"),
    "rel_attn/seg_embed": ("attention.seg_embed", "same"),
    "rel_attn/layer_norm/gamma": ("attention.layer_norm.weight", "same"),
    "rel_attn/layer_norm/beta": ("attention.layer_norm.bias", "same"),
    "ff/layer_1/kernel": ("ffn.linear_1.weight", "transpose"),
    "ff/layer_1/bias": ("ffn.linear_1.bias", "same"),
    "ff/layer_2/kernel": ("ffn.linear_2.weight", "transpose"),
    "ff/layer_2/bias": ("ffn.linear_2.bias", "same"),
    "ff/layer_norm/gamma": ("ffn.layer_norm.weight", "same"),
    "ff/layer_norm/beta": ("ffn.layer_norm.bias", "same"),
}
EMBEDDING_WEIGHTS = {
    "model/input/word_embedding/lookup_table": "embeddings.word_embeddings.weight",
    "model/input/layer_norm/gamma": "embeddings.layer_norm.weight",
    "model/input/layer_norm/beta": "embeddings.layer_norm.bias",
}


def _to_hf(value, how):
  """Their array -> Hugging Face's (torch `Linear.weight` is `[out, in]`)."""
  if how == "heads_in":   # [D, N, H] -> [N·H, D]
    return value.reshape(value.shape[0], -1).T
  if how == "heads_out":   # [N, H, D] -> [D, N·H]
    return value.reshape(-1, value.shape[-1]).T
  if how == "flat":
    return value.reshape(-1)
  if how == "transpose":
    return value.T
  return value


def _from_hf(value, how, shape):
  """Hugging Face's array -> theirs of `shape` (the inverse of `_to_hf`; what the tests write)."""
  if how in ("heads_in", "heads_out", "transpose"):
    return value.T.reshape(shape)
  return value.reshape(shape)


def parse_blocks(text: object, field: str, source: str) -> tuple[list[int], list[int]]:
  """`"6_3x2_3x2"` -> `([6, 3, 3], [1, 2, 2])`: layers with parameters and repeats of each block."""
  sizes, repeats = [], []
  for part in str(text).split("_"):
    match = re.fullmatch(r"(\d+)(?:x(\d+))?", part)
    if not match or int(match.group(1)) < 1 or int(match.group(2) or 1) < 1:
      raise ConversionError(f"{source}: {field}={text!r} must be blocks like '6_3x2_3x2' (layers, and 'xR' "
                            "repeats), each positive")
    sizes.append(int(match.group(1)))
    repeats.append(int(match.group(2) or 1))
  return sizes, repeats


def hf_config(net_config: Mapping[str, Any], source: str = CONFIG_FILE, truncate_seq: bool = True
              ) -> dict[str, Any]:
  """Hugging Face's FunnelConfig fields of the authors' `net_config.json`.

  Raises:
    ConversionError: a missing field, or a value neither Hugging Face nor the zoo has.
  """
  missing = [name for name in REQUIRED_FIELDS if name not in net_config]
  if missing:
    raise ConversionError(f"{source}: missing field(s) {', '.join(missing)} of the authors' net_config.json")

  def fail(field, message):
    raise ConversionError(f"{source}: {field}={net_config.get(field)!r} {message}")

  block_sizes, block_repeats = parse_blocks(net_config["block_size"], "block_size", source)
  decoder = str(net_config.get("decoder_size", "2") or "0")
  decoder_layers = 0
  if decoder != "0":
    decoder_sizes, decoder_repeats = parse_blocks(decoder, "decoder_size", source)
    if len(decoder_sizes) != 1 or decoder_repeats != [1]:
      fail("decoder_size", "is not supported: one decoder block without repeats converts (e.g. '2')")
    decoder_layers = decoder_sizes[0]
  if net_config.get("d_embed", net_config["d_model"]) != net_config["d_model"]:
    fail("d_embed", f"is not supported: the embeddings must be d_model={net_config['d_model']} wide (an "
         "input projection has no Hugging Face counterpart)")
  activation = net_config.get("ff_activation", "gelu")
  if activation not in ACTIVATIONS:
    fail("ff_activation", f"is not supported; use one of {sorted(ACTIVATIONS)}")
  attention = net_config.get("rel_attn_type", "factorized")
  if attention not in ATTENTION_TYPES:
    fail("rel_attn_type", f"must be one of {sorted(ATTENTION_TYPES)}")
  if int(net_config.get("pooling_size", 2)) != 2:
    fail("pooling_size", "is not supported: Funnel pools pairs (2)")
  return dict(
      model_type="funnel", architectures=["FunnelModel" if decoder_layers else "FunnelBaseModel"],
      vocab_size=net_config["vocab_size"], block_sizes=block_sizes, block_repeats=block_repeats,
      num_decoder_layers=decoder_layers, d_model=net_config["d_model"], n_head=net_config["n_head"],
      d_head=net_config["d_head"], d_inner=net_config["d_inner"], hidden_act=ACTIVATIONS[activation],
      hidden_dropout=float(net_config.get("dropout", 0.1)),
      attention_dropout=float(net_config.get("dropatt", 0.1)),
      activation_dropout=float(net_config.get("dropact", 0.0)),
      initializer_range=float(net_config.get("init_range", 0.1)), layer_norm_eps=LAYER_NORM_EPSILON,
      pooling_type=net_config.get("pooling_type", "mean"), attention_type=ATTENTION_TYPES[attention],
      separate_cls=bool(net_config.get("separate_cls", True)), truncate_seq=bool(truncate_seq),
      pool_q_only=bool(net_config.get("pool_q_only", True)))


def tf_names(config: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
  """`{their name: (Hugging Face's name, how)}` of every weight a model of `config` (Hugging Face's
  fields) has."""
  names = {name: (hf, "same") for name, hf in EMBEDDING_WEIGHTS.items()}
  layer = 0
  for b, size in enumerate(config["block_sizes"]):
    for i in range(size):
      names.update({f"model/encoder/layer_{layer}/{theirs}": (f"encoder.blocks.{b}.{i}.{hf}", how)
                    for theirs, (hf, how) in LAYER_WEIGHTS.items()})
      layer += 1
  for j in range(config["num_decoder_layers"]):
    names.update({f"model/decoder/layer_{layer + j}/{theirs}": (f"decoder.layers.{j}.{hf}", how)
                  for theirs, (hf, how) in LAYER_WEIGHTS.items()})
  return names


def paths(src: str, config: str | None = None) -> tuple[str, str]:
  """`(net_config.json, checkpoint prefix)` of a release: its directory or its checkpoint prefix."""
  return releases.paths(src, CHECKPOINT, CONFIG_FILE, config)


def read_net_config(path: str) -> dict[str, Any]:
  return releases.read_json(path, f"the authors' {CONFIG_FILE} (or pass --config)")


def zoo_arguments(hf_config: Mapping[str, Any], seq_length: int | None, with_decoder: bool,
                  source: str = CONFIG_FILE) -> FunnelConfig:
  """The `FunnelConfig` that computes what the authors' TensorFlow code computes with a release.

  Hugging Face's fields map as `hf_funnel.zoo_config` maps them, but for three rules of their code:
  a pooled window is real if any of its tokens is (`pooling_semantics="funnel_authors"`); their TF
  code's position rules (`position_rules="authors_tf"`, which only differ without `separate_cls`); and
  the decoder adds the output of the last application of block 0 (`hiddens[cum_num_layer - 1]` in
  their `bridge_layer`), the zoo's default `decoder_residual_layer`.
  """
  from zoo.convert import hf_funnel
  return hf_funnel.zoo_config(hf_config, seq_length, with_decoder, source=source).replace(
      pooling_semantics=AUTHORS_POOLING, position_rules=AUTHORS_TF_POSITIONS, decoder_residual_layer=None)


def what_it_computes(hf_config: Mapping[str, Any]) -> str:
  """In words, for `source.json`: which code of the authors the converted encoder follows, and where
  their TensorFlow and PyTorch code (or their TF code on and off TPU) would compute otherwise."""
  form = "factorized" if hf_config["attention_type"] == "factorized" else "rel_shift"
  words = (f"the authors' TensorFlow code (modeling.py) with rel_attn_type={form!r}: a pooled window is real "
           "if any of its tokens is, mean/max pool the whole window")
  if hf_config["separate_cls"]:
    return words + ("; with separate_cls their PyTorch code, and their TF code on or off TPU (off TPU it "
                    "switches factorized to rel_shift), compute the same")
  words += "; without separate_cls token 0's position and segment terms are zeroed"
  if form == "rel_shift":
    return words + (" and block b's pooled queries sit at 1 - 2^b + 2^b*i. Their PyTorch code (and "
                    "Hugging Face) would do neither")
  return words + (". Their PyTorch code (and Hugging Face) would not zero them, and their TF code off TPU "
                  "(rel_shift, which their loader switches to without --use_tpu) places the pool-query-only "
                  "layer's queries 2^(b-1) earlier")


def read_vocab(folder: str) -> tuple[str, list[str], dict[str, str]]:
  """`(path, tokens, special token names)` of the release's vocabulary (`VOCAB_FILES`, first found).

  Raises:
    FileNotFoundError: none of `VOCAB_FILES` is in `folder`.
  """
  from zoo.text.vocab import load_vocab
  for name in VOCAB_FILES:
    path = os.path.join(folder, name)
    if os.path.isfile(path):
      vocab = load_vocab(path)
      funnel = tokenizer_files.FUNNEL_NAMES
      names = funnel if funnel["cls"] in vocab else tokenizer_files.BERT_NAMES
      return path, vocab, names
  raise FileNotFoundError(f"{folder}: no vocabulary; the release's must be beside its checkpoint as one of "
                          f"{', '.join(VOCAB_FILES)}")


def hf_weights(prefix: str, config: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], list[str]]:
  """`({Hugging Face name: float32 array}, [dropped names])` of the authors' checkpoint `prefix`.

  Raises:
    ConversionError: no checkpoint, a missing or misshapen weight of the encoder, or a
      variable that is neither the encoder's nor dropped on purpose.
  """
  reader = releases.checkpoint_reader(prefix, f"the authors' {CHECKPOINT}.* files")
  shapes = reader.get_variable_to_shape_map()
  expected = tf_names(config)
  dropped = sorted(name for name in shapes if name in OPTIMIZER_NAMES or any(mark in name for mark in
                                                                              OPTIMIZER_MARKS)
                   or name.startswith(DROPPED_PREFIXES))
  unexpected = sorted(set(shapes) - set(expected) - set(dropped))
  missing = sorted(set(expected) - set(shapes))
  problems = []
  if missing:
    problems.append(f"missing weight(s): {', '.join(missing)}")
  if unexpected:
    problems.append(f"unexpected weight(s): {', '.join(unexpected)} (does net_config.json describe this "
                    "checkpoint?)")
  if problems:
    raise ConversionError(f"{prefix}: " + "; ".join(problems))
  weights = {hf: _to_hf(np.asarray(reader.get_tensor(name), np.float32), how)
             for name, (hf, how) in expected.items()}
  return weights, dropped

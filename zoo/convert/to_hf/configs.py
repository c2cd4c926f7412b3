"""The config.json of an export to Hugging Face: transformers' FunnelConfig, BertConfig (ElectraConfig for
a discriminator) and AlbertConfig fields of a zoo encoder's constructor arguments.

`funnel_config`, `bert_config` and `albert_config` give the fields `zoo.convert.to_hf.plan` decides on;
`config_json` the file written, which adds the weights' dtype, the special token ids the class
names, and for a directory converted from Hugging Face the config fields the zoo has no use for
(kept in its `source.json`), so a checkpoint converted in and exported again gives back every value.
"""

import json
import os
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

from zoo.choices import FACTORIZED
from zoo.choices import SHIFT
from zoo.model_dir import ModelDir

# zoo `activation` -> transformers `hidden_act` (the importers' table, backwards).
HF_ACTIVATIONS = {"gelu": "gelu", "gelu_approximate": "gelu_new", "relu": "relu", "swish": "silu"}
FUNNEL_ATTENTION_TYPES = {FACTORIZED: "factorized", SHIFT: "relative_shift"}
# Fields of transformers' config.json that say nothing about the model (left out of comparisons).
BOOKKEEPING_FIELDS = ("transformers_version", "dtype", "torch_dtype", "_name_or_path")


def funnel_config(encoder: Mapping[str, Any]) -> dict[str, Any]:
  """transformers' FunnelConfig fields of a zoo Funnel; `num_decoder_layers` only when it has a decoder
  (a FunnelBaseModel's config keeps the value of the checkpoint it came from, else 0)."""
  decoder = {"num_decoder_layers": encoder["num_decoder_layers"]} if encoder.get("num_decoder_layers") else {}
  return dict(
      model_type="funnel", vocab_size=encoder["vocab_size"], block_sizes=list(encoder["block_sizes"]),
      block_repeats=list(encoder.get("block_repeats") or [1] * len(encoder["block_sizes"])), **decoder,
      d_model=encoder["hidden_size"], n_head=encoder["num_heads"],
      d_head=encoder.get("head_size") or encoder["hidden_size"] // encoder["num_heads"],
      d_inner=encoder["intermediate_size"], hidden_act=HF_ACTIVATIONS[encoder["activation"]],
      hidden_dropout=encoder["dropout"], attention_dropout=encoder["attention_dropout"],
      activation_dropout=encoder.get("activation_dropout", 0.0),
      initializer_range=encoder["initializer_range"], layer_norm_eps=encoder["layer_norm_epsilon"],
      pooling_type=encoder["pooling_type"],
      attention_type=FUNNEL_ATTENTION_TYPES[encoder["position_encoding"]],
      separate_cls=encoder["separate_cls"], truncate_seq=encoder["truncate_seq"],
      pool_q_only=encoder["pool_q_only"])


def bert_config(encoder: Mapping[str, Any], model_type: str) -> dict[str, Any]:
  """transformers' BertConfig (`model_type` "bert") or ElectraConfig ("electra") fields of a zoo
  TransformerEncoder."""
  config = dict(
      model_type=model_type, vocab_size=encoder["vocab_size"], hidden_size=encoder["hidden_size"],
      num_hidden_layers=encoder["num_layers"], num_attention_heads=encoder["num_heads"],
      intermediate_size=encoder["intermediate_size"], hidden_act=HF_ACTIVATIONS[encoder["activation"]],
      hidden_dropout_prob=encoder["dropout"], attention_probs_dropout_prob=encoder["attention_dropout"],
      max_position_embeddings=encoder["max_sequence_length"], type_vocab_size=encoder["type_vocab_size"],
      initializer_range=encoder["initializer_range"], layer_norm_eps=encoder["layer_norm_epsilon"])
  if model_type == "electra":
    config["embedding_size"] = encoder["hidden_size"]
  return config


def albert_config(encoder: Mapping[str, Any]) -> dict[str, Any]:
  """transformers' AlbertConfig fields of a zoo TransformerEncoder with ALBERT's savings: one layer group
  when every layer is shared, else a group per layer (`zoo.convert.albert.groups_of`)."""
  from zoo.convert.albert import groups_of
  return dict(
      model_type="albert", vocab_size=encoder["vocab_size"],
      embedding_size=encoder.get("embedding_width") or encoder["hidden_size"],
      hidden_size=encoder["hidden_size"],
      num_hidden_layers=encoder["num_layers"], num_hidden_groups=groups_of(encoder), inner_group_num=1,
      num_attention_heads=encoder["num_heads"], intermediate_size=encoder["intermediate_size"],
      hidden_act=HF_ACTIVATIONS[encoder["activation"]], hidden_dropout_prob=encoder["dropout"],
      attention_probs_dropout_prob=encoder["attention_dropout"],
      max_position_embeddings=encoder["max_sequence_length"], type_vocab_size=encoder["type_vocab_size"],
      initializer_range=encoder["initializer_range"], layer_norm_eps=encoder["layer_norm_epsilon"],
      position_embedding_type="absolute")


def source_config(model_dir: ModelDir) -> dict[str, Any]:
  """The transformers config.json a directory was converted from (its `source.json`), or {}."""
  if not os.path.exists(model_dir.source_path):
    return {}
  config = model_dir.read_source().get("hf_config") or {}
  return {key: value for key, value in config.items() if key not in BOOKKEEPING_FIELDS}


def config_json(model_dir: ModelDir, hf_config: Mapping[str, Any], family: str, dtype: str,
                vocab: Sequence[str], special_tokens: Mapping[str, str]) -> str:
  """The text of the export's config.json: the directory's source config (`source_config`) under
  `hf_config` (the plan's, `zoo.convert.to_hf.plan.Plan.hf_config`, of the model `family`), the weights'
  `dtype`, and the ids of the special tokens (`{role: token}`) the class names.

  Raises:
    ValueError: a special token the config names is not in `vocab`.
  """
  source = source_config(model_dir)
  written = {**source, **hf_config, "dtype": dtype}
  if hf_config["model_type"] == "albert":   # ALBERT's config names its [CLS] and [SEP] too
    written.update(bos_token_id=vocab.index(special_tokens["cls"]),
                   eos_token_id=vocab.index(special_tokens["sep"]))
  if family != "funnel" and "pad_token_id" not in source:
    # A Funnel's config names no pad token: transformers' Funnel zeroes the embedding of `pad_token_id`
    # when it loads, and its whole-window pooling mixes padded positions into real ones, so the row must
    # stay as trained (BERT's loads as written).
    written["pad_token_id"] = vocab.index(special_tokens["pad"])
  if family == "funnel":
    written.setdefault("num_decoder_layers", 0)
  return json.dumps(written, indent=2, sort_keys=True) + "\n"

"""Hugging Face ALBERT checkpoints -> zoo `TransformerEncoder` with ALBERT's two savings.

An `AlbertModel`, `AlbertForMaskedLM`, `AlbertForPreTraining` or `AlbertForMultipleChoice` directory as
`save_pretrained` writes it (`config.json`, `model.safetensors` or `pytorch_model.bin`,
single or sharded: `zoo.convert.weights`) with its SentencePiece model `spiece.model` (without it,
the `tokenizer.json` transformers 5 saves, from which `zoo.convert.sentencepiece_model` builds it).
ALBERT (Lan et al., 2020) is BERT's Post-LN encoder with factorized embeddings (width
E, projected to the model width D: `embedding_width`) and one set of layer weights
applied at every layer (`layer_sharing="all"`).

Names (`albert.` in front in an `AlbertFor...` model; torch `Linear`: `[out, in]`):

  embeddings.{word,position,token_type}_embeddings.weight, embeddings.LayerNorm
  encoder.embedding_hidden_mapping_in            the projection E -> D
  encoder.albert_layer_groups.G.albert_layers.0. the shared layer (G = 0), or layer G:
    attention.{query,key,value,dense}, attention.LayerNorm, ffn, ffn_output,
    full_layer_layer_norm
  pooler                                         tanh dense on [CLS] (AlbertModel)
  predictions.{dense,LayerNorm,bias,decoder}     the masked-LM head (tied decoder)
  classifier                                     AlbertForMultipleChoice's score of the pooled output

The masked-LM head becomes a zoo `MaskedLMHead` (D -> E, layer norm, the word
embeddings transposed); `AlbertForMultipleChoice`'s classifier (config.json `architectures`
names the class) the scoring layer of `zoo.models.MultipleChoice` (root `choice_head`), its
pooler the encoder's. The sentence-order head of `AlbertForPreTraining`
(`sop_classifier.`) is left out on purpose and listed as dropped; the heads of the other
task models are refused, and anything else
unknown, missing or misshapen raises `ConversionError` naming it. ALBERT's layer groups
of several layers (`num_hidden_groups` other than 1 or the number of layers; one group per
layer is `layer_sharing="none"`), `inner_group_num` above 1 and E = D (a projection the
zoo's embeddings do not hold) are refused: every published ALBERT has one group, one
inner layer and E = 128.
"""

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from zoo.configs import TransformerConfig
from zoo.convert import bert
from zoo.convert import releases
from zoo.convert.errors import ConversionError
from zoo.convert.hf_funnel import ACTIVATIONS
from zoo.convert.hf_funnel import check_weights
from zoo.convert.hf_funnel import is_multiple_choice
from zoo.convert.hf_funnel import read_hf_weights
from zoo.convert.hf_funnel import weights_source
from zoo.convert.rules import Rule
from zoo.convert.rules import flat
from zoo.convert.rules import same
from zoo.convert.rules import torch_linear

CONFIG_FILE = "config.json"
PREFIX = "albert."
SENTENCE_ORDER_HEAD = "sop_classifier."
REQUIRED_FIELDS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                   "intermediate_size", "hidden_act", "max_position_embeddings", "type_vocab_size")
# MaskedLMHead's layer norm (Model Garden's) has BERT's fixed epsilon.
HEAD_LAYER_NORM_EPSILON = 1e-12


def zoo_config(config: Mapping[str, Any], seq_length: int | None = 512, source: str = CONFIG_FILE
               ) -> TransformerConfig:
  """The `TransformerConfig` of an ALBERT `config.json`.

  Raises:
    ConversionError: a missing field or a value the zoo cannot reproduce.
  """
  fail = bert.config_failure(config, source)
  bert.require_fields(config, REQUIRED_FIELDS, source)
  if config.get("inner_group_num", 1) != 1:
    fail("inner_group_num", "is not supported: the zoo's layers are one attention and one feed-forward net "
                            "each; ALBERT's layers of several inner layers have no zoo equivalent")
  groups = config.get("num_hidden_groups", 1)
  if groups not in (1, config["num_hidden_layers"]):
    fail("num_hidden_groups", f"is not supported: the zoo shares one layer across all layers (1 group) or "
                              f"none (num_hidden_layers={config['num_hidden_layers']} groups); ALBERT's "
                              "groups of several layers have no zoo equivalent")
  if config["embedding_size"] == config["hidden_size"]:
    fail("embedding_size", "equals hidden_size: ALBERT still projects E -> D there, which the zoo's "
                           "embeddings do only when the widths differ")
  arguments = bert.zoo_config(config, ACTIVATIONS, seq_length, source=source)
  if not isinstance(config["embedding_size"], int) or config["embedding_size"] <= 0:
    fail("embedding_size", "must be a positive integer")
  dropout = config.get("hidden_dropout_prob", 0.0)
  attention_dropout = config.get("attention_probs_dropout_prob", 0.0)
  sharing = "all" if groups == 1 and config["num_hidden_layers"] > 1 else "none"
  return arguments.replace(embedding_width=config["embedding_size"], layer_sharing=sharing,
                           dropout=float(dropout), attention_dropout=float(attention_dropout))


def groups_of(encoder_config: Mapping[str, Any]) -> int:
  """ALBERT's `num_hidden_groups` of a zoo encoder: 1 when every layer is shared, else one per layer."""
  return 1 if encoder_config.get("layer_sharing", "none") == "all" else encoder_config["num_layers"]


def encoder_entries(model: Any) -> list[tuple[str, Any, Rule]]:
  """(checkpoint name, zoo variable, rule) for every encoder weight but the pooler's: one layer group
  (every layer shared) or one per layer."""
  def norm(prefix, layer):
    return [(f"{prefix}.weight", layer.gamma, same()), (f"{prefix}.bias", layer.beta, same())]

  def dense(prefix, layer, input_axes, bias):
    return [(f"{prefix}.weight", layer.kernel, torch_linear(input_axes)),
            (f"{prefix}.bias", layer.bias, bias)]

  embeddings = model.get_layer("embeddings")
  entries = [
      ("embeddings.word_embeddings.weight", embeddings.word_embeddings.embeddings, same()),
      ("embeddings.position_embeddings.weight", embeddings.position_embeddings.weights[0], same()),
      ("embeddings.token_type_embeddings.weight", embeddings.type_embeddings.embeddings, same()),
      *norm("embeddings.LayerNorm", embeddings.norm),
  ]
  if embeddings.projection is not None:   # E = D has none (to-hf writes ALBERT's as the identity)
    entries += dense("encoder.embedding_hidden_mapping_in", embeddings.projection, 1, same())
  for group in range(groups_of(model.get_config())):
    block = model.get_layer(f"layer_{group}")   # with one group, every layer is this block applied again
    attention = block.attention
    layer = f"encoder.albert_layer_groups.{group}.albert_layers.0"
    entries += [
        *dense(f"{layer}.attention.query", attention.query_dense, 1, flat()),
        *dense(f"{layer}.attention.key", attention.key_dense, 1, flat()),
        *dense(f"{layer}.attention.value", attention.value_dense, 1, flat()),
        *dense(f"{layer}.attention.dense", attention.output_dense, 2, same()),
        *norm(f"{layer}.attention.LayerNorm", block.attention_norm),
        *dense(f"{layer}.ffn", block.intermediate_dense, 1, same()),
        *dense(f"{layer}.ffn_output", block.output_dense, 1, same()),
        *norm(f"{layer}.full_layer_layer_norm", block.output_norm),
    ]
  return entries


def pooler_entries(model: Any) -> list[tuple[str, Any, Rule]]:
  pooler = model.get_layer("pooler")
  return [("pooler.weight", pooler.kernel, torch_linear(1)), ("pooler.bias", pooler.bias, same())]


def _unexpected_hint(names):
  if any(not name.startswith(("embeddings.", "encoder.", "pooler.", "predictions.")) for name in names):
    return (" (a task model's head? AlbertForMaskedLM's, AlbertForPreTraining's and "
            "AlbertForMultipleChoice's heads convert (config.json architectures names the class); convert "
            "another task model's AlbertModel instead)")
  return ""


def convert_hf_albert(path: str, seq_length: int | None = 512) -> bert.Converted:
  """A `zoo.convert.bert.Converted` of a Hugging Face ALBERT directory (see the module docstring).

  `sequence_output` equals Hugging Face's `last_hidden_state`, `pooled_output` its
  `pooler_output`, the masked-LM head's logits `AlbertForMaskedLM`'s and the scores of
  `zoo.models.MultipleChoice` with the converted `choice_head` `AlbertForMultipleChoice`'s.

  Raises:
    ConversionError: (a `ValueError`) an unsupported config value, a missing config field, or
      missing, unexpected or misshapen weights.
  """
  from zoo.models import TransformerEncoder
  config_path = os.path.join(path, CONFIG_FILE)
  config = releases.read_json(config_path, "a Hugging Face checkpoint directory with config.json and "
                                           "model.safetensors")
  if config.get("model_type") != "albert":
    raise ConversionError(f"{config_path}: model_type must be 'albert', got {config.get('model_type')!r}")
  arguments = zoo_config(config, seq_length, config_path)
  weights = dict(read_hf_weights(path))
  for name in ("embeddings.position_ids", f"{PREFIX}embeddings.position_ids"):
    weights.pop(name, None)   # a buffer of older checkpoints, not a weight
  weights = {name[len(PREFIX):] if name.startswith(PREFIX) else name: value
             for name, value in weights.items()}
  source = weights_source(path)
  model = TransformerEncoder(arguments)
  entries = encoder_entries(model)
  has_pooler = any(name.startswith("pooler.") for name in weights)
  if has_pooler:
    entries += pooler_entries(model)
  heads = [name for name in weights if name.startswith(("predictions.", SENTENCE_ORDER_HEAD))]
  multiple_choice = is_multiple_choice(config)
  if multiple_choice:
    heads += [name for name in bert.CLASSIFIER if name in weights]
  check_weights(entries, weights, source, is_dropped=set(heads).__contains__,
                unexpected_hint=_unexpected_hint)
  for name, variable, rule in entries:
    variable.assign(rule.to_zoo(np.asarray(weights[name], np.float32), tuple(variable.shape)))
  used: list[str]
  head, used = None, []
  if any(name.startswith("predictions.") for name in weights):
    if float(config.get("layer_norm_eps", HEAD_LAYER_NORM_EPSILON)) != HEAD_LAYER_NORM_EPSILON:
      raise ConversionError(f"{config_path}: layer_norm_eps={config['layer_norm_eps']} with a masked-LM "
                            f"head: the zoo's MaskedLMHead normalizes with {HEAD_LAYER_NORM_EPSILON}")
    head, used = bert.masked_lm_head(model, weights, "albert", arguments.activation, source)
  scorer = None
  if multiple_choice:
    scorer, choice_names = bert.multiple_choice_head(model, weights, has_pooler, config_path, source)
    used = used + choice_names
  left = [name for name in heads if name not in used]
  unexpected = [name for name in left if not name.startswith(SENTENCE_ORDER_HEAD)]
  if unexpected:
    raise ConversionError(f"{source}: unexpected weight(s): {', '.join(sorted(unexpected))}")
  return bert.Converted(model, left, has_pooler, heads=bert.heads_of(head, scorer))

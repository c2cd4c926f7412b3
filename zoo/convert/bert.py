"""BERT checkpoints -> zoo `TransformerEncoder` (Post-LN, absolute positions; RealFormer on request).

Two layouts of the same weights:

- Hugging Face (`load_hf_bert`): a `BertModel` or `BertForPreTraining` directory as
  `save_pretrained` writes it, `config.json` and `model.safetensors` (or its shards, or
  `pytorch_model.bin` of older repositories: `zoo.convert.weights`). Names
  `embeddings.word_embeddings.weight`,
  `encoder.layer.N.attention.self.query.weight` (torch `Linear`: `[out, in]`), with
  `bert.` in front in a `BertFor...` model.
- Google's TF1 release (`load_tf1_bert`): `bert_config.json` and the checkpoint prefix
  `bert_model.ckpt`, names `bert/encoder/layer_N/attention/self/query/kernel` (`[in,
  out]`). The official RealFormer checkpoints use the same names; pass
  `residual_attention=True` (and `running_mean=True` for the paper's 36-layer models).

Axes: V vocabulary, D model width, N heads, H head width, F feed-forward width.

Every encoder weight is used exactly once. The masked-LM head (`cls.predictions.` in
Hugging Face, `cls/predictions/` in TF1), when present, becomes a zoo `MaskedLMHead`
(`Converted.heads["masked_lm"]`, tied to the encoder's word embeddings, as in BERT; an
untied decoder is refused). The next-sentence head (`cls.seq_relationship`) and, in TF1
checkpoints, the optimizer's slots and step are left out on purpose and listed as
`dropped`; anything else unknown, missing or misshapen raises `ConversionError` naming it. The zoo's
`pooler` takes BERT's pooler (`pooler.dense`, `bert/pooler/dense`); a `BertModel` saved
without one keeps the zoo's initial pooler. A Hugging Face `BertForMultipleChoice` (config.json
`architectures`) also gives its `classifier` (one score from the pooled output): the scoring
layer of `zoo.models.MultipleChoice` (`Converted.heads["choice_head"]`). The heads of the other
`BertFor...` task models are refused, named.

Activations: Hugging Face's `hidden_act` means what `transformers` computes ("gelu" is
the exact erf form, "gelu_new" the tanh approximation); Google's `bert_config.json`
"gelu" is the tanh approximation that `modeling.py` of the TF1 release computes (as
Model Garden's TF1 converter reads it).
"""

import os
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from typing import Any
from typing import NoReturn

import numpy as np

from zoo.configs import TransformerConfig
from zoo.convert import releases
from zoo.convert.errors import ConversionError
from zoo.convert.hf_funnel import ACTIVATIONS as HF_ACTIVATIONS
from zoo.convert.hf_funnel import check_weights
from zoo.convert.hf_funnel import choice_head
from zoo.convert.hf_funnel import is_multiple_choice
from zoo.convert.hf_funnel import read_hf_weights
from zoo.convert.hf_funnel import weights_source
from zoo.convert.rules import Rule
from zoo.convert.rules import flat
from zoo.convert.rules import same
from zoo.convert.rules import tf1_kernel
from zoo.convert.rules import torch_linear
from zoo.model_dir import CHOICE_HEAD_ROOT
from zoo.model_dir import MASKED_LM_ROOT
from zoo.models import TransformerEncoder

HF_CONFIG_FILE = "config.json"
TF1_CONFIG_FILE = "bert_config.json"
TF1_CHECKPOINT = "bert_model.ckpt"
# google-research/bert modeling.py: "gelu" is the tanh approximation.
TF1_ACTIVATIONS = {"gelu": "gelu_approximate", "relu": "relu", "swish": "swish"}

REQUIRED_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                   "intermediate_size", "hidden_act", "max_position_embeddings", "type_vocab_size")
# TF1 variable names that are not the encoder's: the optimizer's state.
TF1_OPTIMIZER_SUFFIXES = ("/adam_m", "/adam_v", "/Adam", "/Adam_1", "/lamb_m", "/lamb_v")
TF1_OPTIMIZER_NAMES = ("global_step", "good_steps", "loss_scale", "current_loss_scale")
# The classifier of Hugging Face's BERT and ALBERT task models (...ForMultipleChoice: one score).
CLASSIFIER = ("classifier.weight", "classifier.bias")


def config_failure(config: Mapping[str, Any], source: str) -> Callable[[str, str], NoReturn]:
  """`fail(field, message)`: raises a ConversionError naming the config file, the field and its value."""
  def fail(field, message):
    raise ConversionError(f"{source}: {field}={config.get(field)!r} {message}")
  return fail


def require_fields(config: Mapping[str, Any], fields: Iterable[str], source: str) -> None:
  """Raises a ConversionError listing the `fields` the config lacks."""
  missing = [name for name in fields if name not in config]
  if missing:
    raise ConversionError(f"{source}: missing config field(s) {', '.join(missing)}")


def zoo_config(config: Mapping[str, Any], activations: Mapping[str, str], seq_length: int | None = 512,
               residual_attention: bool = False, running_mean: bool = False,
               source: str = HF_CONFIG_FILE) -> TransformerConfig:
  """The `TransformerConfig` of a BERT config (Hugging Face's or Google's `bert_config.json`).

  Raises:
    ConversionError: a missing field or a value the zoo cannot reproduce.
  """
  fail = config_failure(config, source)
  require_fields(config, REQUIRED_FIELDS, source)
  for field in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                "max_position_embeddings", "type_vocab_size"):
    if not isinstance(config[field], int) or isinstance(config[field], bool) or config[field] <= 0:
      fail(field, "must be a positive integer")
  if config["hidden_size"] % config["num_attention_heads"]:
    fail("hidden_size", f"must be a multiple of num_attention_heads={config['num_attention_heads']}")
  if config["hidden_act"] not in activations:
    fail("hidden_act", f"is not supported; use one of {sorted(activations)}")
  if config.get("position_embedding_type", "absolute") != "absolute":
    fail("position_embedding_type", "is not supported; only 'absolute' positions convert")
  for field in ("is_decoder", "add_cross_attention"):
    if config.get(field):
      fail(field, "is not supported: the zoo's encoder attends both ways and has no cross-attention")
  if running_mean and not residual_attention:
    raise ConversionError("running_mean needs residual_attention (RealFormer)")
  if seq_length is not None and seq_length > config["max_position_embeddings"]:
    raise ConversionError(f"seq_length {seq_length} exceeds the checkpoint's max_position_embeddings="
                          f"{config['max_position_embeddings']}")
  return TransformerConfig(
      vocab_size=config["vocab_size"],
      hidden_size=config["hidden_size"],
      num_layers=config["num_hidden_layers"],
      num_heads=config["num_attention_heads"],
      intermediate_size=config["intermediate_size"],
      activation=activations[config["hidden_act"]],
      dropout=float(config.get("hidden_dropout_prob", 0.1)),
      attention_dropout=float(config.get("attention_probs_dropout_prob", 0.1)),
      max_sequence_length=config["max_position_embeddings"],
      type_vocab_size=config["type_vocab_size"],
      residual_attention=bool(residual_attention),
      running_mean=bool(running_mean),
      layer_norm_epsilon=float(config.get("layer_norm_eps", 1e-12)),
      initializer_range=float(config.get("initializer_range", 0.02)),
      seq_length=seq_length,
  )


def encoder_entries(model: Any, layout: str) -> list[tuple[str, Any, Rule]]:
  """(source name, zoo variable, rule) for every encoder weight, in `layout` "hf" or "tf1"."""
  hf = layout == "hf"
  kernel = torch_linear if hf else tf1_kernel

  def name(hf_name, tf1_name):
    return hf_name if hf else tf1_name

  def norm(hf_prefix, tf1_prefix, layer):
    return [(name(f"{hf_prefix}.weight", f"{tf1_prefix}/gamma"), layer.gamma, same()),
            (name(f"{hf_prefix}.bias", f"{tf1_prefix}/beta"), layer.beta, same())]

  def dense(hf_prefix, tf1_prefix, layer, input_axes, bias):
    return [(name(f"{hf_prefix}.weight", f"{tf1_prefix}/kernel"), layer.kernel, kernel(input_axes)),
            (name(f"{hf_prefix}.bias", f"{tf1_prefix}/bias"), layer.bias, bias)]

  embeddings = model.get_layer("embeddings")
  entries = [
      (name("embeddings.word_embeddings.weight", "bert/embeddings/word_embeddings"),
       embeddings.word_embeddings.embeddings, same()),
      (name("embeddings.position_embeddings.weight", "bert/embeddings/position_embeddings"),
       embeddings.position_embeddings.weights[0], same()),
      (name("embeddings.token_type_embeddings.weight", "bert/embeddings/token_type_embeddings"),
       embeddings.type_embeddings.embeddings, same()),
      *norm("embeddings.LayerNorm", "bert/embeddings/LayerNorm", embeddings.norm),
  ]
  for i in range(model.get_config()["num_layers"]):
    block = model.get_layer(f"layer_{i}")
    attention = block.attention
    h, t = f"encoder.layer.{i}", f"bert/encoder/layer_{i}"
    entries += [
        *dense(f"{h}.attention.self.query", f"{t}/attention/self/query", attention.query_dense, 1, flat()),
        *dense(f"{h}.attention.self.key", f"{t}/attention/self/key", attention.key_dense, 1, flat()),
        *dense(f"{h}.attention.self.value", f"{t}/attention/self/value", attention.value_dense, 1, flat()),
        *dense(f"{h}.attention.output.dense", f"{t}/attention/output/dense", attention.output_dense, 2,
               same()),
        *norm(f"{h}.attention.output.LayerNorm", f"{t}/attention/output/LayerNorm", block.attention_norm),
        *dense(f"{h}.intermediate.dense", f"{t}/intermediate/dense", block.intermediate_dense, 1, same()),
        *dense(f"{h}.output.dense", f"{t}/output/dense", block.output_dense, 1, same()),
        *norm(f"{h}.output.LayerNorm", f"{t}/output/LayerNorm", block.output_norm),
    ]
  return entries


def pooler_entries(model: Any, layout: str) -> list[tuple[str, Any, Rule]]:
  pooler = model.get_layer("pooler")
  if layout == "hf":
    return [("pooler.dense.weight", pooler.kernel, torch_linear(1)),
            ("pooler.dense.bias", pooler.bias, same())]
  return [("bert/pooler/dense/kernel", pooler.kernel, tf1_kernel(1)),
          ("bert/pooler/dense/bias", pooler.bias, same())]


def task_head_hint(model_type: str) -> Callable[[list[str]], str]:
  """`unexpected_hint` of `check_weights`: what to do with the head of a task model it does not convert."""
  family = {"bert": "Bert", "albert": "Albert"}[model_type]

  def hint(names):
    if any(name.startswith("classifier.") or name.startswith("qa_outputs.") for name in names):
      return (f" (a head of a {family}For... task model? {family}ForMultipleChoice's converts (config.json "
              f"architectures names the class); convert another task model's {family}Model)")
    return ""
  return hint


def assign_weights(model: Any, weights: Mapping[str, np.ndarray], layout: str, source: str,
                   dropped: Iterable[str] = (),
                   unexpected_hint: Callable[[list[str]], str] = lambda names: "") -> bool:
  """Copies `weights` (`{name: array}` in `layout` "hf" or "tf1") into a `TransformerEncoder`.

  Every weight but those in `dropped` must be used exactly once, and every zoo
  variable but the pooler's (when the checkpoint has none) must receive one.

  Returns:
    True when the checkpoint had a pooler.

  Raises:
    ConversionError: missing, unexpected or misshapen weights, listed by name.
  """
  entries = encoder_entries(model, layout)
  pooler = pooler_entries(model, layout)
  pooler_names = [name for name, _, _ in pooler]
  has_pooler = any(name in weights for name in pooler_names)
  if has_pooler:
    entries += pooler
  check_weights(entries, weights, source, is_dropped=set(dropped).__contains__,
                unexpected_hint=unexpected_hint)
  for name, variable, rule in entries:
    variable.assign(rule.to_zoo(np.asarray(weights[name], np.float32), tuple(variable.shape)))
  assigned = {id(variable) for _, variable, _ in entries}
  left = [v.name for v in model.weights if id(v) not in assigned | {id(v) for _, v, _ in pooler}]
  if left:   # a TransformerEncoder variable this converter does not know about
    raise ConversionError(f"{source}: no checkpoint weight for zoo variable(s) {', '.join(left)}")
  return has_pooler


class Converted:
  """A converted encoder, its heads (`{"masked_lm": MaskedLMHead}`, `{"choice_head": Dense}` or `{}`) and
  the names left out."""

  def __init__(self, encoder: Any, dropped: Iterable[str], has_pooler: bool,
               heads: Mapping[str, Any] | None = None) -> None:
    self.encoder, self.dropped, self.has_pooler = encoder, sorted(dropped), has_pooler
    self.heads = dict(heads or {})


def _mlm_names(layout):
  if layout == "albert":   # Hugging Face ALBERT (zoo.convert.albert)
    p = "predictions."
    return dict(kernel=f"{p}dense.weight", bias=f"{p}dense.bias", gamma=f"{p}LayerNorm.weight",
                beta=f"{p}LayerNorm.bias", output_bias=f"{p}bias", tied_bias=f"{p}decoder.bias",
                tied_table=f"{p}decoder.weight")
  if layout == "hf":
    p = "cls.predictions."
    return dict(kernel=f"{p}transform.dense.weight", bias=f"{p}transform.dense.bias",
                gamma=f"{p}transform.LayerNorm.weight", beta=f"{p}transform.LayerNorm.bias",
                output_bias=f"{p}bias", tied_bias=f"{p}decoder.bias", tied_table=f"{p}decoder.weight")
  p = "cls/predictions/"
  return dict(kernel=f"{p}transform/dense/kernel", bias=f"{p}transform/dense/bias",
              gamma=f"{p}transform/LayerNorm/gamma", beta=f"{p}transform/LayerNorm/beta",
              output_bias=f"{p}output_bias")


def masked_lm_head(encoder: Any, weights: Mapping[str, np.ndarray], layout: str, activation: str,
                   source: str) -> tuple[Any, list[str]]:
  """The zoo `MaskedLMHead` of a checkpoint's masked-LM weights, or None when it has none.

  `layout`: "hf" and "tf1" (BERT's names), "albert" (Hugging Face ALBERT's).

  Returns:
    `(head or None, names used)`.

  Raises:
    ConversionError: some of its weights missing or misshapen, or a decoder not tied to
      the word embeddings.
  """
  import tensorflow as tf

  from zoo.layers.transformer_block import ACTIVATIONS
  from zoo.models.heads import MaskedLMHead
  names = _mlm_names(layout)
  present = [name for name in names.values() if name in weights]
  if not present:
    return None, []
  head = MaskedLMHead(encoder.get_embedding_table(), activation=ACTIVATIONS.get(activation, activation),
                      initializer="zeros", name="masked_lm")
  width = encoder.get_config()["hidden_size"]
  head(tf.zeros([1, 1, width]), masked_positions=tf.zeros([1, 1], tf.int32))
  kernel = tf1_kernel(1) if layout == "tf1" else torch_linear(1)
  entries = [(names["kernel"], head.dense.kernel, kernel), (names["bias"], head.dense.bias, same()),
             (names["gamma"], head.layer_norm.gamma, same()), (names["beta"], head.layer_norm.beta, same()),
             (names["output_bias"], head.bias, same())]
  problems = [f"missing weight(s) of the masked-LM head: {name}"
              for name, _, _ in entries if name not in weights]
  problems += [f"{name} has shape {tuple(weights[name].shape)}, expected {rule.expected(variable.shape)}"
               for name, variable, rule in entries
               if name in weights and tuple(weights[name].shape) != rule.expected(variable.shape)]
  used = [name for name, _, _ in entries]
  table = encoder.get_embedding_table().numpy()
  for key, tied_to, what in (("tied_bias", names["output_bias"], "the output bias"),
                             ("tied_table", None, "the word embeddings")):
    name = names.get(key)
    if name and name in weights:
      other = table if tied_to is None else weights.get(tied_to)
      if other is None or weights[name].shape != other.shape or not np.array_equal(weights[name], other):
        problems.append(f"{name} is not tied to {what}: an untied masked-LM decoder is not supported")
      used.append(name)
  if problems:
    raise ConversionError(f"{source}: " + "; ".join(problems))
  for name, variable, rule in entries:
    variable.assign(rule.to_zoo(np.asarray(weights[name], np.float32), tuple(variable.shape)))
  return head, used


def _renamed(name):
  """Hugging Face's current name of a weight: the first checkpoints (`bert-base-uncased`) name
  layer norms `gamma` and `beta`, which transformers renames to `weight` and `bias` on loading."""
  if name.endswith(".gamma"):
    return name[:-len("gamma")] + "weight"
  if name.endswith(".beta"):
    return name[:-len("beta")] + "bias"
  return name


def convert_hf_bert(path: str, seq_length: int | None = 512, residual_attention: bool = False,
                    running_mean: bool = False) -> Converted:
  """A `Converted` of a Hugging Face BERT directory (see `load_hf_bert`)."""
  config_path = os.path.join(path, HF_CONFIG_FILE)
  config = releases.read_json(config_path,
                      "a Hugging Face checkpoint directory with config.json and model.safetensors")
  if config.get("model_type") != "bert":
    raise ConversionError(f"{config_path}: model_type must be 'bert', got {config.get('model_type')!r}")
  arguments = zoo_config(config, HF_ACTIVATIONS, seq_length, residual_attention, running_mean, config_path)
  weights = {_renamed(name): value for name, value in read_hf_weights(path).items()}
  weights.pop("embeddings.position_ids", None)   # a buffer of older checkpoints, not a weight
  weights.pop("bert.embeddings.position_ids", None)
  if any(name.startswith("bert.") for name in weights):   # a BertFor... model: the encoder under bert.
    weights = {name[len("bert."):] if name.startswith("bert.") else name: value
               for name, value in weights.items()}
  heads = [name for name in weights if name.startswith("cls.")]
  multiple_choice = is_multiple_choice(config)
  if multiple_choice:
    heads += [name for name in CLASSIFIER if name in weights]
  model = TransformerEncoder(arguments)
  source = weights_source(path)
  has_pooler = assign_weights(model, weights, "hf", source, heads, task_head_hint("bert"))
  head, used = masked_lm_head(model, weights, "hf", arguments.activation, source)
  scorer = None
  if multiple_choice:
    scorer, choice_names = multiple_choice_head(model, weights, has_pooler, config_path, source)
    used = used + choice_names
  return _with_heads(model, heads, used, has_pooler, head, source, scorer)


def multiple_choice_head(model: Any, weights: Mapping[str, np.ndarray], has_pooler: bool, config_path: str,
                         source: str) -> tuple[Any, list[str]]:
  """`(scorer, names)` of a Hugging Face BERT or ALBERT `...ForMultipleChoice`: its `classifier`, which
  scores the pooled output (the encoder's pooler, converted with the encoder)."""
  if not has_pooler:
    raise ConversionError(f"{source}: config.json ({config_path}) names a ...ForMultipleChoice model, "
                          "whose classifier reads the pooler, but the checkpoint has no pooler weights")
  return choice_head(weights, model.get_layer("pooler"), (), CLASSIFIER, source)


def heads_of(masked_lm: Any = None, scorer: Any = None) -> dict[str, Any]:
  """`Converted.heads`: `{checkpoint root: head}` of the heads converted."""
  heads = {MASKED_LM_ROOT: masked_lm, CHOICE_HEAD_ROOT: scorer}
  return {root: head for root, head in heads.items() if head is not None}


def _with_heads(model, heads, used, has_pooler, head, source, scorer=None):
  """The `Converted`: the next-sentence head is dropped, any other head weight is unexpected."""
  left = [name for name in heads if name not in used]
  unexpected = [name for name in left if "seq_relationship" not in name]
  if unexpected:
    raise ConversionError(f"{source}: unexpected weight(s): {', '.join(sorted(unexpected))}")
  return Converted(model, left, has_pooler, heads=heads_of(head, scorer))


def load_hf_bert(path: str, seq_length: int | None = 512, residual_attention: bool = False,
                 running_mean: bool = False) -> TransformerEncoder:
  """Loads a Hugging Face `BertModel` / `BertForPreTraining` directory as a zoo `TransformerEncoder`.

  `sequence_output` equals Hugging Face's `last_hidden_state` (float32, ~1e-6) and
  `pooled_output` its `pooler_output`. `convert_hf_bert` also gives the masked-LM head, or the
  scoring layer of a `BertForMultipleChoice`.

  Raises:
    ConversionError: (a `ValueError`) an unsupported config value, a missing config
      field, or missing, unexpected or misshapen weights.
  """
  return convert_hf_bert(path, seq_length, residual_attention, running_mean).encoder


def tf1_paths(src: str) -> tuple[str, str]:
  """`(bert_config.json, checkpoint prefix)` of a TF1 release: a directory or a checkpoint prefix."""
  return releases.paths(src, TF1_CHECKPOINT, TF1_CONFIG_FILE)


def read_tf1_weights(prefix: str) -> tuple[dict[str, np.ndarray], list[str]]:
  """`{name: float32 array}` of a TF1 checkpoint, and the optimizer names it leaves out."""
  reader = releases.checkpoint_reader(prefix, f"Google's {TF1_CHECKPOINT}.* files")
  weights, optimizer = {}, []
  for name in reader.get_variable_to_shape_map():
    if name.endswith(TF1_OPTIMIZER_SUFFIXES) or name in TF1_OPTIMIZER_NAMES:
      optimizer.append(name)
    elif name.endswith(".ATTRIBUTES/VARIABLE_VALUE") or name == "_CHECKPOINTABLE_OBJECT_GRAPH":
      if name != "_CHECKPOINTABLE_OBJECT_GRAPH":
        raise ConversionError(f"{prefix}: a TF2 object-based checkpoint ({name}), not Google's TF1 layout")
    else:
      weights[name] = reader.get_tensor(name)
  return weights, optimizer


def convert_tf1_bert(src: str, seq_length: int | None = 512, residual_attention: bool = False,
                     running_mean: bool = False) -> Converted:
  """A `Converted` of Google's TF1 BERT layout (see `load_tf1_bert`)."""
  config_path, prefix = tf1_paths(src)
  config = releases.read_json(config_path, f"Google's {TF1_CONFIG_FILE} beside the checkpoint")
  arguments = zoo_config(config, TF1_ACTIVATIONS, seq_length, residual_attention, running_mean, config_path)
  weights, optimizer = read_tf1_weights(prefix)
  heads = [name for name in weights if name.startswith("cls/")]
  model = TransformerEncoder(arguments)
  has_pooler = assign_weights(model, weights, "tf1", prefix, heads)
  head, used = masked_lm_head(model, weights, "tf1", arguments.activation, prefix)
  converted = _with_heads(model, heads, used, has_pooler, head, prefix)
  converted.dropped = sorted(converted.dropped + optimizer)
  return converted


def load_tf1_bert(src: str, seq_length: int | None = 512, residual_attention: bool = False,
                  running_mean: bool = False) -> TransformerEncoder:
  """Loads Google's TF1 BERT (or RealFormer) checkpoint as a zoo `TransformerEncoder`.

  Args:
    src: the release's directory (`bert_config.json`, `bert_model.ckpt.*`) or the
      checkpoint prefix, with `bert_config.json` beside it.
    seq_length: static input length of the zoo model.
    residual_attention, running_mean: RealFormer's (the official RealFormer
      checkpoints: `residual_attention=True`; `running_mean=True` for the 36-layer ones).

  Raises:
    ConversionError: (a `ValueError`) an unsupported config value, a missing config
      field, or missing, unexpected or misshapen weights.
  """
  return convert_tf1_bert(src, seq_length, residual_attention, running_mean).encoder

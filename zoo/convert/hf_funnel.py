"""Hugging Face Funnel checkpoints (`FunnelModel`, `FunnelBaseModel`) -> zoo `FunnelEncoder`.

A `FunnelForMaskedLM` or `FunnelForPreTraining` checkpoint also gives its pre-training head, and a
`FunnelForMultipleChoice` (config.json `architectures`) its `classifier`: `linear_hidden` (dense,
tanh on the encoder's first output, no decoder) is the zoo encoder's `pooler`, `linear_out` the
scoring layer of `zoo.models.MultipleChoice` (root `choice_head`). The heads of the other
`FunnelFor...` task models are refused, named.

Reads a checkpoint directory as `save_pretrained` writes it: `config.json` and the
weights, `model.safetensors` (through safetensors' numpy API, so no torch is needed) or,
in repositories from before safetensors, `pytorch_model.bin`, single or sharded
(`zoo.convert.weights`).

Axes: V vocabulary, D model width, N heads, H head width, F feed-forward width.

Where Hugging Face and the zoo differ, the converter picks the zoo options that
reproduce Hugging Face's outputs at real tokens:

- The decoder input adds `hidden_states[block_sizes[0]]` of the encoder, i.e. layer
  application `block_sizes[0] - 1` (0-based, counting repeats), not the last of
  block 0: `decoder_residual_layer=block_sizes[0] - 1`.
- Hugging Face's padding semantics (a pooling window is real only if all its tokens are;
  mean and max run over the whole window, padding included): the converted encoder keeps
  them, `pooling_semantics="huggingface"`, so it equals Hugging Face's on every input, at
  any number of real tokens. (The authors' own code, which trained the paper's
  checkpoints, makes a window real if any of its tokens is: `zoo.convert.funnel_tf`
  converts their release with theirs.)
- Hugging Face reads missing token types as all 0; the zoo always takes
  `input_type_ids` and gives the first token ([cls]) type 2, which is what Hugging
  Face's tokenizer does. With `separate_cls` the [cls] pairs carry no segment term in
  either, so only `separate_cls=False` models see the difference.
- Hugging Face's `q_head` has no bias: the zoo's query bias is set to 0.
- The zoo's `pooler` has no Hugging Face counterpart but `FunnelForMultipleChoice`'s
  `classifier.linear_hidden`: elsewhere it is initialised from a fixed seed (truncated
  normal of `initializer_range`, zero bias), so a conversion is the same bytes every time.
- In training, Hugging Face's `hidden_dropout` also drops entries of its sinusoid
  tables; the zoo's `dropout` does not. Inference is unaffected.

Repeated blocks run each layer's repeats back to back (`L0 L0 L1 L1`) in both.
"""

import dataclasses
import json
import os
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import Any

import numpy as np

from zoo.choices import HF_POOLING
from zoo.configs import FunnelConfig
from zoo.convert import weights as weight_formats
from zoo.convert.errors import ConversionError
from zoo.convert.rules import Rule
from zoo.convert.rules import flat
from zoo.convert.rules import same
from zoo.convert.rules import torch_linear
from zoo.model_dir import CHOICE_HEAD_ROOT
from zoo.model_dir import DISCRIMINATOR_HEAD_ROOT
from zoo.model_dir import MASKED_LM_ROOT

if TYPE_CHECKING:
  from zoo.models import FunnelEncoder

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX_FILE = "model.safetensors.index.json"

# Hugging Face `hidden_act` -> zoo `activation`. "gelu_new" and "gelu_pytorch_tanh"
# are both the tanh approximation; "swish" and "silu" are both x·sigmoid(x).
ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_new": "gelu_approximate",
    "gelu_pytorch_tanh": "gelu_approximate",
    "relu": "relu",
    "silu": "swish",
    "swish": "swish",
}
# Hugging Face `attention_type` -> zoo `position_encoding`.
POSITION_ENCODINGS = {"factorized": "factorized", "relative_shift": "shift"}
POOLING_TYPES = ("mean", "max")

# The config fields that shape Hugging Face's forward pass. Every other field
# (initializers, pad_token_id, architectures, ...) cannot change its outputs.
REQUIRED_FIELDS = ("vocab_size", "block_sizes", "d_model", "n_head", "d_head", "d_inner", "hidden_act",
                   "layer_norm_eps", "pooling_type", "attention_type", "separate_cls", "truncate_seq",
                   "pool_q_only", "num_decoder_layers")
# Fields Hugging Face itself fills in when absent, with its defaults.
OPTIONAL_FIELDS = dict(block_repeats=None, hidden_dropout=0.1, attention_dropout=0.1, activation_dropout=0.0)


def read_hf_config(path: str) -> dict[str, Any]:
  """Reads and checks `config.json` of a Hugging Face Funnel checkpoint directory."""
  config_path = os.path.join(path, CONFIG_FILE)
  if not os.path.isfile(config_path):
    raise ConversionError(f"{config_path}: not found; expected a Hugging Face checkpoint directory "
                          "with config.json and model.safetensors")
  with open(config_path, encoding="utf-8") as f:
    try:
      config = json.load(f)
    except json.JSONDecodeError as e:
      raise ConversionError(f"{config_path}: not valid JSON ({e})") from e
  return check_hf_config(config, config_path)


def check_hf_config(config: object, source: str = CONFIG_FILE) -> dict[str, Any]:
  """The dict of a Funnel `config.json` with Hugging Face's defaults filled in; raises a
  ConversionError naming `source` when it is no Funnel config or lacks a field."""
  if not isinstance(config, dict):
    raise ConversionError(f"{source}: not a JSON object")
  model_type = config.get("model_type")
  if model_type != "funnel":
    raise ConversionError(f"{source}: model_type must be 'funnel', got {model_type!r}")
  missing = [name for name in REQUIRED_FIELDS if name not in config]
  if missing:
    raise ConversionError(f"{source}: missing config field(s) {', '.join(missing)}")
  return {**OPTIONAL_FIELDS, **config}


def zoo_config(hf_config: Mapping[str, Any], seq_length: int | None = 512, with_decoder: bool = False,
               source: str = CONFIG_FILE) -> FunnelConfig:
  """The `FunnelConfig` equivalent to a Hugging Face Funnel config.

  Args:
    hf_config: the dict of `config.json` (see `read_hf_config`).
    seq_length: static input length of the zoo model.
    with_decoder: include the decoder (`FunnelModel`) or not (`FunnelBaseModel`).
    source: file name used in error messages.

  Raises:
    ConversionError: a field has a value the zoo cannot reproduce.
  """
  def fail(field, message):
    raise ConversionError(f"{source}: {field}={hf_config.get(field)!r} {message}")

  block_sizes = hf_config["block_sizes"]
  if not block_sizes or not all(isinstance(size, int) and size > 0 for size in block_sizes):
    fail("block_sizes", "must be a non-empty list of positive integers")
  block_repeats = hf_config["block_repeats"] or [1] * len(block_sizes)
  if len(block_repeats) != len(block_sizes) or not all(
      isinstance(repeat, int) and repeat > 0 for repeat in block_repeats):
    fail("block_repeats", f"must list one positive integer per block of block_sizes={block_sizes}")
  if hf_config["hidden_act"] not in ACTIVATIONS:
    fail("hidden_act", f"is not supported; use one of {sorted(ACTIVATIONS)}")
  if hf_config["attention_type"] not in POSITION_ENCODINGS:
    fail("attention_type", f"must be one of {sorted(POSITION_ENCODINGS)}")
  if hf_config["pooling_type"] not in POOLING_TYPES:
    fail("pooling_type", f"must be one of {list(POOLING_TYPES)}")
  for field in ("separate_cls", "truncate_seq", "pool_q_only"):
    if not isinstance(hf_config[field], bool):
      fail(field, "must be true or false")
  for field in ("vocab_size", "d_model", "n_head", "d_head", "d_inner"):
    if not isinstance(hf_config[field], int) or hf_config[field] <= 0:
      fail(field, "must be a positive integer")
  num_decoder_layers = hf_config["num_decoder_layers"]
  if not isinstance(num_decoder_layers, int) or num_decoder_layers < 0:
    fail("num_decoder_layers", "must be a non-negative integer")
  if with_decoder and num_decoder_layers == 0:
    fail("num_decoder_layers", "with the decoder: Hugging Face's FunnelModel then returns the upsampled "
         "encoder output, which zoo FunnelEncoder does not; load it without the decoder")

  return FunnelConfig(
      vocab_size=hf_config["vocab_size"],
      hidden_size=hf_config["d_model"],
      block_sizes=tuple(block_sizes),
      block_repeats=tuple(block_repeats),
      num_heads=hf_config["n_head"],
      head_size=hf_config["d_head"],
      intermediate_size=hf_config["d_inner"],
      activation=ACTIVATIONS[hf_config["hidden_act"]],
      dropout=hf_config["hidden_dropout"],
      attention_dropout=hf_config["attention_dropout"],
      activation_dropout=hf_config["activation_dropout"],
      pooling_type=hf_config["pooling_type"],
      # What Hugging Face's Funnel computes with the checkpoint.
      pooling_semantics=HF_POOLING,
      pool_q_only=hf_config["pool_q_only"],
      separate_cls=hf_config["separate_cls"],
      truncate_seq=hf_config["truncate_seq"],
      position_encoding=POSITION_ENCODINGS[hf_config["attention_type"]],
      use_segment_bias=True,
      num_decoder_layers=num_decoder_layers if with_decoder else 0,
      # Hugging Face feeds `hidden_states[block_sizes[0]]` to the decoder.
      decoder_residual_layer=block_sizes[0] - 1 if with_decoder else None,
      layer_norm_epsilon=float(hf_config["layer_norm_eps"]),
      seq_length=seq_length or 0,   # None: refused by FunnelConfig, which needs a static length
  )


def read_hf_weights(path: str) -> dict[str, np.ndarray]:
  """`{name: float32 array}` of a Hugging Face checkpoint directory, in any of its weight formats
  (`zoo.convert.weights`: `model.safetensors` or `pytorch_model.bin`, single or sharded)."""
  try:
    return weight_formats.read_weights(path)
  except weight_formats.WeightsError as error:
    raise ConversionError(str(error)) from None


def weights_source(path: str) -> str:
  """The weight file (or shard index) of a checkpoint directory, for messages."""
  try:
    weights_format, files = weight_formats.weight_files(path)
  except weight_formats.WeightsError:
    return os.path.join(path, WEIGHTS_FILE)
  return files[0] if len(files) == 1 else os.path.join(path, weights_format[1])


def _norm_entries(hf_prefix, norm):
  return [(f"{hf_prefix}.weight", norm.gamma, same()), (f"{hf_prefix}.bias", norm.beta, same())]


def _block_entries(hf_prefix, block):
  """(HF name, zoo variable, rule) for one `TransformerBlock` and its HF `FunnelLayer`."""
  attention = block.attention
  a = f"{hf_prefix}.attention"
  f = f"{hf_prefix}.ffn"
  return [
      (f"{a}.q_head.weight", attention.query_dense.kernel, torch_linear(1)),    # [N·H, D] -> [D, N, H]
      (f"{a}.k_head.weight", attention.key_dense.kernel, torch_linear(1)),
      (f"{a}.k_head.bias", attention.key_dense.bias, flat()),                   # [N·H] -> [N, H]
      (f"{a}.v_head.weight", attention.value_dense.kernel, torch_linear(1)),
      (f"{a}.v_head.bias", attention.value_dense.bias, flat()),
      (f"{a}.post_proj.weight", attention.output_dense.kernel, torch_linear(2)),  # [D, N·H] -> [N, H, D]
      (f"{a}.post_proj.bias", attention.output_dense.bias, same()),
      (f"{a}.r_w_bias", attention.content_bias, same()),
      (f"{a}.r_r_bias", attention.position_bias, same()),
      (f"{a}.r_kernel", attention.position_kernel, same()),                     # [D, N, H]
      (f"{a}.r_s_bias", attention.segment_bias, same()),
      (f"{a}.seg_embed", attention.segment_embedding, same()),                  # [2, N, H], 0 = other segment
      *_norm_entries(f"{a}.layer_norm", block.attention_norm),
      (f"{f}.linear_1.weight", block.intermediate_dense.kernel, torch_linear(1)),  # [F, D] -> [D, F]
      (f"{f}.linear_1.bias", block.intermediate_dense.bias, same()),
      (f"{f}.linear_2.weight", block.output_dense.kernel, torch_linear(1)),     # [D, F] -> [F, D]
      (f"{f}.linear_2.bias", block.output_dense.bias, same()),
      *_norm_entries(f"{f}.layer_norm", block.output_norm),
  ]


def layers(block_sizes: Sequence[int], num_decoder_layers: int) -> list[tuple[str, str]]:
  """`(HF prefix, zoo layer name)` of every Funnel layer of blocks of `block_sizes` layers and
  `num_decoder_layers` decoder layers, in order."""
  pairs = [(f"encoder.blocks.{b}.{i}", f"block_{b}_layer_{i}") for b, size in enumerate(block_sizes)
           for i in range(size)]
  return pairs + [(f"decoder.layers.{i}", f"decoder_layer_{i}") for i in range(num_decoder_layers)]


def encoder_entries(model: Any, num_decoder_layers: int | None = None) -> list[tuple[str, Any, Rule]]:
  """(HF name, zoo variable, rule) for every weight of a `FunnelEncoder` (its pooler aside), its first
  `num_decoder_layers` decoder layers' included (default all: `model.config`)."""
  config = model.config
  embeddings = model.get_layer("embeddings")
  entries = [("embeddings.word_embeddings.weight", embeddings.word_embeddings.embeddings, same()),
             *_norm_entries("embeddings.layer_norm", embeddings.norm)]
  decoder = config.num_decoder_layers if num_decoder_layers is None else num_decoder_layers
  for hf_prefix, name in layers(config.block_sizes, decoder):
    entries += _block_entries(hf_prefix, model.get_layer(name))
  return entries


def check_weights(entries: Sequence[tuple[str, Any, Rule]], weights: Mapping[str, np.ndarray], source: str,
                  is_dropped: Callable[[str], bool] = lambda name: False,
                  unexpected_hint: Callable[[list[str]], str] = lambda names: "") -> None:
  """Raises a ConversionError listing missing, unexpected and misshapen weights (every converter's check).

  Args:
    entries: `(checkpoint name, zoo variable, zoo.convert.rules.Rule)`.
    weights: `{checkpoint name: array}`.
    source: the file named in the error.
    is_dropped: names left out on purpose (not unexpected).
    unexpected_hint: text appended to the list of unexpected names.
  """
  missing = [name for name, _, _ in entries if name not in weights]
  used = {name for name, _, _ in entries}
  unexpected = sorted(name for name in weights if name not in used and not is_dropped(name))
  problems = []
  if missing:
    problems.append(f"missing weight(s): {', '.join(missing)}")
  if unexpected:
    problems.append(f"unexpected weight(s): {', '.join(unexpected)}{unexpected_hint(unexpected)}")
  for name, variable, rule in entries:
    expected = rule.expected(variable.shape)
    if name in weights and tuple(weights[name].shape) != expected:
      problems.append(f"{name} has shape {tuple(weights[name].shape)}, expected {expected} "
                      f"for {variable.name} {tuple(variable.shape)}")
  if problems:
    raise ConversionError(f"{source}: " + "; ".join(problems))


def _head_hint(unexpected):
  if any(not name.startswith(("embeddings.", "encoder.", "decoder.")) for name in unexpected):
    return (" (a head of a FunnelFor... task model? FunnelForMaskedLM's, FunnelForPreTraining's and "
            "FunnelForMultipleChoice's heads convert (config.json architectures names the class); convert "
            "another task model's FunnelModel or FunnelBaseModel)")
  return ""


def is_multiple_choice(hf_config: Mapping[str, Any]) -> bool:
  """Whether a Hugging Face config.json is a `...ForMultipleChoice` model's (its `architectures`)."""
  return any(str(name).endswith("ForMultipleChoice") for name in hf_config.get("architectures") or ())


def choice_head(weights: Mapping[str, np.ndarray], pooler: Any, pooler_names: Sequence[str],
                scorer_names: Sequence[str], source: str) -> tuple[Any, list[str]]:
  """The scoring layer of a `...ForMultipleChoice` checkpoint, a `Dense(1)` built on `[None, D]`
  (`zoo.models.MultipleChoice.scorer`, checkpoint root `choice_head`); the `pooler` of the zoo
  encoder takes the head's pooler weights when `pooler_names` (weight, bias) are given.

  Returns:
    `(scorer, names used)`.

  Raises:
    ConversionError: a weight of the head missing or misshapen.
  """
  import tf_keras as keras
  width = int(pooler.kernel.shape[0])
  scorer = keras.layers.Dense(1, dtype="float32", name="logits")
  scorer.build([None, width])
  entries = [(scorer_names[0], scorer.kernel, torch_linear(1)), (scorer_names[1], scorer.bias, same())]
  if pooler_names:
    entries = [(pooler_names[0], pooler.kernel, torch_linear(1)), (pooler_names[1], pooler.bias, same()),
               *entries]
  names = [name for name, _, _ in entries]
  try:
    check_weights(entries, {name: weights[name] for name in names if name in weights}, source)
  except ConversionError as error:
    raise ConversionError(f"{error} (the multiple-choice head)") from None
  for name, variable, rule in entries:
    variable.assign(rule.to_zoo(np.asarray(weights[name], np.float32), tuple(variable.shape)))
  return scorer, names


def assign_hf_weights(model: Any, weights: Mapping[str, np.ndarray], source: str = WEIGHTS_FILE,
                      skip_prefixes: tuple[str, ...] = (), initializer_range: float | None = None) -> None:
  """Copies Hugging Face weights into a `FunnelEncoder` (either edition's); the pooler, which Hugging Face's
  base model lacks, is initialised deterministically with `initializer_range` (default the encoder's).

  Every weight must be used exactly once (those under `skip_prefixes` are dropped on
  purpose) and every zoo variable but the pooler's and the query biases (which Hugging
  Face does not have; they are set to 0) must receive one.

  Raises:
    ConversionError: missing, unexpected or misshapen weights, listed by name.
  """
  entries = encoder_entries(model)
  check_weights(entries, weights, source, is_dropped=lambda name: name.startswith(skip_prefixes),
                unexpected_hint=_head_hint)
  for name, variable, rule in entries:
    variable.assign(rule.to_zoo(weights[name], tuple(variable.shape)))
  query_biases = [layer.attention.query_dense.bias for layer in model.layers
                  if layer.name.startswith(("block_", "decoder_layer_"))]
  for bias in query_biases:
    bias.assign(np.zeros(bias.shape, np.float32))

  pooler_layer = model.get_layer("pooler")
  initialize_deterministically(pooler_layer, float(initializer_range or model.config.initializer_range))
  assigned = {id(v) for _, v, _ in entries} | {id(v) for v in query_biases}
  pooler = {id(v) for v in pooler_layer.weights}
  left = [v.name for v in model.weights if id(v) not in assigned | pooler]
  if left:   # a FunnelEncoder variable this converter does not know about
    raise ConversionError(f"{source}: no Hugging Face weight for zoo variable(s) {', '.join(left)}")


def initialize_deterministically(dense: Any, stddev: float, seed: int = 0) -> None:
  """A dense layer the checkpoint has no weights for, initialised from a fixed seed: a truncated
  normal kernel of `stddev` and a zero bias, so every conversion of a checkpoint writes the
  same bytes."""
  import tensorflow as tf
  kernel = tf.random.stateless_truncated_normal(tuple(dense.kernel.shape), seed=[seed, 0], stddev=stddev)
  dense.kernel.assign(kernel.numpy())   # numpy: a Keras 3 layer's variables take it on any backend
  dense.bias.assign(np.zeros(tuple(dense.bias.shape), np.float32))


# Heads of Hugging Face's Funnel pre-training models, whose encoder sits under `funnel.`:
# FunnelForMaskedLM's one linear layer to the vocabulary, tied to the word embeddings, and
# FunnelForPreTraining's ELECTRA discriminator (a dense layer with the encoder's activation,
# then one logit per token).
MASKED_LM_HEAD = "lm_head."
DISCRIMINATOR_HEAD = "discriminator_predictions."
PRETRAINING_HEADS = (MASKED_LM_HEAD, DISCRIMINATOR_HEAD)
# FunnelForMultipleChoice's FunnelClassificationHead: linear_hidden (tanh), then linear_out to one score.
CHOICE_HEAD = "classifier."
CHOICE_POOLER = (f"{CHOICE_HEAD}linear_hidden.weight", f"{CHOICE_HEAD}linear_hidden.bias")
CHOICE_SCORER = (f"{CHOICE_HEAD}linear_out.weight", f"{CHOICE_HEAD}linear_out.bias")


@dataclasses.dataclass
class ConvertedFunnel:
  """`encoder`; `heads`, `{checkpoint root: head}` (`masked_lm`, `discriminator_head` or
  `choice_head`); `settings`, the config.json settings the heads need (`tpu.tasks` settings of mlm
  and electra); `dropped`, weights left out on purpose."""

  encoder: Any
  heads: dict
  settings: dict
  dropped: list


def convert_hf_funnel(path: str, seq_length: int | None = 512, with_decoder: bool | None = None
                      ) -> ConvertedFunnel:
  """A `ConvertedFunnel` of a Hugging Face Funnel directory; see `load_hf_funnel`.

  A `FunnelForMaskedLM` or `FunnelForPreTraining` checkpoint converts its `funnel.`
  encoder and its head: the masked-LM head into a `zoo.models.MaskedLMHead` without
  transform (root `masked_lm`, setting `mlm_transform: false`), the discriminator into
  the head `zoo.models.ElectraPretrainer` keeps (root `discriminator_head`, setting
  `head_activation`, the encoder's activation). A `FunnelForMultipleChoice` checkpoint (so
  named by config.json `architectures`) converts its `FunnelBaseModel` and its classifier:
  `linear_hidden` into the encoder's `pooler`, `linear_out` into the scoring layer of
  `zoo.models.MultipleChoice` (root `choice_head`).
  """
  hf_config = read_hf_config(path)
  weights = read_hf_weights(path)
  head_weights = {}
  multiple_choice = is_multiple_choice(hf_config)
  known_heads = PRETRAINING_HEADS + ((CHOICE_HEAD,) if multiple_choice else ())
  if any(name.startswith("funnel.") for name in weights):
    head_weights = {name: value for name, value in weights.items() if name.startswith(known_heads)}
    weights = {name[len("funnel."):] if name.startswith("funnel.") else name: value
               for name, value in weights.items() if name not in head_weights}
  has_decoder = any(name.startswith("decoder.") for name in weights)
  if with_decoder is None:
    with_decoder = has_decoder or "FunnelModel" in (hf_config.get("architectures") or ())
  # Imported here: the rules above serve the Keras 3 edition too, which never loads tf_keras.
  from zoo.models import FunnelEncoder
  config = zoo_config(hf_config, seq_length, with_decoder, source=os.path.join(path, CONFIG_FILE))
  model = FunnelEncoder(config)
  skip = () if with_decoder else ("decoder.",)
  source = weights_source(path)
  assign_hf_weights(model, weights, source=source, skip_prefixes=skip)
  heads, settings, dropped = {}, {}, []
  if any(name.startswith(MASKED_LM_HEAD) for name in head_weights):
    heads[MASKED_LM_ROOT], settings = _masked_lm_head(model, head_weights, hf_config, source, with_decoder)
  elif any(name.startswith(DISCRIMINATOR_HEAD) for name in head_weights):
    heads[DISCRIMINATOR_HEAD_ROOT] = _discriminator_head(model, head_weights, config, source, with_decoder)
    settings = dict(head_activation=config.activation)
  if not with_decoder:
    dropped = sorted(name for name in head_weights)   # a head without the full-length output it reads
    heads, settings = {}, {}
  if multiple_choice:   # reads the encoder's first output, without the decoder
    if not head_weights:
      raise ConversionError(f"{source}: config.json says {hf_config['architectures']}, but the checkpoint "
                            f"has no {CHOICE_HEAD} weights (the multiple-choice head)")
    heads[CHOICE_HEAD_ROOT], used = choice_head(head_weights, model.get_layer("pooler"), CHOICE_POOLER,
                                                CHOICE_SCORER, source)
    dropped = [name for name in dropped if name not in used]
    unexpected = sorted(name for name in head_weights if name not in used)
    if unexpected:
      raise ConversionError(f"{source}: unexpected weight(s): {', '.join(unexpected)}")
  return ConvertedFunnel(model, heads, settings, dropped)


def _masked_lm_head(encoder, weights, hf_config, source, with_decoder):
  """FunnelForMaskedLM's `lm_head`: logits = decoder output · word embeddingsᵀ + bias."""
  import tensorflow as tf

  from zoo.models.heads import MaskedLMHead
  if not with_decoder:
    return None, {}
  table = encoder.get_embedding_table()
  tied = weights.get(MASKED_LM_HEAD + "weight")
  if tied is not None and not np.array_equal(tied, table.numpy()):
    raise ConversionError(f"{source}: lm_head.weight is not tied to the word embeddings "
                          "(tie_word_embeddings=false): the zoo's masked-LM head shares the embedding table")
  if not hf_config.get("tie_word_embeddings", True) and tied is None:
    raise ConversionError(f"{source}: tie_word_embeddings is false but lm_head.weight is missing")
  bias = weights.get(MASKED_LM_HEAD + "bias")
  if bias is None or bias.shape != (table.shape[0],):
    raise ConversionError(f"{source}: lm_head.bias must be a vector of the vocabulary size {table.shape[0]}, "
                          f"got {None if bias is None else bias.shape}")
  head = MaskedLMHead(table, transform=False, name="masked_lm")
  head(tf.zeros([1, 1, table.shape[1]]), masked_positions=tf.zeros([1, 1], tf.int32))
  head.bias.assign(bias)
  return head, dict(mlm_transform=False)


def _discriminator_head(encoder, weights, config, source, with_decoder):
  """FunnelForPreTraining's `discriminator_predictions`: dense (activation), then one logit."""
  import tensorflow as tf
  import tf_keras as keras

  from zoo.models.pretrainers import discriminator_head
  from zoo.models.pretrainers import head_activation
  width = config.hidden_size
  transform = keras.layers.Dense(width, activation=head_activation(config.activation),
                                 name="discriminator_transform")
  logits = keras.layers.Dense(1, dtype="float32", name="discriminator_logits")
  logits(transform(tf.zeros([1, width])))
  names = {f"{DISCRIMINATOR_HEAD}dense.weight": (transform.kernel, (width, width)),
           f"{DISCRIMINATOR_HEAD}dense.bias": (transform.bias, (width,)),
           f"{DISCRIMINATOR_HEAD}dense_prediction.weight": (logits.kernel, (1, width)),
           f"{DISCRIMINATOR_HEAD}dense_prediction.bias": (logits.bias, (1,))}
  problems = [f"{name}: missing" if name not in weights else f"{name} has shape {weights[name].shape}, "
              f"expected {shape}" for name, (_, shape) in names.items()
              if name not in weights or weights[name].shape != shape]
  unexpected = sorted(set(weights) - set(names))
  if problems or unexpected:
    raise ConversionError(f"{source}: the discriminator head does not convert: "
                          + "; ".join(problems + [f"unexpected {name}" for name in unexpected]))
  for name, (variable, _) in names.items():
    value = weights[name]
    variable.assign(value.T if name.endswith("weight") else value)   # torch Linear: [out, in]
  return discriminator_head(transform, logits)


def load_hf_funnel(path: str, seq_length: int | None = 512, with_decoder: bool | None = None
                   ) -> "FunnelEncoder":
  """Loads a Hugging Face Funnel checkpoint directory as a zoo `FunnelEncoder`.

  The model's `sequence_output` equals Hugging Face's `last_hidden_state` at real
  tokens (float32, to ~1e-5), for padding aligned to the pooling windows and token
  types with [cls] = 2 (see the module docstring for why those conditions).

  Args:
    path: directory with `config.json` and `model.safetensors`, as written by
      `FunnelModel.save_pretrained(path, safe_serialization=True)` (or by a
      `FunnelForMaskedLM` / `FunnelForPreTraining`: its head is dropped).
    seq_length: static input length of the zoo model.
    with_decoder: build the decoder (`FunnelModel`) or not (`FunnelBaseModel`). None:
      when the checkpoint has decoder weights or says it is a `FunnelModel`. False
      on a checkpoint with a decoder drops its weights on purpose.

  Returns:
    A `FunnelEncoder` with the checkpoint's weights.

  Raises:
    ConversionError: (a `ValueError`) an unsupported config value, a missing config
      field, or missing, unexpected or misshapen weights.

  Example:

      model = FunnelModel(FunnelConfig(...))               # Hugging Face, PyTorch
      model.save_pretrained("funnel", safe_serialization=True)
      encoder = load_hf_funnel("funnel", seq_length=128)   # zoo, no torch needed
      outputs = encoder(dict(input_word_ids=ids, input_mask=mask, input_type_ids=types))
  """
  return convert_hf_funnel(path, seq_length, with_decoder).encoder

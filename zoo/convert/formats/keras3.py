"""`keras3`: a model trained in the Keras 3 edition into a zoo model directory (tf_keras).

SRC is what `zoo.keras3.weights_dir.save_weights_dir` writes: `config.json` (format
`zoo-keras3-weights/1`: the family, the encoder's constructor arguments, the heads'
settings and the tokenizer's), `vocab.txt` and `model.safetensors` (every weight under
its name in both editions, the masked-LM head's under `masked_lm/`). The tf_keras
encoder is built from the same arguments and given every weight by name
(`zoo.named_weights`: a weight missing, left over or misshapen is an error naming it);
a masked-LM head makes the directory a masked-LM run's, as `python -m tpu.train --task mlm`
writes it: `config.json` with the task and its settings `mlm_transform` and
`head_activation`, the checkpoint with the `zoo.models.MaskedLMPretrainer` (root `model`)
and its encoder and head (roots `encoder`, `masked_lm`). An ELECTRA task's directory (its
generator under `generator/`, the generator's head under `generator_masked_lm/`, the
discriminator's under `discriminator_head/`) becomes an ELECTRA run's: the task `electra`
with `discriminator_weight` and the generator's arguments as `generator_overrides`, the
checkpoint with the `zoo.models.ElectraPretrainer` and its roots (`encoder` the
discriminator, `discriminator_head`, `generator`, `generator_masked_lm`). The directory
exports with `python -m export.saved_model` (the discriminator's encoder) and continues
pre-training or fine-tunes with `python -m tpu.train --init-checkpoint`.
"""

from zoo.convert import registry
from zoo.convert.registry import ConvertedCheckpoint

FORMAT_NAME = "zoo-keras3-weights/1"
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"


def _arguments(parser):
  registry.add_import_arguments(parser, "a directory written by zoo.keras3.weights_dir.save_weights_dir",
                                seq_length_default=None,
                                seq_length_help="static input length of the zoo model (default: the Keras 3 "
                                                "model's)")


def read(src: str, *, seq_length: int | None = None) -> ConvertedCheckpoint:
  """The `ConvertedCheckpoint` of a Keras 3 weights directory."""
  from safetensors.numpy import load_file

  from zoo.model_dir import MASKED_LM_ROOT

  config, config_path, weights_path = _read_config(src)
  arrays = load_file(weights_path)
  encoder_class = _encoder_classes()[config["family"]]
  encoder = encoder_class(_encoder_config(encoder_class, config["encoder_config"], seq_length))
  heads_config = config.get("heads") or {}
  electra = config.get("generator_config") is not None
  _check_heads(heads_config, electra, config_path)
  _assign(encoder, _encoder_arrays(arrays), weights_path)
  heads, settings = {}, {}
  if electra:   # an ELECTRA run: its model, as `tpu.train --task electra` saves it
    heads, settings = _electra_run(config, heads_config, encoder, arrays, seq_length, weights_path)
  elif MASKED_LM_ROOT in heads_config:   # a masked-LM run: its model, as `tpu.train --task mlm` saves it
    heads, settings = _masked_lm_run(heads_config[MASKED_LM_ROOT], encoder, arrays, weights_path)
  lower_case, tokenizer, vocab_path = _tokenizer(src, config)
  source = dict(format_written=FORMAT_NAME)
  return ConvertedCheckpoint(encoder, heads, lower_case, tokenizer, vocab_path, source, settings)


def _encoder_classes():
  """{family: tf_keras encoder class}."""
  from zoo.models import FunnelEncoder
  from zoo.models import TransformerEncoder
  return {"funnel": FunnelEncoder, "transformer": TransformerEncoder}


def _read_config(src):
  """`(config, config path, weights path)` of the directory `src`, whose config.json must be of
  FORMAT_NAME and name a known family, and whose weights file must exist."""
  import os

  from zoo.convert.errors import ConversionError
  from zoo.convert.tokenizer_files import read_json_object
  config_path, weights_path = os.path.join(src, CONFIG_FILE), os.path.join(src, WEIGHTS_FILE)
  config = read_json_object(config_path)
  if config.get("format") != FORMAT_NAME:
    raise ConversionError(f"{config_path}: format {config.get('format')!r} is not {FORMAT_NAME!r}: write the "
                          "directory with zoo.keras3.weights_dir.save_weights_dir")
  classes = _encoder_classes()
  if config.get("family") not in classes:
    raise ConversionError(f"{config_path}: family {config.get('family')!r} is not one of {sorted(classes)}")
  if not os.path.isfile(weights_path):
    raise FileNotFoundError(f"{src} holds no {WEIGHTS_FILE}")
  return config, config_path, weights_path


def _check_heads(heads_config, electra, config_path):
  """Raises unless every head the config names has a tf_keras counterpart (an ELECTRA task's, or a
  masked-LM head)."""
  from zoo.convert.errors import ConversionError
  from zoo.model_dir import DISCRIMINATOR_HEAD_ROOT
  from zoo.model_dir import GENERATOR_MASKED_LM_ROOT
  from zoo.model_dir import MASKED_LM_ROOT
  known = {DISCRIMINATOR_HEAD_ROOT, GENERATOR_MASKED_LM_ROOT} if electra else {MASKED_LM_ROOT}
  unknown = sorted(set(heads_config) - known)
  if unknown:
    raise ConversionError(f"{config_path}: heads {unknown} have no tf_keras counterpart here (known: "
                          f"{', '.join(sorted(known))})")


def _encoder_arrays(arrays):
  """The arrays of the encoder: all but the heads' and the generator's."""
  from zoo.model_dir import DISCRIMINATOR_HEAD_ROOT
  from zoo.model_dir import GENERATOR_MASKED_LM_ROOT
  from zoo.model_dir import GENERATOR_ROOT
  from zoo.model_dir import MASKED_LM_ROOT
  prefixes = tuple(f"{root}/" for root in (MASKED_LM_ROOT, GENERATOR_ROOT, GENERATOR_MASKED_LM_ROOT,
                                           DISCRIMINATOR_HEAD_ROOT))
  return {key: value for key, value in arrays.items() if not key.startswith(prefixes)}


def _electra_run(config, heads_config, encoder, arrays, seq_length, weights_path):
  """`(heads, settings)` of an ELECTRA run: the generator and the heads with their weights, the
  `zoo.models.ElectraPretrainer` (root `model`), and the task's settings."""
  from zoo.model_dir import DISCRIMINATOR_HEAD_ROOT
  from zoo.model_dir import GENERATOR_MASKED_LM_ROOT
  from zoo.model_dir import GENERATOR_ROOT
  from zoo.model_dir import MODEL_ROOT
  from zoo.models.pretrainers import ElectraPretrainer
  from zoo.models.pretrainers import discriminator_head
  generator_class = _encoder_classes()[config["family"]]
  generator = generator_class(_encoder_config(generator_class, config["generator_config"], seq_length))
  head_settings = heads_config[GENERATOR_MASKED_LM_ROOT]
  activation, transform = head_settings["activation"], bool(head_settings["mlm_transform"])
  weight = float(config.get("discriminator_weight", 50.0))
  model = ElectraPretrainer(generator, encoder, discriminator_weight=weight, activation=activation,
                            mlm_transform=transform, name="electra")
  _assign(generator, {key[len(GENERATOR_ROOT) + 1:]: value for key, value in arrays.items()
                      if key.startswith(f"{GENERATOR_ROOT}/")}, weights_path)
  _assign_head(model.masked_lm, encoder.get_embedding_table(), arrays, GENERATOR_MASKED_LM_ROOT,
               weights_path)
  for part, layer in (("transform", model.disc_transform), ("logits", model.disc_scores)):
    for name in ("kernel", "bias"):
      _assign_array(getattr(layer, name), arrays, f"{DISCRIMINATOR_HEAD_ROOT}/{part}/{name}", weights_path)
  heads = {DISCRIMINATOR_HEAD_ROOT: discriminator_head(model.disc_transform, model.disc_scores),
           GENERATOR_ROOT: generator, GENERATOR_MASKED_LM_ROOT: model.masked_lm, MODEL_ROOT: model}
  # The generator's arguments as the training job's `generator_overrides` (over its quarter-width default).
  quarter = ("hidden_size", "num_heads", "intermediate_size", "embedding_width")
  overrides = {key: value for key, value in generator.get_config().items()
               if key != "name" and (key in quarter or value != encoder.get_config().get(key))}
  settings = dict(task="electra", mlm_transform=transform, head_activation=activation,
                  discriminator_weight=weight, generator_overrides=_jsonable(overrides))
  return heads, settings


def _masked_lm_run(head_settings, encoder, arrays, weights_path):
  """`(heads, settings)` of a masked-LM run: the head with its weights, the
  `zoo.models.MaskedLMPretrainer` (root `model`), and the task's settings."""
  from zoo.model_dir import MASKED_LM_ROOT
  from zoo.model_dir import MODEL_ROOT
  from zoo.models.pretrainers import MaskedLMPretrainer
  activation, transform = head_settings["activation"], bool(head_settings["mlm_transform"])
  pretrainer = MaskedLMPretrainer(encoder, activation=activation, mlm_transform=transform,
                                  name="pretrainer")
  _assign_head(pretrainer.masked_lm, encoder.get_embedding_table(), arrays, MASKED_LM_ROOT, weights_path)
  heads = {MASKED_LM_ROOT: pretrainer.masked_lm, MODEL_ROOT: pretrainer}
  return heads, dict(task="mlm", mlm_transform=transform, head_activation=activation)


def _tokenizer(src, config):
  """`(lower_case, tokenizer settings or None, vocab path)` of the directory's tokenizer."""
  import os
  tokenizer_config = config.get("tokenizer") or {}
  vocab_path = os.path.join(src, "vocab.txt")
  if not os.path.isfile(vocab_path):
    raise FileNotFoundError(f"{src} holds no vocab.txt (save the task with its preprocessor)")
  special_tokens = tokenizer_config.get("special_tokens")
  tokenizer = dict(special_tokens=special_tokens) if special_tokens else None
  return bool(tokenizer_config.get("lower_case", True)), tokenizer, vocab_path


def _encoder_config(encoder_class, encoder_config, seq_length):
  """The family's configuration (`zoo.configs`) of a saved `encoder_config` dict, at `seq_length` if given."""
  config = encoder_class.config_class.from_dict(encoder_config, ignore=("dtype",))
  return config if seq_length is None else config.replace(seq_length=seq_length)


def _jsonable(config):
  return {key: list(value) if isinstance(value, tuple) else value for key, value in config.items()}


def _assign(model, arrays, source):
  from zoo.convert.errors import ConversionError
  from zoo.named_weights import WeightMismatch
  from zoo.named_weights import assign_named_arrays
  try:
    assign_named_arrays(model, arrays, source=source)
  except WeightMismatch as error:
    raise ConversionError(str(error)) from None


def _assign_array(variable, arrays, key, source):
  from zoo.convert.errors import ConversionError
  if key not in arrays:
    raise ConversionError(f"{source} holds no {key}")
  if tuple(arrays[key].shape) != tuple(variable.shape):
    raise ConversionError(f"{source}: {key} has shape {arrays[key].shape}, expected {tuple(variable.shape)}")
  variable.assign(arrays[key])


def _assign_head(head, table, arrays, root, source):
  """The masked-LM head's own weights (not the shared table) from the arrays under `root/`."""
  from zoo.convert.errors import ConversionError
  own = [weight for weight in head.weights if weight is not table]
  expected = {weight.name.split(":")[0]: weight for weight in own}
  given = sorted(key for key in arrays if key.startswith(f"{root}/"))
  if sorted(expected) != given:
    raise ConversionError(f"{source}: the masked-LM head's weights {given} are not {sorted(expected)}")
  for name, weight in expected.items():
    _assign_array(weight, arrays, name, source)


FORMAT = registry.Format(
    name="keras3", direction="in", order=5, src_files=(CONFIG_FILE,),
    expects=f"a directory written by zoo.keras3.weights_dir.save_weights_dir ({CONFIG_FILE}, {WEIGHTS_FILE}, "
            "vocab.txt)",
    help="a model trained in the Keras 3 edition (zoo.keras3.weights_dir.save_weights_dir)",
    description="Convert a directory written by zoo.keras3.weights_dir.save_weights_dir (config.json, "
                "model.safetensors, vocab.txt) into a zoo model directory: the tf_keras encoder and, by "
                "weight name, its masked-LM head or its ELECTRA generator and heads.",
    add_arguments=_arguments, read=read,
    options=lambda args: {})

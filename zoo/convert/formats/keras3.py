"""`keras3`: a model trained in the Keras 3 edition into a zoo model directory (tf_keras).

SRC is what `zoo.keras3.pretraining.save_weights_dir` writes: `config.json` (format
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
from zoo.convert.model_dir_writer import run_import

FORMAT_NAME = "zoo-keras3-weights/1"
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"


def _arguments(parser):
  registry.add_import_arguments(parser, "a directory written by zoo.keras3.pretraining.save_weights_dir",
                                seq_length_default=None,
                                seq_length_help="static input length of the zoo model (default: the Keras 3 "
                                                "model's)")


def read(src, *, seq_length=None):
  """The `ConvertedCheckpoint` of a Keras 3 weights directory."""
  import os

  from safetensors.numpy import load_file

  from zoo.convert.errors import ConversionError
  from zoo.convert.model_dir_writer import ConvertedCheckpoint
  from zoo.convert.tokenizer_files import read_json_object
  from zoo.model_dir import DISCRIMINATOR_HEAD_ROOT
  from zoo.model_dir import GENERATOR_MASKED_LM_ROOT
  from zoo.model_dir import GENERATOR_ROOT
  from zoo.model_dir import MASKED_LM_ROOT
  from zoo.model_dir import MODEL_ROOT
  from zoo.models import FunnelEncoder
  from zoo.models import TransformerEncoder
  from zoo.models.pretrainers import ElectraPretrainer
  from zoo.models.pretrainers import MaskedLMPretrainer
  from zoo.models.pretrainers import discriminator_head

  config_path, weights_path = os.path.join(src, CONFIG_FILE), os.path.join(src, WEIGHTS_FILE)
  config = read_json_object(config_path)
  if config.get("format") != FORMAT_NAME:
    raise ConversionError(f"{config_path}: format {config.get('format')!r} is not {FORMAT_NAME!r}: write the "
                          "directory with zoo.keras3.pretraining.save_weights_dir")
  classes = {"funnel": FunnelEncoder, "transformer": TransformerEncoder}
  if config.get("family") not in classes:
    raise ConversionError(f"{config_path}: family {config.get('family')!r} is not one of {sorted(classes)}")
  if not os.path.isfile(weights_path):
    raise FileNotFoundError(f"{src} holds no {WEIGHTS_FILE}")
  arrays = load_file(weights_path)
  arguments = _encoder_arguments(config["encoder_config"], seq_length)
  encoder = classes[config["family"]](**arguments)
  heads_config = config.get("heads") or {}
  electra = config.get("generator_config") is not None
  known = {DISCRIMINATOR_HEAD_ROOT, GENERATOR_MASKED_LM_ROOT} if electra else {MASKED_LM_ROOT}
  unknown = sorted(set(heads_config) - known)
  if unknown:
    raise ConversionError(f"{config_path}: heads {unknown} have no tf_keras counterpart here (known: "
                          f"{', '.join(sorted(known))})")
  prefixes = tuple(f"{root}/" for root in (MASKED_LM_ROOT, GENERATOR_ROOT, GENERATOR_MASKED_LM_ROOT,
                                           DISCRIMINATOR_HEAD_ROOT))
  _assign(encoder, {key: value for key, value in arrays.items() if not key.startswith(prefixes)},
          weights_path)
  heads, settings = {}, {}
  if electra:   # an ELECTRA run: its model, as `tpu.train --task electra` saves it
    generator_arguments = _encoder_arguments(config["generator_config"], seq_length)
    generator = classes[config["family"]](**generator_arguments)
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
  elif MASKED_LM_ROOT in heads_config:   # a masked-LM run: its model, as `tpu.train --task mlm` saves it
    head_settings = heads_config[MASKED_LM_ROOT]
    activation, transform = head_settings["activation"], bool(head_settings["mlm_transform"])
    pretrainer = MaskedLMPretrainer(encoder, activation=activation, mlm_transform=transform,
                                    name="pretrainer")
    _assign_head(pretrainer.masked_lm, encoder.get_embedding_table(), arrays, MASKED_LM_ROOT, weights_path)
    heads = {MASKED_LM_ROOT: pretrainer.masked_lm, MODEL_ROOT: pretrainer}
    settings = dict(task="mlm", mlm_transform=transform, head_activation=activation)
  tokenizer_config = config.get("tokenizer") or {}
  vocab_path = os.path.join(src, "vocab.txt")
  if not os.path.isfile(vocab_path):
    raise FileNotFoundError(f"{src} holds no vocab.txt (save the task with its preprocessor)")
  special_tokens = tokenizer_config.get("special_tokens")
  tokenizer = dict(special_tokens=special_tokens) if special_tokens else None
  source = dict(format_written=FORMAT_NAME)
  return ConvertedCheckpoint(encoder, heads, bool(tokenizer_config.get("lower_case", True)), tokenizer,
                             vocab_path, source, settings)


def _encoder_arguments(encoder_config, seq_length):
  arguments = dict(encoder_config)
  for key in ("block_sizes", "block_repeats"):
    if arguments.get(key) is not None:
      arguments[key] = tuple(arguments[key])
  if seq_length is not None:
    arguments["seq_length"] = seq_length
  return arguments


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
    name="keras3", direction="in", order=5,
    help="a model trained in the Keras 3 edition (zoo.keras3.pretraining.save_weights_dir)",
    description="Convert a directory written by zoo.keras3.pretraining.save_weights_dir (config.json, "
                "model.safetensors, vocab.txt) into a zoo model directory: the tf_keras encoder and, by "
                "weight name, its masked-LM head or its ELECTRA generator and heads.",
    add_arguments=_arguments, run=run_import, read=read,
    options=lambda args: {})

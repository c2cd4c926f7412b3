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
and its encoder and head (roots `encoder`, `masked_lm`). The directory exports with
`python -m export.saved_model` and continues pre-training or fine-tunes with
`python -m tpu.train --init-checkpoint`.
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
  from zoo.model_dir import MASKED_LM_ROOT
  from zoo.model_dir import MODEL_ROOT
  from zoo.models import FunnelEncoder
  from zoo.models import TransformerEncoder
  from zoo.models.pretrainers import MaskedLMPretrainer
  from zoo.named_weights import WeightMismatch
  from zoo.named_weights import assign_named_arrays

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
  arguments = dict(config["encoder_config"])
  for key in ("block_sizes", "block_repeats"):
    if arguments.get(key) is not None:
      arguments[key] = tuple(arguments[key])
  if seq_length is not None:
    arguments["seq_length"] = seq_length
  encoder = classes[config["family"]](**arguments)
  prefix = f"{MASKED_LM_ROOT}/"
  try:
    assign_named_arrays(encoder, {key: value for key, value in arrays.items() if not key.startswith(prefix)},
                        source=weights_path)
  except WeightMismatch as error:
    raise ConversionError(str(error)) from None
  heads, settings = {}, {}
  unknown = sorted(set(config.get("heads") or {}) - {MASKED_LM_ROOT})
  if unknown:
    raise ConversionError(f"{config_path}: heads {unknown} have no tf_keras counterpart here (known: "
                          f"{MASKED_LM_ROOT})")
  head_settings = (config.get("heads") or {}).get(MASKED_LM_ROOT)
  if head_settings is not None:   # a masked-LM run: its model, as `tpu.train --task mlm` saves it
    activation, transform = head_settings["activation"], bool(head_settings["mlm_transform"])
    table = encoder.get_embedding_table()
    pretrainer = MaskedLMPretrainer(encoder, activation=activation, mlm_transform=transform,
                                    name="pretrainer")
    head = pretrainer.masked_lm
    own = [weight for weight in head.weights if weight is not table]
    expected = {weight.name.split(":")[0]: weight for weight in own}
    given = {key: value for key, value in arrays.items() if key.startswith(prefix)}
    if sorted(expected) != sorted(given):
      raise ConversionError(f"{weights_path}: the masked-LM head's weights {sorted(given)} are not "
                            f"{sorted(expected)}")
    for name, weight in expected.items():
      if tuple(given[name].shape) != tuple(weight.shape):
        raise ConversionError(f"{weights_path}: {name} has shape {given[name].shape}, expected "
                              f"{tuple(weight.shape)}")
      weight.assign(given[name])
    heads = {MASKED_LM_ROOT: head, MODEL_ROOT: pretrainer}
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


FORMAT = registry.Format(
    name="keras3", direction="in", order=5,
    help="a model trained in the Keras 3 edition (zoo.keras3.pretraining.save_weights_dir)",
    description="Convert a directory written by zoo.keras3.pretraining.save_weights_dir (config.json, "
                "model.safetensors, vocab.txt) into a zoo model directory: the tf_keras encoder and its "
                "masked-LM head, by weight name.",
    add_arguments=_arguments, run=run_import, read=read,
    options=lambda args: {})

"""Converts a published checkpoint into a zoo model directory.

    python -m zoo.convert hf-funnel SRC --out DIR [--seq-length N] [--with-decoder | --without-decoder]

writes DIR in the layout of `zoo.model_dir` (the one training runs use):

- `config.json`: the preset closest to the checkpoint and the overrides that make it
  exact (`model`, `model_overrides`), `seq_length`, `vocab_size` and `lower_case`, so
  `python -m tpu.train --init-checkpoint DIR` rebuilds the exact encoder without `--model`;
- `checkpoints/ckpt-1.*` and the `checkpoint` state file: `tf.train.Checkpoint(model=encoder)`
  saved by `tf.train.CheckpointManager`, which records it only once it is complete;
- `vocab.txt`, copied from SRC when it has one (Hugging Face Funnel checkpoints do);
- `source.json`: the format and path converted from.

Errors (unsupported config values, missing fields, missing or unexpected weights) go
to stderr and the exit status is 1.
"""

import argparse
import json
import os
import sys

FORMATS = ("hf-funnel",)


def describe(encoder, seq_length, lower_case):
  """The `config.json` settings that rebuild `encoder` with `zoo.presets.build`."""
  from zoo import presets
  model, overrides = presets.match(type(encoder).__name__, encoder.get_config())
  return dict(model=model, model_overrides=overrides, seq_length=seq_length,
              vocab_size=encoder.get_config()["vocab_size"], lower_case=lower_case)


def hf_lower_case(src):
  """`do_lower_case` of a Hugging Face tokenizer config beside the weights (default True)."""
  path = os.path.join(src, "tokenizer_config.json")
  if not os.path.exists(path):
    return True
  with open(path, encoding="utf-8") as file:
    return bool(json.load(file).get("do_lower_case", True))


def write_model_dir(encoder, directory, *, seq_length, lower_case, source, vocab=None):
  """Writes a converted encoder as a model directory; returns the checkpoint prefix."""
  import tensorflow as tf

  from zoo.model_dir import ModelDir
  model_dir = ModelDir(directory)
  model_dir.makedirs()
  if vocab is not None:
    model_dir.copy_vocab_from(vocab)
  model_dir.write_source(source)
  manager = model_dir.checkpoint_manager(tf.train.Checkpoint(model=encoder), max_to_keep=1)
  prefix = manager.save(checkpoint_number=1)
  # config.json last: a directory with a config is complete.
  model_dir.write_config(describe(encoder, seq_length, lower_case))
  return prefix


def parser():
  p = argparse.ArgumentParser(
      prog="python -m zoo.convert", description="Convert a published checkpoint into a zoo model directory.")
  formats = p.add_subparsers(dest="format", required=True, metavar="FORMAT")
  funnel = formats.add_parser(
      "hf-funnel", help="a Hugging Face FunnelModel or FunnelBaseModel checkpoint directory",
      description="Convert a Hugging Face Funnel checkpoint directory (config.json and model.safetensors) "
                  "into a zoo model directory.")
  funnel.add_argument("src", metavar="SRC", help="Hugging Face checkpoint directory")
  funnel.add_argument("--out", required=True, metavar="DIR", help="the model directory to write")
  funnel.add_argument("--seq-length", type=int, default=512, metavar="N",
                      help="static input length of the zoo model (default: %(default)s)")
  decoder = funnel.add_mutually_exclusive_group()
  decoder.add_argument("--with-decoder", dest="with_decoder", action="store_const", const=True,
                       help="build the decoder (default: when the checkpoint has one)")
  decoder.add_argument("--without-decoder", dest="with_decoder", action="store_const", const=False,
                       help="leave the decoder out, dropping its weights")
  p.add_argument("-v", "--verbose", action="store_true", help="show TensorFlow's log lines")
  return p


def main(argv=None):
  args = parser().parse_args(argv)
  from zoo.logs import quiet_tensorflow
  quiet_tensorflow(args.verbose)
  from zoo.convert.hf_funnel import load_hf_funnel
  try:
    encoder = load_hf_funnel(args.src, seq_length=args.seq_length, with_decoder=args.with_decoder)
    vocab = os.path.join(args.src, "vocab.txt")
    source = dict(format=args.format, path=os.path.abspath(args.src))
    prefix = write_model_dir(encoder, args.out, seq_length=args.seq_length,
                             lower_case=hf_lower_case(args.src), source=source,
                             vocab=vocab if os.path.exists(vocab) else None)
  except (ValueError, FileNotFoundError) as e:   # ConversionError, a seq_length too short, a bad vocabulary
    print(f"zoo.convert: error: {e}", file=sys.stderr)
    return 1
  print(f"wrote {args.out} (checkpoint {prefix})")
  return 0


if __name__ == "__main__":
  sys.exit(main())

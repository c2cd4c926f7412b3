"""Converts a published checkpoint into a zoo checkpoint.

    python -m zoo.convert hf-funnel SRC --out DIR [--seq-length N] [--with-decoder | --without-decoder]

writes into DIR:

- `ckpt-1.index`, `ckpt-1.data-*` and the `checkpoint` state file: a
  `tf.train.Checkpoint(model=...)` saved by `tf.train.CheckpointManager`, which
  updates the state file only once the checkpoint is complete;
- `model.json`: `{"class_name": "FunnelEncoder", "config": {...}, "source": {...}}`,
  the resolved zoo config, so the model is rebuilt with `FunnelEncoder(**config)` and
  restored with `tf.train.Checkpoint(model=model).restore(tf.train.latest_checkpoint(DIR))`;
- `vocab.txt`, copied from SRC when it has one (Hugging Face Funnel checkpoints do), so
  `python -m tpu.train --init-checkpoint DIR` finds the vocabulary the weights were
  trained with.

Errors (unsupported config values, missing fields, missing or unexpected weights) go
to stderr and the exit status is 1.
"""

import argparse
import json
import os
import sys
import tempfile

import tensorflow as tf

from zoo.convert.hf_funnel import load_hf_funnel

MODEL_FILE = "model.json"
VOCAB_FILE = "vocab.txt"


def write_zoo_checkpoint(model, directory, source):
  """Saves `model` and its config into `directory` (see the module docstring)."""
  os.makedirs(directory, exist_ok=True)
  description = dict(class_name=type(model).__name__, config=model.get_config(), source=source)
  # Write to a temporary file and rename, so a reader never sees half a file.
  handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{MODEL_FILE}.")
  with os.fdopen(handle, "w", encoding="utf-8") as f:
    json.dump(description, f, indent=2, sort_keys=True)
    f.write("\n")
  os.chmod(temporary, 0o644)   # mkstemp creates it private
  os.replace(temporary, os.path.join(directory, MODEL_FILE))
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), directory, max_to_keep=1)
  return manager.save()


def _parser():
  parser = argparse.ArgumentParser(
      prog="python -m zoo.convert", description="Convert a published checkpoint into a zoo checkpoint.")
  formats = parser.add_subparsers(dest="format", required=True, metavar="FORMAT")
  funnel = formats.add_parser(
      "hf-funnel", help="a Hugging Face FunnelModel or FunnelBaseModel checkpoint directory",
      description="Convert a Hugging Face Funnel checkpoint directory (config.json and model.safetensors) "
                  "into a zoo FunnelEncoder checkpoint.")
  funnel.add_argument("src", metavar="SRC", help="Hugging Face checkpoint directory")
  funnel.add_argument("--out", required=True, metavar="DIR", help="directory to write the zoo checkpoint to")
  funnel.add_argument("--seq-length", type=int, default=512, metavar="N",
                      help="static input length of the zoo model (default: %(default)s)")
  decoder = funnel.add_mutually_exclusive_group()
  decoder.add_argument("--with-decoder", dest="with_decoder", action="store_const", const=True,
                       help="build the decoder (default: when the checkpoint has one)")
  decoder.add_argument("--without-decoder", dest="with_decoder", action="store_const", const=False,
                       help="leave the decoder out, dropping its weights")
  return parser


def main(argv=None):
  args = _parser().parse_args(argv)
  try:
    model = load_hf_funnel(args.src, seq_length=args.seq_length, with_decoder=args.with_decoder)
  except ValueError as e:   # ConversionError, or a seq_length too short for the blocks
    print(f"error: {e}", file=sys.stderr)
    return 1
  source = dict(format=args.format, path=os.path.abspath(args.src))
  path = write_zoo_checkpoint(model, args.out, source)
  written = [path, os.path.join(args.out, MODEL_FILE)]
  vocab = os.path.join(args.src, VOCAB_FILE)
  if os.path.exists(vocab):
    tf.io.gfile.copy(vocab, os.path.join(args.out, VOCAB_FILE), overwrite=True)
    written.append(os.path.join(args.out, VOCAB_FILE))
  print(f"wrote {', '.join(written)}")
  return 0


if __name__ == "__main__":
  sys.exit(main())

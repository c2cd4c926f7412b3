"""Converts a published checkpoint into a zoo model directory, and a zoo model directory into a
Hugging Face checkpoint.

    python -m zoo.convert hf-funnel SRC --out DIR [--seq-length N] [--with-decoder | --without-decoder]
    python -m zoo.convert hf-bert SRC --out DIR [--seq-length N]
    python -m zoo.convert tf1-bert SRC --out DIR [--seq-length N] [--cased]
                                   [--residual-attention [--running-mean]]
    python -m zoo.convert funnel-tf SRC --out DIR [--config net_config.json] [--seq-length N]
    python -m zoo.convert sentence-transformers SRC --out DIR [--seq-length N]
    python -m zoo.convert to-hf MODEL_DIR --out DIR [--dtype float32|bfloat16]

The formats are the modules of `zoo.convert.formats`, each declaring a `zoo.convert.registry.Format`:
this file builds the command line from their declarations, and runs an "in" format with
`zoo.convert.model_dir_writer.run_import`. An "in" format's SRC is a local
directory, or for the Hugging Face formats a hub id (`funnel-transformer/small`,
`bert-base-uncased`) that `huggingface_hub` downloads into its cache (it honours
`HF_HUB_OFFLINE=1` and `HF_HUB_CACHE`). DIR is written in the layout of
`zoo.model_dir` (the one training runs use): `config.json` (the preset and overrides
that rebuild the exact encoder, the checkpoint's tokenizer settings), `checkpoints/`,
`vocab.txt` and `source.json` (`zoo.convert.model_dir_writer`). `to-hf` writes what
transformers' `save_pretrained` writes (`zoo.convert.to_hf`), and for an embed run the
sentence-transformers folder around it.

Errors (unsupported config values, missing fields, missing or unexpected weights, what
transformers cannot express) go to stderr and the exit status is 1.
"""

import argparse
import sys
from collections.abc import Sequence

from zoo.convert import formats
from zoo.convert.model_dir_writer import run_import
from zoo.logs import command_name


def parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(
      prog=command_name("zoo.convert"),
      description="Convert a published checkpoint into a zoo model directory (the 'in' formats), or a zoo "
                  "model directory into another format (the 'out' formats).")
  subcommands = p.add_subparsers(dest="format", required=True, metavar="FORMAT")
  for name, format_ in formats.declared().items():
    sub = subcommands.add_parser(name, help=format_.help, description=format_.description)
    format_.add_arguments(sub)
  p.add_argument("-v", "--verbose", action="store_true", help="show TensorFlow's log lines")
  return p


def main(argv: Sequence[str] | None = None) -> int:
  args = parser().parse_args(argv)
  args.argv = argv
  from zoo.logs import error_prefix
  from zoo.logs import quiet_tensorflow
  quiet_tensorflow(args.verbose)
  run = formats.get(args.format).run or run_import   # an "in" format's is the shared one
  try:
    message = run(args)
  except (ValueError, FileNotFoundError) as e:   # ConversionError, a seq_length too short, a bad vocabulary
    print(f"{error_prefix('zoo.convert')}: error: {e}", file=sys.stderr)
    return 1
  print(message)
  return 0


if __name__ == "__main__":
  sys.exit(main())

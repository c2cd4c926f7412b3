"""Converts a published checkpoint into a zoo model directory, and a zoo model directory into a
Hugging Face checkpoint.

    python -m zoo.convert hf-funnel SRC --out DIR [--seq-length N] [--with-decoder | --without-decoder]
    python -m zoo.convert hf-bert SRC --out DIR [--seq-length N]
    python -m zoo.convert tf1-bert SRC --out DIR [--seq-length N] [--cased]
                                   [--residual-attention [--running-mean]]
    python -m zoo.convert to-hf MODEL_DIR --out DIR [--dtype float32|bfloat16]

SRC is a local directory, or for the Hugging Face formats a hub id (`funnel-transformer/small`,
`bert-base-uncased`) that `huggingface_hub` downloads into its cache (it honours
`HF_HUB_OFFLINE=1` and `HF_HUB_CACHE`). DIR is written in the layout of `zoo.model_dir`
(the one training runs use): `config.json` (the preset and overrides that rebuild the
exact encoder, the checkpoint's tokenizer settings), `checkpoints/`, `vocab.txt` and
`source.json`. What each holds: `zoo.convert.model_dir_writer`, which does the work
(`convert_to_model_dir`); this file is the command line.

Errors (unsupported config values, missing fields, missing or unexpected weights) go
to stderr and the exit status is 1.
"""

import argparse
import sys

from zoo.convert.model_dir_writer import convert_to_model_dir


def _add_common(sub, src_help):
  sub.add_argument("src", metavar="SRC", help=src_help)
  sub.add_argument("--out", required=True, metavar="DIR", help="the model directory to write")
  sub.add_argument("--seq-length", type=int, default=512, metavar="N",
                   help="static input length of the zoo model (default: %(default)s)")


def _add_revision(sub):
  sub.add_argument("--revision", metavar="REV",
                   help="a hub id's branch, tag or commit (default: main); only that revision's files of one "
                        "weight format are downloaded, model.safetensors before pytorch_model.bin")


def _add_realformer(sub):
  sub.add_argument("--residual-attention", action="store_true",
                   help="RealFormer: the checkpoint was trained with residual attention (the official "
                        "RealFormer checkpoints)")
  sub.add_argument("--running-mean", action="store_true",
                   help="RealFormer's running-mean residual attention (its 36-layer models)")


def parser():
  p = argparse.ArgumentParser(
      prog="python -m zoo.convert", description="Convert a published checkpoint into a zoo model directory.")
  formats = p.add_subparsers(dest="format", required=True, metavar="FORMAT")
  hub = "; or a Hugging Face hub id, downloaded into huggingface_hub's cache"
  funnel = formats.add_parser(
      "hf-funnel", help="a Hugging Face FunnelModel or FunnelBaseModel checkpoint",
      description="Convert a Hugging Face Funnel checkpoint directory (config.json and model.safetensors or "
                  "pytorch_model.bin, with its vocab.txt and tokenizer files) into a zoo model directory.")
  _add_common(funnel, "Hugging Face checkpoint directory" + hub)
  _add_revision(funnel)
  decoder = funnel.add_mutually_exclusive_group()
  decoder.add_argument("--with-decoder", dest="with_decoder", action="store_const", const=True,
                       help="build the decoder (default: when the checkpoint has one)")
  decoder.add_argument("--without-decoder", dest="with_decoder", action="store_const", const=False,
                       help="leave the decoder out, dropping its weights")
  bert = formats.add_parser(
      "hf-bert", help="a Hugging Face BertModel or BertForPreTraining checkpoint",
      description="Convert a Hugging Face BERT checkpoint directory (config.json and model.safetensors or "
                  "pytorch_model.bin, with "
                  "its vocab.txt and tokenizer files) into a zoo TransformerEncoder model directory.")
  _add_common(bert, "Hugging Face checkpoint directory" + hub)
  _add_revision(bert)
  _add_realformer(bert)
  tf1 = formats.add_parser(
      "tf1-bert", help="Google's TF1 BERT or RealFormer checkpoint (bert_model.ckpt)",
      description="Convert Google's TF1 BERT release (bert_config.json, bert_model.ckpt.*, vocab.txt) into "
                  "a zoo TransformerEncoder model directory.")
  _add_common(tf1, "the release's directory, or its checkpoint prefix "
                   "(bert_config.json and vocab.txt beside it)")
  casing = tf1.add_mutually_exclusive_group()
  casing.add_argument("--uncased", dest="lower_case", action="store_const", const=True,
                      help="an uncased model (default unless the directory name says 'cased')")
  casing.add_argument("--cased", dest="lower_case", action="store_const", const=False, help="a cased model")
  _add_realformer(tf1)
  to_hf = formats.add_parser(
      "to-hf", help="out: a zoo model directory as a Hugging Face checkpoint transformers loads",
      description="Write a zoo model directory (a tpu.train run or a converted checkpoint) as a Hugging Face "
                  "checkpoint directory: config.json, model.safetensors, the tokenizer files and a README.md "
                  "model card, which transformers' Auto classes load with no code of this project. Models "
                  "transformers cannot express are refused before anything is written.")
  to_hf.add_argument("src", metavar="MODEL_DIR", help="the zoo model directory (config.json, vocab.txt, "
                                                       "checkpoints/)")
  to_hf.add_argument("--out", required=True, metavar="DIR", help="the directory to write (new or empty)")
  to_hf.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                     help="the weights' type in model.safetensors (default: %(default)s)")
  p.add_argument("-v", "--verbose", action="store_true", help="show TensorFlow's log lines")
  return p


def _options(args):
  """The format's own flags, as `zoo.convert.model_dir_writer.read_checkpoint` options."""
  if args.format == "hf-funnel":
    return dict(with_decoder=args.with_decoder, revision=args.revision)
  options = dict(residual_attention=args.residual_attention, running_mean=args.running_mean)
  if args.format == "hf-bert":
    options.update(revision=args.revision)
  if args.format == "tf1-bert":
    options.update(lower_case=args.lower_case)
  return options


def main(argv=None):
  args = parser().parse_args(argv)
  from zoo.logs import quiet_tensorflow
  quiet_tensorflow(args.verbose)
  try:
    if args.format == "to-hf":
      from zoo.convert.to_hf import to_hf
      command = " ".join(["python -m zoo.convert", *(sys.argv[1:] if argv is None else argv)])
      plan = to_hf(args.src, args.out, dtype=args.dtype, command=command)
      print(f"wrote {args.out} ({plan.architecture})")
      return 0
    prefix = convert_to_model_dir(args.format, args.src, args.out, seq_length=args.seq_length,
                                  **_options(args))
  except (ValueError, FileNotFoundError) as e:   # ConversionError, a seq_length too short, a bad vocabulary
    print(f"zoo.convert: error: {e}", file=sys.stderr)
    return 1
  print(f"wrote {args.out} (checkpoint {prefix})")
  return 0


if __name__ == "__main__":
  sys.exit(main())

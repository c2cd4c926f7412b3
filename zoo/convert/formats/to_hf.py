"""`to-hf`: a zoo model directory as a Hugging Face checkpoint transformers loads (`zoo.convert.to_hf`)."""

import argparse
import sys

from zoo.convert import registry

DTYPES = ("float32", "bfloat16")


def _arguments(parser):
  parser.add_argument("src", metavar="MODEL_DIR",
                      help="the zoo model directory (config.json, vocab.txt, checkpoints/)")
  parser.add_argument("--out", required=True, metavar="DIR", help="the directory to write (new or empty)")
  parser.add_argument("--dtype", choices=DTYPES, default="float32",
                      help="the weights' type in model.safetensors (default: %(default)s)")
  parser.add_argument("--change-pooling", action="store_true",
                      help="export a Funnel that pools with the zoo's or the Funnel authors' padding "
                           "semantics with transformers' (Hugging Face's) anyway: its outputs then differ on "
                           "padded inputs whose last real token shares a pooling window with padding (the "
                           "model card says so)")


def run(args: argparse.Namespace) -> str:
  from zoo.convert.to_hf.export import to_hf
  command = " ".join(["python -m zoo.convert", *(args.argv if args.argv is not None else sys.argv[1:])])
  plan = to_hf(args.src, args.out, dtype=args.dtype, command=command, change_pooling=args.change_pooling)
  return f"wrote {args.out} ({plan.architecture})"


FORMAT = registry.Format(
    name="to-hf", direction="out", order=50,
    help="out: a zoo model directory as a Hugging Face checkpoint transformers loads",
    description="Write a zoo model directory (a tpu.train run or a converted checkpoint) as a Hugging Face "
                "checkpoint directory: config.json, model.safetensors, the tokenizer files and a README.md "
                "model card, which transformers' Auto classes load with no code of this project; an embed "
                "run's as a sentence-transformers folder (its pooling and normalisation), which "
                "SentenceTransformer loads. Models transformers cannot express are refused before anything "
                "is written.",
    add_arguments=_arguments, run=run)

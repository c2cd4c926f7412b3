"""Text tools: `python -m zoo.text build-vocab CORPUS_GLOB --out vocab.txt --size N [--no-lower-case]`."""

import argparse
import sys
from collections.abc import Sequence

from zoo.logs import command_name


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(prog=command_name("zoo.text"), description=__doc__.split(":")[0] + ".")
  commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
  build = commands.add_parser(
      "build-vocab", help="learn a WordPiece vocabulary from text files (one text per line)",
      description="Learn a WordPiece vocabulary with tensorflow-text's WordPiece learner from words split as "
                  "TextEncoder splits them. "
                  "[PAD] [UNK] [CLS] [SEP] [MASK] come first. Build TextEncoder with the same "
                  "--lower-case setting.")
  build.add_argument("corpus", nargs="+", metavar="CORPUS_GLOB",
                     help="text files or glob patterns (quote them to expand here, e.g. 'data/*.txt'; "
                          "gs:// works)")
  build.add_argument("--out", required=True, help="the vocabulary file to write, one token per line")
  build.add_argument("--size", required=True, type=int,
                     help="target vocabulary size, special tokens included")
  build.add_argument("-v", "--verbose", action="store_true", help="show TensorFlow's log lines")
  build.add_argument("--lower-case", action=argparse.BooleanOptionalAction, default=True,
                     help="lower-case, NFD-normalise and strip accents first (BERT uncased, as TextEncoder "
                          "does by default); --no-lower-case for a cased vocabulary")
  return parser


def main(argv: Sequence[str] | None = None) -> int:
  args = _parser().parse_args(argv)
  from zoo.logs import quiet_tensorflow
  quiet_tensorflow(args.verbose)
  from zoo.text import vocab as vocab_lib
  try:
    files = vocab_lib.corpus_files(args.corpus)
    vocab = vocab_lib.build_vocab(files, args.size, lower_case=args.lower_case,
                                  progress=vocab_lib.print_progress)
  except (FileNotFoundError, ValueError) as error:
    print(f"build-vocab: error: {error}", file=sys.stderr)
    return 2
  vocab_lib.write_vocab(vocab, args.out)
  vocab_lib.print_progress(f"wrote {len(vocab)} tokens to {args.out}")
  return 0


if __name__ == "__main__":
  sys.exit(main())

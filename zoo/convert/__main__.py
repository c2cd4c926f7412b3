"""Converts a published checkpoint into a zoo model directory.

    python -m zoo.convert hf-funnel SRC --out DIR [--seq-length N] [--with-decoder | --without-decoder]
    python -m zoo.convert hf-bert SRC --out DIR [--seq-length N]
    python -m zoo.convert tf1-bert SRC --out DIR [--seq-length N] [--cased]
                                   [--residual-attention [--running-mean]]

SRC is a local directory, or for the Hugging Face formats a hub id (`funnel-transformer/small`,
`bert-base-uncased`) that `huggingface_hub` downloads into its cache (it honours
`HF_HUB_OFFLINE=1` and `HF_HUB_CACHE`). DIR is written in the layout of `zoo.model_dir`
(the one training runs use):

- `config.json`: the preset closest to the checkpoint and the overrides that make it
  exact (`model`, `model_overrides`), `seq_length`, `vocab_size`, `lower_case` and
  `tokenizer` (the special tokens' names, [CLS]'s token type, the longest word WordPiece
  splits: the checkpoint's own tokenizer settings), so `python -m tpu.train
  --init-checkpoint DIR` rebuilds the exact encoder without `--model` and tokenizes as
  the checkpoint's tokenizer does;
- `checkpoints/ckpt-1.*` and the `checkpoint` state file: `tf.train.Checkpoint(model=encoder)`
  (with `masked_lm=` the masked-LM head of a BERT checkpoint that has one) saved by
  `tf.train.CheckpointManager`, which records it only once it is complete;
- `vocab.txt`, copied from SRC;
- `source.json`: the format and path (or hub id and revision) converted from, and the
  checkpoint's weights left out on purpose (BERT's next-sentence head, TF1 optimizer state,
  the heads of Funnel's pre-training models).

Errors (unsupported config values, missing fields, missing or unexpected weights) go
to stderr and the exit status is 1.
"""

import argparse
import os
import sys

FORMATS = ("hf-funnel", "hf-bert", "tf1-bert")
HF_FORMATS = ("hf-funnel", "hf-bert")
# What a Hugging Face conversion reads from a hub repository.
HUB_FILES = ("config.json", "model.safetensors", "model.safetensors.index.json", "model-*.safetensors",
             "vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json")


def describe(encoder, seq_length, lower_case, tokenizer=None):
  """The `config.json` settings that rebuild `encoder` with `zoo.presets.build`."""
  from zoo import presets
  model, overrides = presets.match(type(encoder).__name__, encoder.get_config())
  return dict(model=model, model_overrides=overrides, seq_length=seq_length,
              vocab_size=encoder.get_config()["vocab_size"], lower_case=lower_case, tokenizer=tokenizer)


def hf_lower_case(src):
  """`do_lower_case` of a Hugging Face tokenizer config beside the weights (default True)."""
  from zoo.convert.tokenizer_files import hf_settings
  return hf_settings(src)[0]


def write_model_dir(encoder, directory, *, seq_length, lower_case, source, vocab=None, tokenizer=None,
                    heads=None):
  """Writes a converted encoder as a model directory; returns the checkpoint prefix.

  `vocab`: the path of a vocabulary file, or its tokens. `heads`: `{name: layer}` saved
  beside the encoder (`masked_lm`, as the masked-LM pre-training model names its head).
  """
  import tensorflow as tf

  from zoo.model_dir import ModelDir
  model_dir = ModelDir(directory)
  model_dir.makedirs()
  if isinstance(vocab, str):
    model_dir.copy_vocab_from(vocab)
  elif vocab is not None:
    model_dir.write_vocab(vocab)
  model_dir.write_source(source)
  manager = model_dir.checkpoint_manager(tf.train.Checkpoint(model=encoder, **(heads or {})), max_to_keep=1)
  prefix = manager.save(checkpoint_number=1)
  # config.json last: a directory with a config is complete.
  model_dir.write_config(describe(encoder, seq_length, lower_case, tokenizer))
  return prefix


def is_hub_id(src):
  """True for `name` or `owner/name` that names no local path."""
  import re
  return not os.path.exists(src) and re.fullmatch(r"[\w.-]+(/[\w.-]+)?", src) is not None


def download(repo_id, revision=None):
  """The local snapshot of a hub repository's checkpoint files: `(directory, source fields)`."""
  try:
    import huggingface_hub
  except ImportError:
    raise ValueError(f"{repo_id} is no local directory, and huggingface_hub (needed to download it) is not "
                     "installed: pip install huggingface_hub") from None
  try:
    path = huggingface_hub.snapshot_download(repo_id, revision=revision, allow_patterns=list(HUB_FILES))
  except Exception as error:   # hub errors: offline without a cached copy, unknown repository, ...
    raise ValueError(f"{repo_id}: no local directory of that name, and downloading it from the Hugging Face "
                     f"hub failed ({type(error).__name__}: {error})") from None
  return path, dict(hub_id=repo_id, revision=os.path.basename(os.path.normpath(path)))


def _add_common(sub, src_help):
  sub.add_argument("src", metavar="SRC", help=src_help)
  sub.add_argument("--out", required=True, metavar="DIR", help="the model directory to write")
  sub.add_argument("--seq-length", type=int, default=512, metavar="N",
                   help="static input length of the zoo model (default: %(default)s)")


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
      description="Convert a Hugging Face Funnel checkpoint directory (config.json and model.safetensors, "
                  "with its vocab.txt and tokenizer files) into a zoo model directory.")
  _add_common(funnel, "Hugging Face checkpoint directory" + hub)
  decoder = funnel.add_mutually_exclusive_group()
  decoder.add_argument("--with-decoder", dest="with_decoder", action="store_const", const=True,
                       help="build the decoder (default: when the checkpoint has one)")
  decoder.add_argument("--without-decoder", dest="with_decoder", action="store_const", const=False,
                       help="leave the decoder out, dropping its weights")
  bert = formats.add_parser(
      "hf-bert", help="a Hugging Face BertModel or BertForPreTraining checkpoint",
      description="Convert a Hugging Face BERT checkpoint directory (config.json and model.safetensors, with "
                  "its vocab.txt and tokenizer files) into a zoo TransformerEncoder model directory.")
  _add_common(bert, "Hugging Face checkpoint directory" + hub)
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
  p.add_argument("-v", "--verbose", action="store_true", help="show TensorFlow's log lines")
  return p


def tf1_lower_case(src, flag):
  """The casing of a TF1 release: the flag, else its directory name (`cased_L-12...`: cased)."""
  if flag is not None:
    return flag
  name = os.path.basename(os.path.normpath(src if os.path.isdir(src) else os.path.dirname(src) or "."))
  return not name.lower().startswith("cased")


def convert(args):
  """`(encoder, heads, lower_case, tokenizer, vocabulary (path or tokens), source)` of `args`."""
  from zoo.convert import tokenizer_files
  src, source = args.src, dict(format=args.format)
  if args.format in HF_FORMATS and is_hub_id(src):
    src, hub = download(src)
    source.update(hub)
  else:
    source.update(path=os.path.abspath(src))
  if args.format == "hf-funnel":
    from zoo.convert.hf_funnel import convert_hf_funnel
    encoder, dropped = convert_hf_funnel(src, seq_length=args.seq_length, with_decoder=args.with_decoder)
    lower_case, tokenizer = tokenizer_files.hf_settings(src, funnel=True)
    heads = {}
  elif args.format == "hf-bert":
    from zoo.convert.bert import convert_hf_bert
    converted = convert_hf_bert(src, args.seq_length, args.residual_attention, args.running_mean)
    encoder, dropped, heads = converted.encoder, converted.dropped, converted.heads
    lower_case, tokenizer = tokenizer_files.hf_settings(src)
  else:
    from zoo.convert.bert import convert_tf1_bert
    converted = convert_tf1_bert(src, args.seq_length, args.residual_attention, args.running_mean)
    encoder, dropped, heads = converted.encoder, converted.dropped, converted.heads
    lower_case, tokenizer = tokenizer_files.google_settings(tf1_lower_case(src, args.lower_case))
  if dropped:
    source.update(dropped=dropped)
  if args.format in HF_FORMATS:
    vocab = tokenizer_files.hf_vocab(src)   # vocab.txt, or the fast tokenizer's tokenizer.json
  else:
    vocab = os.path.join(src if os.path.isdir(src) else os.path.dirname(src), "vocab.txt")
    vocab = vocab if os.path.exists(vocab) else None
  return encoder, heads, lower_case, tokenizer, vocab, source


def main(argv=None):
  args = parser().parse_args(argv)
  from zoo.logs import quiet_tensorflow
  quiet_tensorflow(args.verbose)
  try:
    encoder, heads, lower_case, tokenizer, vocab, source = convert(args)
    if vocab is None and args.format != "hf-funnel":
      raise FileNotFoundError(f"{args.src}: no vocab.txt (or tokenizer.json) beside the checkpoint")
    prefix = write_model_dir(encoder, args.out, seq_length=args.seq_length, lower_case=lower_case,
                             source=source, vocab=vocab, tokenizer=tokenizer, heads=heads)
  except (ValueError, FileNotFoundError) as e:   # ConversionError, a seq_length too short, a bad vocabulary
    print(f"zoo.convert: error: {e}", file=sys.stderr)
    return 1
  print(f"wrote {args.out} (checkpoint {prefix})")
  return 0


if __name__ == "__main__":
  sys.exit(main())

"""`funnel-tf`: the Funnel-Transformer authors' TensorFlow checkpoint into a zoo model directory
(`zoo.convert.funnel_tf`)."""

import os

from zoo.convert import registry
from zoo.convert.model_dir_writer import run_import
from zoo.model_dir import VOCAB_FILE


def _arguments(parser):
  registry.add_import_arguments(parser, "the release's directory (model.ckpt.*, net_config.json, vocab.txt), "
                                        "or its checkpoint prefix")
  parser.add_argument("--config", metavar="JSON",
                      help="the authors' net_config.json (default: the one beside the checkpoint)")
  casing = parser.add_mutually_exclusive_group()
  casing.add_argument("--uncased", dest="lower_case", action="store_const", const=True,
                      help="an uncased model (the default: the released models are)")
  casing.add_argument("--cased", dest="lower_case", action="store_const", const=False, help="a cased model")
  parser.add_argument("--no-truncate-seq", dest="truncate_seq", action="store_false",
                      help="the model was trained without --truncate_seq (their scripts' default is on)")
  decoder = parser.add_mutually_exclusive_group()
  decoder.add_argument("--with-decoder", dest="with_decoder", action="store_const", const=True,
                       help="build the decoder (default: when net_config.json has one)")
  decoder.add_argument("--without-decoder", dest="with_decoder", action="store_const", const=False,
                       help="leave the decoder out, dropping its weights")


def read(src, *, seq_length=512, config=None, lower_case=None, truncate_seq=True, with_decoder=None):
  """The `ConvertedCheckpoint` of the authors' release; the vocabulary beside it names the special tokens."""
  from zoo.convert import funnel_tf
  from zoo.convert import hf_funnel
  from zoo.convert import tokenizer_files
  from zoo.convert.errors import ConversionError
  from zoo.convert.model_dir_writer import ConvertedCheckpoint
  from zoo.models import FunnelEncoder
  config_path, prefix = funnel_tf.paths(src, config)
  hf_config = funnel_tf.hf_config(funnel_tf.read_net_config(config_path), config_path, truncate_seq)
  weights, dropped = funnel_tf.hf_weights(prefix, hf_config)
  has_decoder = hf_config["num_decoder_layers"] > 0
  with_decoder = has_decoder if with_decoder is None else with_decoder
  arguments = hf_funnel.zoo_config(hf_config, seq_length, with_decoder, source=config_path)
  encoder = FunnelEncoder(**arguments)
  hf_funnel.assign_hf_weights(encoder, weights, hf_config, source=prefix,
                              skip_prefixes=() if with_decoder else ("decoder.",))
  vocab_path = os.path.join(os.path.dirname(config_path), VOCAB_FILE)
  if not os.path.isfile(vocab_path):
    raise FileNotFoundError(f"{vocab_path}: not found; the release's vocabulary must be beside "
                            "net_config.json")
  vocab = tokenizer_files.hf_vocab(os.path.dirname(vocab_path))
  names = tokenizer_files.FUNNEL_NAMES if tokenizer_files.FUNNEL_NAMES["cls"] in vocab else \
      tokenizer_files.BERT_NAMES
  tokenizer = dict(special_tokens=dict(names), cls_type_id=2,
                   max_chars_per_word=tokenizer_files.HF_MAX_CHARS_PER_WORD)
  missing = [token for token in names.values() if token not in vocab]
  if missing:
    raise ConversionError(f"{vocab_path}: the vocabulary lacks the special token(s) {missing}")
  source = dict(hf_config=hf_config)
  if dropped:
    source.update(dropped=dropped)
  lower_case = True if lower_case is None else lower_case
  return ConvertedCheckpoint(encoder, {}, lower_case, tokenizer, vocab, source)


FORMAT = registry.Format(
    name="funnel-tf", direction="in", order=4,
    help="the Funnel-Transformer authors' TensorFlow checkpoint (model.ckpt, net_config.json)",
    description="Convert a Funnel-Transformer checkpoint as the paper's authors released it (their "
                "TensorFlow code's model.ckpt.*, net_config.json and vocab.txt) into a zoo FunnelEncoder "
                "model directory.",
    add_arguments=_arguments, run=run_import, read=read,
    options=lambda args: dict(config=args.config, lower_case=args.lower_case, truncate_seq=args.truncate_seq,
                              with_decoder=args.with_decoder))

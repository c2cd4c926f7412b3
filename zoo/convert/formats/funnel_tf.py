"""`funnel-tf`: the Funnel-Transformer authors' TensorFlow checkpoint into a zoo model directory
(`zoo.convert.funnel_tf`)."""

import os

from zoo.convert import registry
from zoo.convert.registry import ConvertedCheckpoint


def _arguments(parser):
  registry.add_import_arguments(parser, "the release's directory as the authors ship it (model.ckpt.*, "
                                        "net_config.json, vocab.uncased.txt), or its checkpoint prefix")
  parser.add_argument("--config", metavar="JSON",
                      help="the authors' net_config.json (default: the one beside the checkpoint)")
  casing = parser.add_mutually_exclusive_group()
  casing.add_argument("--uncased", dest="lower_case", action="store_const", const=True,
                      help="an uncased model (the default, as the released models are, unless the "
                           "vocabulary is vocab.cased.txt)")
  casing.add_argument("--cased", dest="lower_case", action="store_const", const=False, help="a cased model")
  parser.add_argument("--no-truncate-seq", dest="truncate_seq", action="store_false",
                      help="the model was trained without --truncate_seq (their scripts' default is on)")
  decoder = parser.add_mutually_exclusive_group()
  decoder.add_argument("--with-decoder", dest="with_decoder", action="store_const", const=True,
                       help="build the decoder (default: when net_config.json has one)")
  decoder.add_argument("--without-decoder", dest="with_decoder", action="store_const", const=False,
                       help="leave the decoder out, dropping its weights")


def read(src: str, *, seq_length: int = 512, config: str | None = None, lower_case: bool | None = None,
         truncate_seq: bool = True, with_decoder: bool | None = None) -> ConvertedCheckpoint:
  """The `ConvertedCheckpoint` of the authors' release; the vocabulary beside it names the special tokens.

  The encoder computes what the authors' TensorFlow code computes with the release
  (`funnel_tf.zoo_arguments`): their padding semantics and position rules, and the decoder fed
  from the last application of block 0.
  """
  from zoo.convert import funnel_tf
  from zoo.convert import hf_funnel
  from zoo.convert import tokenizer_files
  from zoo.convert.errors import ConversionError
  from zoo.models import FunnelEncoder
  config_path, prefix = funnel_tf.paths(src, config)
  net_config = funnel_tf.read_net_config(config_path)
  hf_config = funnel_tf.hf_config(net_config, config_path, truncate_seq)
  weights, dropped = funnel_tf.hf_weights(prefix, hf_config)
  has_decoder = hf_config["num_decoder_layers"] > 0
  with_decoder = has_decoder if with_decoder is None else with_decoder
  encoder = FunnelEncoder(funnel_tf.zoo_arguments(hf_config, seq_length, with_decoder, source=config_path))
  hf_funnel.assign_hf_weights(encoder, weights, source=prefix,
                              skip_prefixes=() if with_decoder else ("decoder.",),
                              initializer_range=float(hf_config.get("initializer_range", 0.1)))
  vocab_path, vocab, names = funnel_tf.read_vocab(os.path.dirname(prefix) or ".")
  tokenizer = dict(special_tokens=dict(names), cls_type_id=2,
                   max_chars_per_word=tokenizer_files.HF_MAX_CHARS_PER_WORD)
  missing = [token for token in names.values() if token not in vocab]
  if missing:
    raise ConversionError(f"{vocab_path}: the vocabulary lacks the special token(s) {missing}")
  source = dict(hf_config=hf_config, net_config=net_config, truncate_seq=bool(truncate_seq),
                vocab_file=os.path.basename(vocab_path),
                computes=funnel_tf.what_it_computes(hf_config))
  if dropped:
    source.update(dropped=dropped)
  if lower_case is None:   # vocab.cased.txt names a cased model; the released ones are uncased
    lower_case = os.path.basename(vocab_path) != funnel_tf.CASED_VOCAB_FILE
  return ConvertedCheckpoint(encoder, {}, lower_case, tokenizer, vocab, source)


FORMAT = registry.Format(
    name="funnel-tf", direction="in", order=4, prefix=True, src_files=("*.index",),
    expects="the Funnel authors' release: its directory (model.ckpt.*, net_config.json, vocab.uncased.txt) "
            "or its checkpoint prefix (DIR/model.ckpt)",
    help="the Funnel-Transformer authors' TensorFlow checkpoint (model.ckpt, net_config.json)",
    description="Convert a Funnel-Transformer checkpoint as the paper's authors released it (their "
                "TensorFlow code's model.ckpt.*, net_config.json and vocab.uncased.txt) into a zoo "
                "FunnelEncoder model directory that computes what their TensorFlow code computes: their "
                "padding semantics (a pooled window is real if any of its tokens is) and position rules.",
    add_arguments=_arguments, read=read,
    options=lambda args: dict(config=args.config, lower_case=args.lower_case, truncate_seq=args.truncate_seq,
                              with_decoder=args.with_decoder))

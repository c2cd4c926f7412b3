"""`tf1-bert`: Google's TF1 BERT (or RealFormer) release into a zoo model directory (`zoo.convert.bert`)."""

import os

from zoo.convert import registry
from zoo.convert.formats.hf_bert import add_realformer_arguments
from zoo.convert.formats.hf_bert import bert_checkpoint
from zoo.convert.formats.hf_bert import realformer_options
from zoo.convert.registry import ConvertedCheckpoint
from zoo.model_dir import VOCAB_FILE


def lower_case_of(src: str, flag: bool | None) -> bool:
  """The casing of a TF1 release: the flag, else its directory name (`cased_L-12...`: cased)."""
  if flag is not None:
    return flag
  name = os.path.basename(os.path.normpath(src if os.path.isdir(src) else os.path.dirname(src) or "."))
  return not name.lower().startswith("cased")


def _arguments(parser):
  registry.add_import_arguments(parser, "the release's directory, or its checkpoint prefix (bert_config.json "
                                        "and vocab.txt beside it)")
  casing = parser.add_mutually_exclusive_group()
  casing.add_argument("--uncased", dest="lower_case", action="store_const", const=True,
                      help="an uncased model (default unless the directory name says 'cased')")
  casing.add_argument("--cased", dest="lower_case", action="store_const", const=False, help="a cased model")
  add_realformer_arguments(parser)


def read(src: str, *, seq_length: int = 512, residual_attention: bool = False, running_mean: bool = False,
         lower_case: bool | None = None) -> ConvertedCheckpoint:
  """The `ConvertedCheckpoint` of Google's TF1 layout, with BERT's tokenizer settings."""
  from zoo.convert import tokenizer_files
  from zoo.convert.bert import convert_tf1_bert
  converted = convert_tf1_bert(src, seq_length, residual_attention, running_mean)
  lower_case, tokenizer = tokenizer_files.google_settings(lower_case_of(src, lower_case))
  vocab: str | None
  vocab = os.path.join(src if os.path.isdir(src) else os.path.dirname(src), VOCAB_FILE)
  source = dict(dropped=converted.dropped) if converted.dropped else {}
  vocab = vocab if os.path.exists(vocab) else None
  return bert_checkpoint(converted, src, lower_case, tokenizer, vocab, source)


FORMAT = registry.Format(
    name="tf1-bert", direction="in", order=3, src_files=("bert_config.json",), prefix=True,
    expects="Google's TF1 BERT release: its directory (bert_config.json, bert_model.ckpt.*, vocab.txt) or "
            "its checkpoint prefix (DIR/bert_model.ckpt)",
    help="Google's TF1 BERT or RealFormer checkpoint (bert_model.ckpt)",
    description="Convert Google's TF1 BERT release (bert_config.json, bert_model.ckpt.*, vocab.txt) into a "
                "zoo TransformerEncoder model directory.",
    add_arguments=_arguments, read=read,
    options=lambda args: dict(realformer_options(args), lower_case=args.lower_case))

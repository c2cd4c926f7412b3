"""`hf-bert`: a Hugging Face BERT checkpoint into a zoo model directory (`zoo.convert.bert`)."""

import argparse
from typing import TYPE_CHECKING
from typing import Any

from zoo.convert import registry
from zoo.convert.registry import ConvertedCheckpoint
from zoo.model_dir import DISCRIMINATOR_HEAD_ROOT
from zoo.model_dir import MASKED_LM_ROOT

if TYPE_CHECKING:
  from zoo.convert.bert import Converted


def add_realformer_arguments(parser: argparse.ArgumentParser) -> None:
  """RealFormer's flags, for the BERT layouts its checkpoints come in."""
  parser.add_argument("--residual-attention", action="store_true",
                      help="RealFormer: the checkpoint was trained with residual attention (the official "
                           "RealFormer checkpoints)")
  parser.add_argument("--running-mean", action="store_true",
                      help="RealFormer's running-mean residual attention (its 36-layer models)")


def realformer_options(args: argparse.Namespace) -> dict[str, Any]:
  return dict(residual_attention=args.residual_attention, running_mean=args.running_mean)


def bert_checkpoint(converted: "Converted", src: str, lower_case: bool, tokenizer: dict[str, Any],
                    vocab: str | list[str] | None, source: dict[str, Any]) -> ConvertedCheckpoint:
  """The `ConvertedCheckpoint` of a converted BERT (`zoo.convert.bert.Converted`); its heads compute
  with the encoder's activation."""
  if vocab is None:
    raise FileNotFoundError(f"{src}: no vocab.txt (or tokenizer.json) beside the checkpoint")
  # The masked-LM and discriminator heads compute with the encoder's activation (a multiple-choice
  # scoring layer has none).
  pretraining = set(converted.heads) & {MASKED_LM_ROOT, DISCRIMINATOR_HEAD_ROOT}
  settings = dict(head_activation=converted.encoder.get_config()["activation"]) if pretraining else {}
  return ConvertedCheckpoint(converted.encoder, converted.heads, lower_case, tokenizer, vocab, source,
                             settings)


def _arguments(parser):
  registry.add_import_arguments(parser, "Hugging Face checkpoint directory" + registry.HUB_SOURCE)
  registry.add_revision_argument(parser)
  add_realformer_arguments(parser)


def read(src: str, *, seq_length: int = 512, residual_attention: bool = False,
         running_mean: bool = False) -> ConvertedCheckpoint:
  """The `ConvertedCheckpoint` of a Hugging Face BERT directory, with its tokenizer settings."""
  from zoo.convert import tokenizer_files
  from zoo.convert.bert import convert_hf_bert
  converted = convert_hf_bert(src, seq_length, residual_attention, running_mean)
  lower_case, tokenizer = tokenizer_files.hf_settings(src)
  return bert_checkpoint(converted, src, lower_case, tokenizer, tokenizer_files.hf_vocab(src),
                         registry.hf_source(src, converted.dropped))


FORMAT = registry.Format(
    name="hf-bert", direction="in", order=2, hub=True, src_files=("config.json",),
    expects="a Hugging Face BERT checkpoint directory (config.json, model.safetensors or pytorch_model.bin, "
            "vocab.txt) or a hub id such as bert-base-uncased",
    help="a Hugging Face BertModel, BertForPreTraining or BertForMultipleChoice checkpoint",
    description="Convert a Hugging Face BERT checkpoint directory (config.json and model.safetensors or "
                "pytorch_model.bin, with its vocab.txt and tokenizer files) into a zoo TransformerEncoder "
                "model directory.",
    add_arguments=_arguments, read=read,
    options=lambda args: dict(realformer_options(args), revision=args.revision))

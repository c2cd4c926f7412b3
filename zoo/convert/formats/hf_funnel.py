"""`hf-funnel`: a Hugging Face Funnel checkpoint into a zoo model directory (`zoo.convert.hf_funnel`)."""

from zoo.convert import registry
from zoo.convert.registry import ConvertedCheckpoint


def _arguments(parser):
  registry.add_import_arguments(parser, "Hugging Face checkpoint directory" + registry.HUB_SOURCE)
  registry.add_revision_argument(parser)
  decoder = parser.add_mutually_exclusive_group()
  decoder.add_argument("--with-decoder", dest="with_decoder", action="store_const", const=True,
                       help="build the decoder (default: when the checkpoint has one)")
  decoder.add_argument("--without-decoder", dest="with_decoder", action="store_const", const=False,
                       help="leave the decoder out, dropping its weights")


def read(src: str, *, seq_length: int = 512, with_decoder: bool | None = None) -> ConvertedCheckpoint:
  """The `ConvertedCheckpoint` of a Hugging Face Funnel directory, with its tokenizer settings."""
  from zoo.convert import tokenizer_files
  from zoo.convert.hf_funnel import convert_hf_funnel
  funnel = convert_hf_funnel(src, seq_length=seq_length, with_decoder=with_decoder)
  lower_case, tokenizer = tokenizer_files.hf_settings(src, funnel=True)
  source = registry.hf_source(src, funnel.dropped)
  vocab = tokenizer_files.hf_vocab(src)
  return ConvertedCheckpoint(funnel.encoder, funnel.heads, lower_case, tokenizer, vocab, source,
                             funnel.settings)


FORMAT = registry.Format(
    name="hf-funnel", direction="in", order=1, hub=True, src_files=("config.json",),
    expects="a Hugging Face Funnel checkpoint directory (config.json, model.safetensors or "
            "pytorch_model.bin, vocab.txt) or a hub id such as funnel-transformer/small",
    help="a Hugging Face FunnelModel, FunnelBaseModel, FunnelForMaskedLM, FunnelForPreTraining or "
         "FunnelForMultipleChoice checkpoint",
    description="Convert a Hugging Face Funnel checkpoint directory (config.json and model.safetensors or "
                "pytorch_model.bin, with its vocab.txt and tokenizer files) into a zoo model directory.",
    add_arguments=_arguments, read=read,
    options=lambda args: dict(with_decoder=args.with_decoder, revision=args.revision))

"""`hf-albert`: a Hugging Face ALBERT checkpoint with its SentencePiece model (`spiece.model`, or built from
`tokenizer.json`) into a zoo model directory (`zoo.convert.albert`)."""

from zoo.convert import registry
from zoo.convert.registry import ConvertedCheckpoint


def _arguments(parser):
  registry.add_import_arguments(parser, "Hugging Face checkpoint directory" + registry.HUB_SOURCE)
  registry.add_revision_argument(parser)


def read(src: str, *, seq_length: int = 512) -> ConvertedCheckpoint:
  """The `ConvertedCheckpoint` of a Hugging Face ALBERT directory, its `spiece.model` included.

  Without `spiece.model` (transformers 5 saves `tokenizer.json` alone) the SentencePiece model is built
  from `tokenizer.json` (`zoo.convert.sentencepiece_model`) and written as the directory's
  `spiece.model`; `source.json` then records `spiece_model: "built from tokenizer.json"`.

  Raises:
    ConversionError, TokenizerFilesError: (`ValueError`s) what the model or its tokenizer files hold
      that the zoo cannot reproduce; a SentencePiece model whose size is not the checkpoint's vocabulary.
  """
  from zoo.convert import tokenizer_files
  from zoo.convert.albert import convert_hf_albert
  from zoo.convert.errors import ConversionError
  from zoo.convert.formats.hf_bert import bert_checkpoint
  from zoo.text.sentencepiece import SentencePieceEncoder
  lower_case, tokenizer, model = tokenizer_files.sentencepiece_settings(src)
  origin = tokenizer_files.sentencepiece_file(src)   # spiece.model, or tokenizer.json it was built from
  arguments = {key: value for key, value in tokenizer.items() if key != "kind"}
  try:
    pieces = SentencePieceEncoder(model, seq_length=3, lower_case=lower_case, **arguments).vocab
  except ValueError as error:
    built = ("" if origin == tokenizer_files.SENTENCEPIECE_MODEL
             else " (the SentencePiece model built from it)")
    raise tokenizer_files.TokenizerFilesError(f"{src}/{origin}{built}: {error}") from None
  converted = convert_hf_albert(src, seq_length)
  vocab_size = converted.encoder.get_config()["vocab_size"]
  if len(pieces) != vocab_size:
    raise ConversionError(f"{src}: {origin} has {len(pieces)} pieces, but config.json says "
                          f"vocab_size={vocab_size}")
  source = registry.hf_source(src, converted.dropped)
  if origin != tokenizer_files.SENTENCEPIECE_MODEL:
    source["spiece_model"] = f"built from {origin}"
  checkpoint = bert_checkpoint(converted, src, lower_case, tokenizer, pieces, source)
  checkpoint.sentencepiece = model
  return checkpoint


FORMAT = registry.Format(
    name="hf-albert", direction="in", order=3, hub=True, src_files=("config.json",),
    expects="a Hugging Face ALBERT checkpoint directory (config.json, model.safetensors or "
            "pytorch_model.bin, spiece.model or tokenizer.json) or a hub id such as albert/albert-base-v2",
    help="a Hugging Face AlbertModel, AlbertForMaskedLM or AlbertForMultipleChoice checkpoint",
    description="Convert a Hugging Face ALBERT checkpoint directory (config.json and model.safetensors or "
                "pytorch_model.bin, its tokenizer files and spiece.model, or without it the tokenizer.json "
                "transformers 5 saves, from which the SentencePiece model is built) into a zoo "
                "TransformerEncoder model directory (factorized embeddings, every layer shared) whose "
                "SentencePiece tokenizer runs in the graph.",
    add_arguments=_arguments, read=read)

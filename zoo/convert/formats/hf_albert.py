"""`hf-albert`: a Hugging Face ALBERT checkpoint with its SentencePiece model into a zoo model directory
(`zoo.convert.albert`)."""

from zoo.convert import registry
from zoo.convert.model_dir_writer import run_import


def _arguments(parser):
  registry.add_import_arguments(parser, "Hugging Face checkpoint directory" + registry.HUB_SOURCE)
  registry.add_revision_argument(parser)


def read(src, *, seq_length=512):
  """The `ConvertedCheckpoint` of a Hugging Face ALBERT directory, its `spiece.model` included.

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
  arguments = {key: value for key, value in tokenizer.items() if key != "kind"}
  try:
    pieces = SentencePieceEncoder(model, seq_length=3, lower_case=lower_case, **arguments).vocab
  except ValueError as error:
    where = f"{src}/{tokenizer_files.SENTENCEPIECE_MODEL}"
    raise tokenizer_files.TokenizerFilesError(f"{where}: {error}") from None
  converted = convert_hf_albert(src, seq_length)
  vocab_size = converted.encoder.get_config()["vocab_size"]
  if len(pieces) != vocab_size:
    raise ConversionError(f"{src}: {tokenizer_files.SENTENCEPIECE_MODEL} has {len(pieces)} pieces, but "
                          f"config.json says vocab_size={vocab_size}")
  checkpoint = bert_checkpoint(converted, src, lower_case, tokenizer, pieces,
                               registry.hf_source(src, converted.dropped))
  checkpoint.sentencepiece = model
  return checkpoint


FORMAT = registry.Format(
    name="hf-albert", direction="in", order=3, hub=True,
    help="a Hugging Face AlbertModel, AlbertForMaskedLM or AlbertForMultipleChoice checkpoint",
    description="Convert a Hugging Face ALBERT checkpoint directory (config.json and model.safetensors or "
                "pytorch_model.bin, with its spiece.model and tokenizer files) into a zoo TransformerEncoder "
                "model directory (factorized embeddings, every layer shared) whose SentencePiece tokenizer "
                "runs in the graph.",
    add_arguments=_arguments, run=run_import, read=read)

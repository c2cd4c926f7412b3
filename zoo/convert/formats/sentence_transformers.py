"""`sentence-transformers`: a sentence-transformers model folder into a zoo embed model directory
(`zoo.convert.sentence_transformers` reads the folder's modules).

SRC's `modules.json` lists a Transformer (a BERT, an ALBERT, or a Funnel with its decoder), a
Pooling (cls, mean or max) and optionally a Normalize. The transformer converts as `hf-bert`,
`hf-albert` or `hf-funnel` converts it (the same readers, its own tokenizer files); the directory
written is an embed run's, as `python -m tpu.train --task embed` leaves it: config.json with task
"embed" and the folder's `pooling` and `normalize`, the checkpoint with the encoder (root `encoder`)
and the `zoo.models.TextEmbedder` over it (root `model`). So `python -m export.saved_model
--model-dir DIR` writes its `embed` signature, and `python -m tpu.train --init-checkpoint DIR --task
embed` fine-tunes it with the folder's pooling and normalisation (unless flags set them).
`--seq-length` defaults to the length the folder truncates texts to (`max_seq_length`). The zoo
pads every text to `seq_length`: a Funnel's vectors (its pooling reads padding) are those
sentence-transformers computes with `processing_kwargs` padding to `max_seq_length`, as `to-hf`
writes a Funnel's folder; `source.json` records the folder's `padding`.

Refused, named with what is supported: other modules (`Dense`, ...) or another order, pooling
modes other than cls/mean/max (`mean_sqrt_len_tokens`, `weightedmean`, `lasttoken`, several
concatenated), `include_prompt` false, a default prompt, transformers other than BERT, ALBERT and
Funnel, a Funnel without decoder layers (sentence-transformers runs `FunnelModel`, whose output is
its decoder's), and `do_lower_case` over a tokenizer that keeps the case.
"""

from zoo.convert import registry
from zoo.convert.registry import ConvertedCheckpoint

READERS = ("bert", "albert", "funnel")   # model_type -> the hf-bert, hf-albert, hf-funnel readers


def _arguments(parser):
  registry.add_import_arguments(
      parser, "a sentence-transformers model folder (modules.json, its Transformer's config.json, weights "
              "and tokenizer files, 1_Pooling/config.json)" + registry.HUB_SOURCE, seq_length_default=None,
      seq_length_help="static input length of the zoo model (default: the folder's max_seq_length, the "
                      "tokens it truncates a text to)")
  registry.add_revision_argument(parser)


def _transformer(folder, seq_length):
  """The `ConvertedCheckpoint` of the folder's transformer, read by the hf-bert, hf-albert or hf-funnel
  reader."""
  import os

  from zoo.convert import releases
  from zoo.convert.errors import ConversionError
  from zoo.convert.formats import hf_albert
  from zoo.convert.formats import hf_bert
  from zoo.convert.formats import hf_funnel
  path = folder.transformer_path
  config_path = os.path.join(path, "config.json")
  config = releases.read_json(config_path, "the Transformer module's transformers config.json")
  model_type = config.get("model_type")
  if model_type not in READERS:
    raise ConversionError(f"{config_path}: model_type {model_type!r}: the sentence-transformers format "
                          f"converts transformers of the model types {', '.join(READERS)}")
  if model_type == "funnel":
    if not config.get("num_decoder_layers", 2):   # transformers' FunnelConfig default: 2
      raise ConversionError(
          f"{config_path}: a Funnel without decoder layers (num_decoder_layers 0): sentence-transformers "
          "runs transformers' FunnelModel, which still upsamples the last block to full length and adds "
          "the first block's output, and the zoo's Funnel computes that only with its decoder; "
          "supported: a Funnel with num_decoder_layers of 1 or more")
    return hf_funnel.read(path, seq_length=seq_length, with_decoder=True)
  return dict(bert=hf_bert.read, albert=hf_albert.read)[model_type](path, seq_length=seq_length)


def read(src: str, *, seq_length: int | None = None) -> ConvertedCheckpoint:
  """The `ConvertedCheckpoint` of a sentence-transformers folder: the transformer's encoder, the
  `TextEmbedder` over it (root `model`) and the embed task's settings.

  Raises:
    ConversionError: what the folder holds that the zoo's `TextEmbedder` does not compute (see the
      module docstring), or what the transformer's reader refuses.
  """
  import os

  from zoo.convert import sentence_transformers
  from zoo.convert.errors import ConversionError
  from zoo.model_dir import MODEL_ROOT
  from zoo.models import TextEmbedder
  folder = sentence_transformers.read_folder(src)
  converted = _transformer(folder, seq_length or folder.max_seq_length or 512)
  encoder = converted.encoder
  width = encoder.get_config()["hidden_size"]
  pooling_path = os.path.join(src, folder.modules[1]["path"], sentence_transformers.MODULE_CONFIG_FILE)
  if folder.dimension != width:
    raise ConversionError(f"{pooling_path}: embedding_dimension {folder.dimension}, but the transformer's "
                          f"hidden states have {width}")
  if folder.do_lower_case and not converted.lower_case:
    config_path = os.path.join(folder.transformer_path, sentence_transformers.TRANSFORMER_CONFIG_FILE)
    raise ConversionError(f"{config_path}: do_lower_case true over a cased tokenizer: sentence-transformers "
                          "then lower-cases the text and keeps its accents, which the zoo's tokenizer does "
                          "not do; supported: do_lower_case false, or a tokenizer that lower-cases itself")
  embedder = TextEmbedder(encoder, pooling=folder.pooling, normalize=folder.normalize, name="embedder")
  source = dict(converted.source)
  dropped = list(source.get("dropped") or []) + [f"{root} (sentence-transformers runs the transformer "
                                                 "without it)" for root in sorted(converted.heads)]
  if dropped:
    source["dropped"] = dropped
  source["sentence_transformers"] = dict(
      modules=folder.modules, transformer=os.path.relpath(folder.transformer_path, src),
      pooling=folder.pooling, normalize=folder.normalize, max_seq_length=folder.max_seq_length,
      padding="max_length" if folder.pad_to_max_length else "longest", config=folder.settings)
  converted.heads = {MODEL_ROOT: embedder}
  converted.settings = dict(task="embed", pooling=folder.pooling, normalize=folder.normalize)
  converted.source = source
  return converted


def _download(repo_id, revision):
  from zoo.convert.hf_hub import download_sentence_transformers
  return download_sentence_transformers(repo_id, revision)


FORMAT = registry.Format(
    name="sentence-transformers", direction="in", order=6, hub=True, download=_download,
    src_files=("modules.json",),
    expects="a sentence-transformers model folder (modules.json, the Transformer's config.json, weights and "
            "tokenizer files, 1_Pooling/config.json) or a hub id such as "
            "sentence-transformers/all-MiniLM-L6-v2",
    help="a sentence-transformers model (modules.json: a BERT, ALBERT or Funnel, cls/mean/max pooling, "
         "Normalize) as an embed model directory",
    description="Convert a sentence-transformers model folder (modules.json; a Transformer whose "
                "transformers model is a BERT, an ALBERT or a Funnel with its decoder; a Pooling of cls, "
                "mean or max; optionally a Normalize) into a zoo model directory of the embed task, which "
                "export.saved_model exports (its embed signature) and tpu.train --init-checkpoint "
                "fine-tunes with the folder's pooling and normalisation.",
    add_arguments=_arguments, read=read,
    options=lambda args: dict(revision=args.revision))

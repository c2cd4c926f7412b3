"""A published checkpoint as a zoo model directory: read it in an "in" format, write the directory.

`convert_to_model_dir(source_format, src, out)` does what `python -m zoo.convert FORMAT SRC
--out DIR` does: `read_checkpoint` converts the weights and reads the tokenizer
settings, `write_model_dir` writes them in the layout of `zoo.model_dir` (the one
training runs use):

- `config.json`: the preset closest to the checkpoint and the overrides that make it
  exact (`model`, `model_overrides`), `seq_length`, `vocab_size`, `lower_case` and
  `tokenizer` (the special tokens' names, [CLS]'s token type, the longest word WordPiece
  splits: the checkpoint's own tokenizer settings), so `python -m tpu.train
  --init-checkpoint DIR` rebuilds the exact encoder without `--model` and tokenizes as
  the checkpoint's tokenizer does; written last, so a directory with a config is complete;
- `checkpoints/ckpt-1.*` and the `checkpoint` state file: `tf.train.Checkpoint(encoder=encoder)`
  (root `zoo.model_dir.ENCODER_ROOT`; with `masked_lm=` the masked-LM head of a BERT
  checkpoint that has one, `discriminator_head=` a Funnel discriminator's, `choice_head=`
  the scoring layer of a `...ForMultipleChoice`, a `Dense(1)` on the pooled output, which
  `tpu.train --task multiple_choice --init-checkpoint DIR` starts from) saved by
  `tf.train.CheckpointManager`, which records it only
  once it is complete. Directories written before held the encoder under `model`; they
  still load (`zoo.model_dir.encoder_root`);
- `vocab.txt`, copied from SRC (a SentencePiece checkpoint's pieces, and its model as
  `spiece.model`);
- `source.json`: the format and path (or hub id and revision) converted from, the
  checkpoint roots of the heads converted beside the encoder (`heads`, when there are any),
  the checkpoint's weights left out on purpose (BERT's next-sentence head, TF1 optimizer state,
  the heads of Funnel's pre-training models) and a Hugging Face checkpoint's `config.json`
  (`hf_config`: `python -m zoo.convert to-hf` gives back the fields the zoo does not use).

SRC is a local directory, or for the Hugging Face formats a hub id (`zoo.convert.hf_hub`).
Each format's own reading is its module's in `zoo.convert.formats`, whose `read` returns a
`zoo.convert.registry.ConvertedCheckpoint`; `run_import` is the run of every "in" format.
Nothing here imports TensorFlow before it converts or writes.
"""

import argparse
import os
from collections.abc import Iterable
from collections.abc import Mapping
from typing import Any

from zoo.convert.hf_hub import download
from zoo.convert.hf_hub import is_hub_id
from zoo.convert.registry import ConvertedCheckpoint
from zoo.convert.registry import check_source
from zoo.lazy import lazy_module
from zoo.model_dir import ENCODER_ROOT
from zoo.model_dir import ModelDir

tf = lazy_module("tensorflow")


def describe(encoder: Any, seq_length: int | None, lower_case: bool,
             tokenizer: Mapping[str, Any] | None = None) -> dict[str, Any]:
  """The `config.json` settings that rebuild `encoder` with `zoo.presets.build` (the `tokenizer` settings
  with the `truncator` of text pairs, the zoo's default: transformers' rule)."""
  from zoo import presets
  from zoo.text.packing import DEFAULT_TRUNCATOR
  model, overrides = presets.match(type(encoder).__name__, encoder.get_config())
  return dict(model=model, model_overrides=presets.recorded(model, overrides), seq_length=seq_length,
              vocab_size=encoder.get_config()["vocab_size"], lower_case=lower_case,
              tokenizer={"truncator": DEFAULT_TRUNCATOR, **(tokenizer or {})})


def read_checkpoint(source_format: str, src: str, *, seq_length: int | None = None,
                    revision: str | None = None, **options: Any) -> ConvertedCheckpoint:
  """Converts the checkpoint `src` of `source_format` (an "in" format of `zoo.convert.formats`);
  returns its `ConvertedCheckpoint` (`zoo.convert.registry`).

  Args:
    source_format: "hf-funnel", "hf-bert", "tf1-bert", ... (`zoo.convert.formats.names("in")`).
    src: a local directory (for some formats also a checkpoint prefix), or for the formats
      that take them a Hugging Face hub id, downloaded into huggingface_hub's cache.
    seq_length: the static input length of the zoo model (None: the format's default, 512 or the
      checkpoint's own).
    revision: a hub id's branch, tag or commit (None: main).
    **options: the format's own (its `read`'s keyword arguments), e.g. `with_decoder`
      (hf-funnel), `residual_attention` and `running_mean` (the BERT layouts),
      `lower_case` (tf1-bert).

  Raises:
    ValueError: an unknown format, or what the converters raise (`ConversionError`, the
      tokenizer files' errors, a failed download).
    FileNotFoundError: SRC is not there (`zoo.convert.registry.check_source`: no such directory, or
      one without the format's files), or a checkpoint without the vocabulary it needs.
  """
  from zoo.convert import formats
  format_ = formats.get(source_format, "in")
  if revision is not None and os.path.exists(src):
    raise ValueError(f"--revision applies to Hugging Face hub ids; {src} is a local path")
  check_source(format_, src)   # a missing SRC fails here, before any import or download
  if revision is not None and not (format_.hub and is_hub_id(src)):
    raise ValueError(f"--revision applies to Hugging Face hub ids; {src} is a local path")
  source: dict[str, Any] = dict(format=source_format)
  if format_.hub and is_hub_id(src):
    src, hub = (format_.download or download)(src, revision)
    source.update(hub)
  else:
    source.update(path=os.path.abspath(src))
  if seq_length is not None:
    options["seq_length"] = seq_length
  assert format_.read is not None   # an "in" format has one (Format.__post_init__)
  converted = format_.read(src, **options)
  if converted.heads:
    source["heads"] = sorted(converted.heads)
  converted.source = {**source, **converted.source}
  return converted


def write_model_dir(encoder: Any, directory: str | os.PathLike[str], *, seq_length: int | None,
                    lower_case: bool, source: Mapping[str, Any], vocab: str | Iterable[str] | None = None,
                    tokenizer: Mapping[str, Any] | None = None, heads: Mapping[str, Any] | None = None,
                    settings: Mapping[str, Any] | None = None, sentencepiece: bytes | None = None) -> str:
  """Writes a converted encoder as a model directory; returns the checkpoint prefix.

  `vocab`: the path of a vocabulary file, or its tokens. `heads`: `{name: layer}` saved
  beside the encoder (`masked_lm`, as the masked-LM pre-training model names its head;
  `discriminator_head`; `choice_head`, as `zoo.models.MultipleChoice` names its scoring layer).
  `sentencepiece`: the SentencePiece model (bytes), written as `spiece.model`.
  """
  model_dir = ModelDir(directory)
  model_dir.makedirs()
  if isinstance(vocab, str):
    model_dir.copy_vocab_from(vocab)
  elif vocab is not None:
    model_dir.write_vocab(vocab)
  if sentencepiece is not None:
    model_dir.write_sentencepiece(sentencepiece)
  model_dir.write_source(source)
  checkpoint = tf.train.Checkpoint(**{ENCODER_ROOT: encoder}, **(heads or {}))
  prefix = model_dir.write_checkpoint(checkpoint)
  # config.json last: a directory with a config is complete.
  model_dir.write_config(dict(describe(encoder, seq_length, lower_case, tokenizer), **(settings or {})))
  return prefix


def run_import(args: argparse.Namespace) -> str:
  """The run of every "in" format (`zoo.convert.formats`): convert SRC into the model directory `--out`."""
  from zoo.convert import formats
  options = formats.get(args.format, "in").options(args)
  prefix = convert_to_model_dir(args.format, args.src, args.out, seq_length=args.seq_length, **options)
  return f"wrote {args.out} (checkpoint {prefix})"


def convert_to_model_dir(source_format: str, src: str, out: str | os.PathLike[str], *,
                         seq_length: int | None = None, **options: Any) -> str:
  """Converts the checkpoint `src` of `source_format` into the model directory `out`; returns its checkpoint.

  `options`: `read_checkpoint`'s. What `python -m zoo.convert FORMAT SRC --out OUT` does.

  Raises:
    ValueError: see `read_checkpoint`.
    FileNotFoundError: a BERT checkpoint without its vocabulary (`vocab.txt` or `tokenizer.json`).
  """
  converted = read_checkpoint(source_format, src, seq_length=seq_length, **options)
  seq_length = seq_length or converted.encoder.get_config()["seq_length"]   # None: the checkpoint's own
  return write_model_dir(converted.encoder, out, seq_length=seq_length, lower_case=converted.lower_case,
                         source=converted.source, vocab=converted.vocab, tokenizer=converted.tokenizer,
                         heads=converted.heads, settings=converted.settings,
                         sentencepiece=converted.sentencepiece)

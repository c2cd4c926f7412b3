"""What a conversion format declares, and what the formats share: `Format`, `ConvertedCheckpoint` and the
arguments of the "in" formats.

A format module of `zoo.convert.formats` defines `FORMAT = Format(...)`: its name (the subcommand of
`python -m zoo.convert`), its direction ("in": a published checkpoint into a zoo model directory;
"out": a zoo model directory into another format), one line of help, a description, its own
command-line arguments and, for an "out" format, what it runs. The package `zoo.convert.formats` finds
every module (`formats.declared()`, `names()`, `get()`), so adding a format is adding one module (and
its tests); `python -m zoo.convert --help`, the subcommands' `--help` and the errors naming the formats
are generated from the declarations. Format modules import only this module and what `--help` needs;
the work is imported when it runs.

An "in" format gives `read(src, seq_length=..., **options)`, which returns a `ConvertedCheckpoint`,
and `options(args)`, the keyword options of its flags; the shared steps (hub ids, writing the model
directory) and its run are `zoo.convert.model_dir_writer`'s (`run_import`). `add_import_arguments`
are the arguments every "in" format takes. This module imports no format module: the formats
import it.
"""

import argparse
import dataclasses
import typing
from collections.abc import Iterable

DIRECTIONS = ("in", "out")


@dataclasses.dataclass(frozen=True)
class Format:
  """One conversion format (see the module docstring).

  Attributes:
    name: the subcommand, e.g. "hf-funnel".
    direction: "in" or "out".
    help: one line for `python -m zoo.convert --help`.
    description: the subcommand's `--help` text.
    add_arguments: `add_arguments(parser)` adds the format's own arguments.
    run: `run(args) -> str` does the work; returns the line printed on success. An "out" format gives
      one; an "in" format leaves it None and runs `zoo.convert.model_dir_writer.run_import`.
    read: "in" formats: `read(src, seq_length=..., **options) -> ConvertedCheckpoint`.
    options: "in" formats: `options(args) -> dict`, the keyword options `read` takes.
    hub: "in" formats: SRC may be a Hugging Face hub id (and `--revision` applies).
    download: with `hub`, `download(repo_id, revision) -> (directory, source fields)` of a hub id (None:
      `zoo.convert.hf_hub.download`, a transformers checkpoint at the repository's root).
    expects: "in" formats: what SRC is, in words, for the error of a SRC that is not there
      (`check_source`).
    src_files: "in" formats: the files a SRC directory holds at least, names or glob patterns
      (`check_source`).
    prefix: "in" formats: SRC may also be a checkpoint prefix (`DIR/model.ckpt`, the files
      `DIR/model.ckpt.*`).
    order: where it is listed (lower first).
  """
  name: str
  direction: str
  help: str
  description: str
  add_arguments: typing.Callable
  run: typing.Callable | None = None
  read: typing.Callable | None = None
  options: typing.Callable = lambda args: {}
  hub: bool = False
  download: typing.Callable | None = None
  expects: str = ""
  src_files: tuple = ()
  prefix: bool = False
  order: int = 100

  def __post_init__(self) -> None:
    if self.direction not in DIRECTIONS:
      raise ValueError(f"format {self.name}: direction must be one of {DIRECTIONS}, got {self.direction!r}")
    if self.direction == "in" and self.read is None:
      raise ValueError(f"format {self.name}: an 'in' format needs read(src, seq_length=..., **options)")
    if self.direction == "out" and self.run is None:
      raise ValueError(f"format {self.name}: an 'out' format needs run(args)")


@dataclasses.dataclass
class ConvertedCheckpoint:
  """What an "in" format's `read` returns: everything `zoo.convert.model_dir_writer.write_model_dir` writes.

  `heads`: `{name: layer}` saved beside the encoder (`masked_lm`, `discriminator_head`,
  `choice_head`);
  `vocab`: the path of a vocabulary file, its tokens, or None; `source`: the fields of
  `source.json`; `settings`: the config.json settings its heads need (the masked-LM
  head's `mlm_transform`, their `head_activation`), which a pre-training run with
  `--init-checkpoint` takes; `sentencepiece`: the serialized SentencePiece model of a
  checkpoint whose tokenizer is one (ALBERT's `spiece.model`), else None.
  """
  encoder: typing.Any
  heads: dict
  lower_case: bool
  tokenizer: dict | None
  vocab: str | list[str] | None
  source: dict
  settings: dict = dataclasses.field(default_factory=dict)
  sentencepiece: bytes | None = None


def check_source(format_: Format, src: str) -> None:
  """Raises at once, before anything is imported or downloaded, where SRC cannot be what the "in" format
  `format_` converts: no such path (and no hub id, or no checkpoint prefix, where the format takes
  them), or a directory without the format's `src_files`.

  Raises:
    FileNotFoundError: naming SRC, what is missing and what the format expects.
  """
  import glob
  import os

  from zoo.convert.hf_hub import is_hub_id
  expects = f"{format_.name} converts {format_.expects or format_.description}"
  if os.path.isdir(src):
    missing = [name for name in format_.src_files if not glob.glob(os.path.join(glob.escape(src), name))]
    if missing:
      raise FileNotFoundError(f"{src}: the directory has no {' or '.join(missing)}: {expects}")
  elif not (format_.hub and is_hub_id(src)) and not (format_.prefix and glob.glob(glob.escape(src) + ".*")):
    what = "no such directory" + (" or checkpoint prefix" if format_.prefix else "")
    if format_.hub:
      what += " (and not a Hugging Face hub id, which is `name` or `owner/name`)"
    raise FileNotFoundError(f"{src}: {what}: {expects}")


HUB_SOURCE = "; or a Hugging Face hub id, downloaded into huggingface_hub's cache"


def add_revision_argument(parser: argparse.ArgumentParser) -> None:
  """`--revision`, of the formats whose SRC may be a hub id."""
  parser.add_argument("--revision", metavar="REV",
                      help="a hub id's branch, tag or commit (default: main); only that revision's files of "
                           "one weight format are downloaded, model.safetensors before pytorch_model.bin")


def hf_source(src: str, dropped: Iterable[str] = ()) -> dict[str, typing.Any]:
  """The `source.json` fields a Hugging Face format adds: the weights left out on purpose and the
  checkpoint's own `config.json` (`hf_config`, whose fields `to-hf` gives back)."""
  import os

  from zoo.convert.tokenizer_files import read_json_object
  source: dict[str, typing.Any] = dict(hf_config=read_json_object(os.path.join(src, "config.json")))
  if dropped:
    source.update(dropped=list(dropped))
  return source


def add_import_arguments(parser: argparse.ArgumentParser, src_help: str, seq_length_default: int | None = 512,
                         seq_length_help: str = "static input length of the zoo model (default: %(default)s)"
                         ) -> None:
  """SRC, `--out` and `--seq-length`: the arguments every "in" format takes."""
  parser.add_argument("src", metavar="SRC", help=src_help)
  parser.add_argument("--out", required=True, metavar="DIR", help="the model directory to write")
  parser.add_argument("--seq-length", type=int, default=seq_length_default, metavar="N", help=seq_length_help)

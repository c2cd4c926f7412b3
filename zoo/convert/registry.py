"""The conversion formats, one module each in `zoo.convert.formats`, as tasks and data sources are.

A format module defines `FORMAT = Format(...)`: its name (the subcommand of `python -m
zoo.convert`), its direction ("in": a published checkpoint into a zoo model directory;
"out": a zoo model directory into another format), one line of help, a description,
its own command-line arguments and what it runs. `formats()` finds every module of the
package, so adding a format is adding one module (and its tests); `python -m
zoo.convert --help`, the subcommands' `--help` and the errors naming the formats are
generated from the declarations. Format modules import only what `--help` needs; the
work is imported when it runs.

An "in" format also gives `read(src, seq_length=..., **options)`, which returns a
`zoo.convert.model_dir_writer.ConvertedCheckpoint`, and `options(args)`, the keyword
options of its flags; the shared steps (hub ids, writing the model directory) are
`zoo.convert.model_dir_writer`'s. `add_import_arguments` and
`zoo.convert.model_dir_writer.run_import` are the arguments and the run every "in"
format shares.

Example:
  >>> [name for name, format_ in formats().items() if format_.direction == "in"]
  ['hf-funnel', 'hf-bert', 'hf-albert', 'tf1-bert', 'funnel-tf', 'keras3', 'sentence-transformers']
  >>> get("to-hf").direction
  'out'
"""

import argparse
import dataclasses
import functools
import importlib
import pkgutil
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
    run: `run(args) -> str` does the work; returns the line printed on success.
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
  run: typing.Callable
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


@functools.cache
def formats() -> dict[str, Format]:
  """`{name: Format}` of every module of `zoo.convert.formats`, in listing order."""
  from zoo.convert import formats as package
  found = {}
  for module in pkgutil.iter_modules(package.__path__):
    declared = getattr(importlib.import_module(f"{package.__name__}.{module.name}"), "FORMAT", None)
    if declared is None:
      continue
    if declared.name in found:
      raise ValueError(f"two format modules declare the format {declared.name!r}")
    found[declared.name] = declared
  return dict(sorted(found.items(), key=lambda item: (item[1].order, item[0])))


def names(direction: str | None = None) -> list[str]:
  """The format names (of one direction)."""
  return [name for name, format_ in formats().items() if direction in (None, format_.direction)]


def get(name: str, direction: str | None = None) -> Format:
  """The `Format` called `name`; a ValueError lists the formats (of `direction`)."""
  format_ = formats().get(name)
  if format_ is None or direction not in (None, format_.direction):
    what = {"in": "checkpoint format", "out": "export format", None: "format"}[direction]
    raise ValueError(f"unknown {what} {name!r}; choose one of {', '.join(names(direction))}")
  return format_


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

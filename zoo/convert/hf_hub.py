"""Hugging Face hub ids as conversion sources: recognising one and downloading its checkpoint files.

`huggingface_hub` downloads into its cache (it honours `HF_HUB_OFFLINE=1` and
`HF_HUB_CACHE`) and is imported on first use: it is needed only for hub ids.
`download` fetches a transformers checkpoint (at the repository's root, or in one of its folders);
`download_sentence_transformers` a sentence-transformers model, whose `modules.json` says in which
folder its transformer is (`zoo.convert.sentence_transformers`).
"""

import os
import re
from collections.abc import Iterable

from zoo.convert import weights as weight_formats

# What a Hugging Face conversion reads from a hub repository besides the weights.
HUB_FILES = ("config.json", "vocab.txt", "spiece.model", "tokenizer_config.json", "special_tokens_map.json",
             "tokenizer.json")
# What the sentence-transformers format reads besides the transformer's files: the modules' list, the
# model's settings and each module's config (`1_Pooling/config.json`,
# `0_Transformer/sentence_bert_config.json`).
SENTENCE_TRANSFORMERS_FILES = ("modules.json", "config_sentence_transformers.json",
                               "sentence_bert_config.json", "*/config.json", "*/sentence_bert_config.json")


def is_hub_id(src: str) -> bool:
  """True for `name` or `owner/name` that names no local path."""
  return not os.path.exists(src) and re.fullmatch(r"[\w.-]+(/[\w.-]+)?", src) is not None


def _snapshot(repo_id, revision, patterns):
  """The local snapshot of the repository's files that match `patterns` (huggingface_hub's).

  Raises:
    ValueError: huggingface_hub is not installed, or the download failed.
  """
  try:
    import huggingface_hub
  except ImportError:
    raise ValueError(f"{repo_id} is no local directory, and huggingface_hub (needed to download it) is not "
                     "installed: pip install huggingface_hub") from None
  try:
    return huggingface_hub.snapshot_download(repo_id, revision=revision, allow_patterns=list(patterns))
  except Exception as error:   # hub errors: offline without a cached copy, unknown repository, ...
    cause = " ".join(f"{type(error).__name__}: {error}".split())
    raise ValueError(f"{repo_id}: no local directory of that name, and downloading it from the Hugging "
                     f"Face hub failed ({cause}). Where there is no network access, download it elsewhere "
                     f"(`hf download {repo_id} --local-dir DIR`), copy DIR here and pass DIR instead, or "
                     "fill huggingface_hub's cache (HF_HOME) there") from None


def download(repo_id: str, revision: str | None = None, folder: str = "", extra: Iterable[str] = ()
             ) -> tuple[str, dict[str, str]]:
  """The local snapshot of a hub repository's checkpoint files: `(directory, source fields)`.

  Only one weight format is fetched: safetensors when the revision has it, else
  `pytorch_model.bin` (single or sharded), with the config and tokenizer files; those of
  the repository's `folder` ("" its root) and the files `extra` (patterns) besides.

  Raises:
    ValueError: huggingface_hub is not installed, or the download failed (offline without
      a cached copy, an unknown repository, ...).
  """
  prefix = f"{folder.strip('/')}/" if folder.strip("/") else ""
  path: str
  for weights_format in weight_formats.FORMATS:
    names = list(HUB_FILES) + list(weight_formats.HUB_PATTERNS[weights_format])
    path = _snapshot(repo_id, revision, [prefix + name for name in names] + list(extra))
    try:
      weight_formats.weight_files(os.path.join(path, prefix))
      break
    except weight_formats.WeightsError:
      continue   # this revision has no weights in that format: the next one
  return path, dict(hub_id=repo_id, revision=os.path.basename(os.path.normpath(path)))


def download_sentence_transformers(repo_id: str, revision: str | None = None) -> tuple[str, dict[str, str]]:
  """`download` of a sentence-transformers model: its module files, then the checkpoint files of the
  folder `modules.json` puts its transformer in (the root, or `0_Transformer` in older models), of the
  same commit."""
  from zoo.convert.sentence_transformers import transformer_folder
  path = _snapshot(repo_id, revision, SENTENCE_TRANSFORMERS_FILES)
  commit = os.path.basename(os.path.normpath(path))
  return download(repo_id, commit, folder=transformer_folder(path), extra=SENTENCE_TRANSFORMERS_FILES)

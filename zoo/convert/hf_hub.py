"""Hugging Face hub ids as conversion sources: recognising one and downloading its checkpoint files.

`huggingface_hub` downloads into its cache (it honours `HF_HUB_OFFLINE=1` and
`HF_HUB_CACHE`) and is imported on first use: it is needed only for hub ids.
"""

import os
import re

from zoo.convert import weights as weight_formats

# What a Hugging Face conversion reads from a hub repository besides the weights.
HUB_FILES = ("config.json", "vocab.txt", "spiece.model", "tokenizer_config.json", "special_tokens_map.json",
             "tokenizer.json")


def is_hub_id(src):
  """True for `name` or `owner/name` that names no local path."""
  return not os.path.exists(src) and re.fullmatch(r"[\w.-]+(/[\w.-]+)?", src) is not None


def download(repo_id, revision=None):
  """The local snapshot of a hub repository's checkpoint files: `(directory, source fields)`.

  Only one weight format is fetched: safetensors when the revision has it, else
  `pytorch_model.bin` (single or sharded), with the config and tokenizer files.

  Raises:
    ValueError: huggingface_hub is not installed, or the download failed (offline without
      a cached copy, an unknown repository, ...).
  """
  try:
    import huggingface_hub
  except ImportError:
    raise ValueError(f"{repo_id} is no local directory, and huggingface_hub (needed to download it) is not "
                     "installed: pip install huggingface_hub") from None
  path = None
  for weights_format in weight_formats.FORMATS:
    patterns = list(HUB_FILES) + list(weight_formats.HUB_PATTERNS[weights_format])
    try:
      path = huggingface_hub.snapshot_download(repo_id, revision=revision, allow_patterns=patterns)
    except Exception as error:   # hub errors: offline without a cached copy, unknown repository, ...
      cause = " ".join(f"{type(error).__name__}: {error}".split())
      raise ValueError(f"{repo_id}: no local directory of that name, and downloading it from the Hugging "
                       f"Face hub failed ({cause}). Where there is no network access, download it elsewhere "
                       f"(`hf download {repo_id} --local-dir DIR`), copy DIR here and pass DIR instead, or "
                       "fill huggingface_hub's cache (HF_HOME) there") from None
    try:
      weight_formats.weight_files(path)
      break
    except weight_formats.WeightsError:
      continue   # this revision has no weights in that format: the next one
  return path, dict(hub_id=repo_id, revision=os.path.basename(os.path.normpath(path)))

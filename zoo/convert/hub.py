"""Hugging Face hub ids as conversion sources: recognising one and downloading its checkpoint files.

`huggingface_hub` downloads into its cache (it honours `HF_HUB_OFFLINE=1` and
`HF_HUB_CACHE`) and is imported on first use: it is needed only for hub ids.
"""

import os
import re

# What a Hugging Face conversion reads from a hub repository.
HUB_FILES = ("config.json", "model.safetensors", "model.safetensors.index.json", "model-*.safetensors",
             "vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json")


def is_hub_id(src):
  """True for `name` or `owner/name` that names no local path."""
  return not os.path.exists(src) and re.fullmatch(r"[\w.-]+(/[\w.-]+)?", src) is not None


def download(repo_id, revision=None):
  """The local snapshot of a hub repository's checkpoint files: `(directory, source fields)`.

  Raises:
    ValueError: huggingface_hub is not installed, or the download failed (offline without
      a cached copy, an unknown repository, ...).
  """
  try:
    import huggingface_hub
  except ImportError:
    raise ValueError(f"{repo_id} is no local directory, and huggingface_hub (needed to download it) is not "
                     "installed: pip install huggingface_hub") from None
  try:
    path = huggingface_hub.snapshot_download(repo_id, revision=revision, allow_patterns=list(HUB_FILES))
  except Exception as error:   # hub errors: offline without a cached copy, unknown repository, ...
    raise ValueError(f"{repo_id}: no local directory of that name, and downloading it from the Hugging Face "
                     f"hub failed ({type(error).__name__}: {error})") from None
  return path, dict(hub_id=repo_id, revision=os.path.basename(os.path.normpath(path)))

"""A Hugging Face checkpoint's weights, in whichever format it was saved.

`save_pretrained` has written two formats over the years, each single or sharded:

  model.safetensors                   (safetensors; read with its numpy API, no torch)
  model.safetensors.index.json        + model-00001-of-0000N.safetensors ...
  pytorch_model.bin                   (a pickled `state_dict`; read with torch)
  pytorch_model.bin.index.json        + pytorch_model-00001-of-0000N.bin ...

`read_weights` reads the first format a directory holds, safetensors first; the
weights are the same float32 arrays whichever format they came from. Reading
`pytorch_model.bin` needs torch (`torch.load(..., weights_only=True)`, which unpickles
tensors only); without torch the error names both ways out.
"""

import json
import os

import numpy as np

# (single file, index of shards) of each format, in order of preference.
SAFETENSORS = ("model.safetensors", "model.safetensors.index.json")
PYTORCH = ("pytorch_model.bin", "pytorch_model.bin.index.json")
FORMATS = (SAFETENSORS, PYTORCH)
# Hub file patterns of each format (what a download fetches for it).
HUB_PATTERNS = {SAFETENSORS: ("model.safetensors", "model.safetensors.index.json", "model-*.safetensors"),
                PYTORCH: ("pytorch_model.bin", "pytorch_model.bin.index.json", "pytorch_model-*.bin")}


class WeightsError(ValueError):
  """The weights cannot be read; the message names the file and what to do."""


def weight_files(path: str) -> tuple[tuple[str, str], list[str]]:
  """`(format, [files])` of the first format `path` holds; WeightsError when it holds none."""
  for weights_format in FORMATS:
    single, index = (os.path.join(path, name) for name in weights_format)
    if os.path.isfile(single):
      return weights_format, [single]
    if os.path.isfile(index):
      try:
        with open(index, encoding="utf-8") as file:
          shards = sorted(set(json.load(file)["weight_map"].values()))
      except (ValueError, KeyError, TypeError) as error:
        raise WeightsError(f"{index}: not a shard index ({type(error).__name__}: {error})") from None
      files = [os.path.join(path, name) for name in shards]
      missing = [file for file in files if not os.path.isfile(file)]
      if missing:
        raise WeightsError(f"{index} lists shards that are missing: {missing}")
      return weights_format, files
  names = ", ".join(name for weights_format in FORMATS for name in weights_format)
  raise WeightsError(f"{path}: no checkpoint weights (looked for {names})")


def read_weights(path: str) -> dict[str, np.ndarray]:
  """`{name: float32 array}` of the checkpoint in directory `path` (see the module docstring)."""
  weights_format, files = weight_files(path)
  read = _read_safetensors if weights_format == SAFETENSORS else _read_pytorch
  weights = {}
  for file in files:
    weights.update(read(file))
  return weights


def _read_safetensors(file):
  from safetensors import numpy as safetensors_numpy
  try:
    tensors = safetensors_numpy.load_file(file)
  except Exception as error:   # safetensors raises its own error types
    raise WeightsError(f"{file}: cannot be read as safetensors ({error})") from error
  return {name: np.asarray(value, np.float32) for name, value in tensors.items()}


def _read_pytorch(file):
  try:
    import torch
  except ImportError:
    raise WeightsError(
        f"{file} is a PyTorch checkpoint, which needs torch to read: install torch (pip install torch), or "
        "convert a revision of the checkpoint that has model.safetensors (--revision)") from None
  try:
    state = torch.load(file, map_location="cpu", weights_only=True)
  except Exception as error:   # a truncated or foreign file: torch raises several kinds
    raise WeightsError(f"{file}: cannot be read as a PyTorch checkpoint ({type(error).__name__}: "
                       f"{error})") from None
  if not isinstance(state, dict):
    raise WeightsError(f"{file}: expected a state_dict (names to tensors), got {type(state).__name__}")
  return {name: value.detach().to(torch.float32).numpy() for name, value in state.items()
          if isinstance(value, torch.Tensor)}

"""Modules imported on first use, so command-line `--help` answers without loading TensorFlow.

Example:
  >>> json = lazy_module("json")
  >>> json.dumps([1])
  '[1]'
"""

import importlib
import types
from typing import Any


class _LazyModule(types.ModuleType):
  """Stands for a module; the first attribute read imports it and copies its namespace."""

  def __getattr__(self, attribute: str) -> Any:
    module = importlib.import_module(self.__name__)
    self.__dict__.update(module.__dict__)
    return getattr(module, attribute)


def lazy_module(name: str) -> types.ModuleType:
  """A stand-in for `importlib.import_module(name)` that imports on first attribute access."""
  return _LazyModule(name)

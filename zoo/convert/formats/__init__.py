"""One module per conversion format, each declaring `FORMAT` (`zoo.convert.registry.Format`), and the
lookup of the formats by name.

`declared()` imports every module of this package and returns its formats; `python -m zoo.convert`
builds its command line from them, and `names()` and `get()` are what the errors naming the formats
and `zoo.convert.model_dir_writer` ask. `zoo.convert.registry` holds what a declaration is (and what
the formats share); format modules import it and never this package's lookup. See DESIGN.md ("Adding
a conversion format") for the recipe.

Example:
  >>> names("in")
  ['hf-funnel', 'hf-bert', 'hf-albert', 'tf1-bert', 'funnel-tf', 'keras3', 'sentence-transformers']
  >>> get("to-hf").direction
  'out'
"""

import functools
import importlib
import pkgutil

from zoo.convert.registry import Format


@functools.cache
def declared() -> dict[str, Format]:
  """`{name: Format}` of every module of this package, in listing order (`Format.order`, then name)."""
  found: dict[str, Format] = {}
  for module in pkgutil.iter_modules(__path__):
    format_ = getattr(importlib.import_module(f"{__name__}.{module.name}"), "FORMAT", None)
    if format_ is None:
      continue
    if format_.name in found:
      raise ValueError(f"two format modules declare the format {format_.name!r}")
    found[format_.name] = format_
  return dict(sorted(found.items(), key=lambda item: (item[1].order, item[0])))


def names(direction: str | None = None) -> list[str]:
  """The format names (of one direction)."""
  return [name for name, format_ in declared().items() if direction in (None, format_.direction)]


def get(name: str, direction: str | None = None) -> Format:
  """The `Format` called `name`; a ValueError lists the formats (of `direction`)."""
  format_ = declared().get(name)
  if format_ is None or direction not in (None, format_.direction):
    what = {"in": "checkpoint format", "out": "export format", None: "format"}[direction]
    raise ValueError(f"unknown {what} {name!r}; choose one of {', '.join(names(direction))}")
  return format_

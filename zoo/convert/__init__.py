"""Importers for published checkpoints (Hugging Face Funnel format).

`load_hf_funnel(path)` builds a zoo `FunnelEncoder` from a Hugging Face `FunnelModel`
or `FunnelBaseModel` checkpoint directory; `python -m zoo.convert hf-funnel SRC --out
DIR` writes it as a zoo model directory (`zoo.model_dir`). The importers load
TensorFlow on first use, so `python -m zoo.convert --help` answers at once.
"""

__all__ = ["ConversionError", "load_hf_funnel"]


def __getattr__(name):
  if name in __all__:
    from zoo.convert import hf_funnel
    return getattr(hf_funnel, name)
  raise AttributeError(f"module 'zoo.convert' has no attribute {name!r}")

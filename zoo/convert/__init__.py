"""Importers for published checkpoints (Hugging Face Funnel format).

`load_hf_funnel(path)` builds a zoo `FunnelEncoder` from a Hugging Face `FunnelModel`
or `FunnelBaseModel` checkpoint directory; `python -m zoo.convert hf-funnel SRC --out
DIR` writes it as a zoo checkpoint.
"""

from zoo.convert.hf_funnel import ConversionError
from zoo.convert.hf_funnel import load_hf_funnel

__all__ = ["ConversionError", "load_hf_funnel"]

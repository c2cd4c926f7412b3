"""Importers for published checkpoints (Hugging Face Funnel and BERT, Google's TF1 BERT).

`load_hf_funnel(path)` builds a zoo `FunnelEncoder` from a Hugging Face `FunnelModel`
or `FunnelBaseModel` checkpoint directory; `load_hf_bert(path)` and
`load_tf1_bert(path)` a `TransformerEncoder` from a Hugging Face `BertModel` /
`BertForPreTraining` directory or Google's TF1 release (also RealFormer's, with
`residual_attention=True`). `python -m zoo.convert FORMAT SRC --out DIR` writes them as
zoo model directories (`zoo.model_dir`) with the checkpoint's tokenizer settings. The
importers load TensorFlow on first use, so `python -m zoo.convert --help` answers at once.
"""

_EXPORTS = {
    "ConversionError": "zoo.convert.hf_funnel",
    "load_hf_funnel": "zoo.convert.hf_funnel",
    "load_hf_bert": "zoo.convert.bert",
    "load_tf1_bert": "zoo.convert.bert",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
  if name in _EXPORTS:
    import importlib
    return getattr(importlib.import_module(_EXPORTS[name]), name)
  raise AttributeError(f"module 'zoo.convert' has no attribute {name!r}")

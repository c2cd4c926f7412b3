"""Converters of checkpoints into zoo model directories and out, one format per module of
`zoo.convert.formats`: in, `hf-funnel`, `hf-bert`, `hf-albert` (Hugging Face Funnel, BERT, ALBERT),
`tf1-bert` (Google's TF1 BERT and RealFormer), `funnel-tf` (the Funnel authors' TF releases),
`keras3` (a model trained in the Keras 3 edition) and `sentence-transformers` (a sentence-transformers
model as an embed model directory); out, `to-hf` (a zoo model directory as a Hugging Face checkpoint,
an embed run's as a sentence-transformers folder).

`load_hf_funnel(path)` builds a zoo `FunnelEncoder` from a Hugging Face `FunnelModel`,
`FunnelBaseModel` (or `FunnelForMaskedLM`, `FunnelForPreTraining`,
`FunnelForMultipleChoice`, with their heads) checkpoint directory; `load_hf_bert(path)`
and `load_tf1_bert(path)` a `TransformerEncoder` from a Hugging Face `BertModel` /
`BertForPreTraining` / `BertForMultipleChoice` directory or Google's TF1 release (also
RealFormer's, with `residual_attention=True`); `python -m zoo.convert --help` lists every
format. `convert_to_model_dir(format, src, out)` (the work of
`python -m zoo.convert FORMAT SRC --out DIR`) writes them as zoo model directories
(`zoo.model_dir`) with the checkpoint's tokenizer settings; `read_checkpoint`,
`write_model_dir` and `describe` are its steps (`zoo.convert.model_dir_writer`), and
`zoo.convert.hf_hub` resolves Hugging Face hub ids. `to_hf(model_dir, out)` (`python -m
zoo.convert to-hf`, `zoo.convert.to_hf`) writes a model directory as a Hugging Face checkpoint that
transformers' Auto classes load. Names are imported on first use and
load TensorFlow only when they convert, so `python -m zoo.convert --help` answers at once.
"""

from typing import Any

_EXPORTS = {
    "ConversionError": "zoo.convert.errors",
    "load_hf_funnel": "zoo.convert.hf_funnel",
    "load_hf_bert": "zoo.convert.bert",
    "load_tf1_bert": "zoo.convert.bert",
    "ConvertedCheckpoint": "zoo.convert.registry",
    "convert_to_model_dir": "zoo.convert.model_dir_writer",
    "describe": "zoo.convert.model_dir_writer",
    "read_checkpoint": "zoo.convert.model_dir_writer",
    "write_model_dir": "zoo.convert.model_dir_writer",
    "to_hf": "zoo.convert.to_hf.export",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
  if name in _EXPORTS:
    import importlib
    return getattr(importlib.import_module(_EXPORTS[name]), name)
  raise AttributeError(f"module 'zoo.convert' has no attribute {name!r}")

"""In-graph text preprocessing: WordPiece and SentencePiece encoding, masked-LM inputs and vocabularies.

The names load their modules (and TensorFlow) on first use, so `python -m zoo.text
--help` answers at once.
"""

_EXPORTS = {
    "SPECIAL_ROLES": "zoo.text.vocab",
    "SPECIAL_TOKENS": "zoo.text.vocab",
    "MaskedLMMasker": "zoo.text.masking",
    "SentencePieceEncoder": "zoo.text.sentencepiece",
    "TextEncoder": "zoo.text.tokenizer",
    "build_vocab": "zoo.text.vocab",
    "continuation_table": "zoo.text.tokenizer",
    "corpus_files": "zoo.text.vocab",
    "learn_vocab": "zoo.text.vocab",
    "load_vocab": "zoo.text.vocab",
    "text_encoder": "zoo.text.sentencepiece",
    "write_vocab": "zoo.text.vocab",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
  if name in _EXPORTS:
    import importlib
    return getattr(importlib.import_module(_EXPORTS[name]), name)
  raise AttributeError(f"module 'zoo.text' has no attribute {name!r}")

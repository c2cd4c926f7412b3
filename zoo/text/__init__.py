"""In-graph text preprocessing: WordPiece and SentencePiece encoding, masked-LM inputs and vocabularies.

The names load their modules (and TensorFlow) on first use, so `python -m zoo.text
--help` answers at once.
"""

from typing import TYPE_CHECKING
from typing import Any

if TYPE_CHECKING:   # the names' types for the type checker; at run time `__getattr__` imports them
  from zoo.text.masking import MaskedLMMasker as MaskedLMMasker
  from zoo.text.sentencepiece import SentencePieceEncoder as SentencePieceEncoder
  from zoo.text.sentencepiece import text_encoder as text_encoder
  from zoo.text.tokenizer import TextEncoder as TextEncoder
  from zoo.text.tokenizer import continuation_table as continuation_table
  from zoo.text.vocab import SPECIAL_ROLES as SPECIAL_ROLES
  from zoo.text.vocab import SPECIAL_TOKENS as SPECIAL_TOKENS
  from zoo.text.vocab import build_vocab as build_vocab
  from zoo.text.vocab import corpus_files as corpus_files
  from zoo.text.vocab import learn_vocab as learn_vocab
  from zoo.text.vocab import load_vocab as load_vocab
  from zoo.text.vocab import write_vocab as write_vocab

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


def __getattr__(name: str) -> Any:
  if name in _EXPORTS:
    import importlib
    return getattr(importlib.import_module(_EXPORTS[name]), name)
  raise AttributeError(f"module 'zoo.text' has no attribute {name!r}")

"""In-graph text preprocessing: WordPiece encoding, masked-LM inputs and vocabularies."""

from zoo.text.masking import MaskedLMMasker
from zoo.text.tokenizer import TextEncoder
from zoo.text.tokenizer import continuation_table
from zoo.text.vocab import SPECIAL_TOKENS
from zoo.text.vocab import build_vocab
from zoo.text.vocab import corpus_files
from zoo.text.vocab import learn_vocab
from zoo.text.vocab import load_vocab
from zoo.text.vocab import write_vocab

__all__ = [
    "SPECIAL_TOKENS",
    "MaskedLMMasker",
    "TextEncoder",
    "build_vocab",
    "continuation_table",
    "corpus_files",
    "learn_vocab",
    "load_vocab",
    "write_vocab",
]

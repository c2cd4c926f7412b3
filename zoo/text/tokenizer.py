"""In-graph BERT text encoding: raw strings in, packed encoder inputs out.

Axes: B batch, T sequence length (`seq_length`), V vocabulary size.

`TextEncoder` is a `tf.Module`, so the same object serves the training input pipeline
(`tf.data.Dataset.map`), `tf.function`s and exported SavedModels that take raw text.
All of it is TensorFlow and tensorflow-text ops; the WordPiece model sits in the graph
as a constant (`tensorflow_text.FastWordpieceTokenizer`), so a SavedModel needs no
vocabulary asset. Load such a SavedModel after `import tensorflow_text`, which
registers the ops.

Steps, as the reference `FullTokenizer` of BERT's `tokenization.py` takes them (the
character classes are in `zoo.text.normalize`):

1. Invalid UTF-8 bytes are dropped; NUL, U+FFFD and control and format characters
   (Cc but tab, newline and CR; Cf) are removed.
2. With `lower_case`: Unicode lower-casing, NFD, non-spacing marks (Mn) dropped.
3. Words are split on whitespace (Zs, tab, newline, CR, U+2028, U+2029); each
   punctuation character and each CJK ideograph is a word of its own.
4. WordPiece on each word (`FastWordpieceTokenizer`: greedy longest match first, `##`
   marks a suffix). A word of more than `max_chars_per_word` characters, or without a
   WordPiece split, is one `[UNK]`.
5. Packing (`zoo.text.packing`): `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`, a pair trimmed to
   `seq_length` longest first as transformers' fast tokenizers trim it (the longer segment
   loses tokens first; when both are long the odd token goes to the longer one, to b on a
   tie), and padded with `[PAD]`.

The special tokens are BERT's names by default; a checkpoint whose tokenizer calls them
otherwise (Hugging Face Funnel: `<pad> <unk> <cls> <sep> <mask>`) passes its own with
`special_tokens`, and `cls_type_id=2` gives [cls] the token type Funnel's tokenizer gives
it. `settings()` returns these arguments as a model directory records them.

Every op is a core TensorFlow op or a tensorflow-text op that TF Serving 2.12 and
later link (`export/serving_ops.py`).
"""

import collections
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_text as text

from zoo.text.normalize import Strings
from zoo.text.normalize import normalize
from zoo.text.normalize import split_words
from zoo.text.normalize import split_words_with_offsets
from zoo.text.packing import DEFAULT_TRUNCATOR
from zoo.text.packing import TRUNCATORS
from zoo.text.packing import pack
from zoo.text.vocab import SPECIAL_ROLES
from zoo.text.vocab import SPECIAL_TOKENS
from zoo.text.vocab import load_vocab

SUFFIX_INDICATOR = "##"
# Longest word (in characters) that WordPiece splits; the reference `FullTokenizer`
# of Model Garden uses 400, the original BERT release 200.
MAX_CHARS_PER_WORD = 400
# UTF-8 bytes per character at most: FastWordpiece counts bytes.
_MAX_UTF8_BYTES = 4


def continuation_table(vocab: Sequence[str], suffix_indicator: str = SUFFIX_INDICATOR) -> np.ndarray:
  """bool `[V]`: True for suffix pieces (`##ing`), which continue the word before them."""
  return np.array([token.startswith(suffix_indicator) and len(token) > len(suffix_indicator)
                   for token in vocab], dtype=bool)


def word_starts(token_ids: tf.RaggedTensor | tf.Tensor,
                is_continuation: np.ndarray | Sequence[bool]) -> tf.RaggedTensor:
  """bool `[B, (tokens)]`: True where a token starts a word.

  A token starts a word unless it is a suffix piece (`is_continuation[id]`, bool `[V]`),
  and the first token of each row always starts one.

  Args:
    token_ids: int `[B, (tokens)]` ragged, or dense `[B, T]`.
    is_continuation: bool `[V]`, see `continuation_table`.
  """
  if not isinstance(token_ids, tf.RaggedTensor):
    token_ids = tf.RaggedTensor.from_tensor(token_ids)
  continues = tf.gather(tf.convert_to_tensor(is_continuation, tf.bool), token_ids.flat_values)
  first_in_row = tf.equal(tf.ragged.range(token_ids.row_lengths()).flat_values, 0)
  return token_ids.with_flat_values(tf.logical_or(tf.logical_not(continues), first_in_row))


def word_ids_from_starts(starts: tf.RaggedTensor) -> tf.RaggedTensor:
  """int32 `[B, (tokens)]`: the index of the word each token belongs to, from 0 in each row."""
  counts = tf.cumsum(tf.cast(starts.flat_values, tf.int32))   # running word count over all rows
  before_row = tf.gather(tf.concat([[0], counts], 0), starts.row_splits[:-1])   # [B]
  return starts.with_flat_values(counts - tf.repeat(before_row, starts.row_lengths()) - 1)


def wordpiece_pieces(wordpiece: text.FastWordpieceTokenizer, words: tf.Tensor, max_chars_per_word: int,
                     unknown: int | str) -> tf.RaggedTensor:
  """string `[W]` -> `[W, (pieces)]`: each word's pieces from `wordpiece` (built with `no_pretokenization`
  and room for `max_chars_per_word` characters), and one `unknown` (the unknown token's id, or the token
  when `wordpiece` gives strings) for a word of more than `max_chars_per_word` characters."""
  too_long = tf.strings.length(words, unit="UTF8_CHAR") > max_chars_per_word
  # A long word gives no pieces, then one unknown token is appended to it.
  pieces = wordpiece.tokenize(tf.where(too_long, "", words))   # [words, (pieces)]
  unknowns = tf.fill([tf.reduce_sum(tf.cast(too_long, tf.int32))], tf.constant(unknown, pieces.dtype))
  return tf.concat([pieces, tf.RaggedTensor.from_row_lengths(unknowns, tf.cast(too_long, tf.int64))], axis=1)


class PackingEncoder(tf.Module):
  """What `TextEncoder` and `zoo.text.SentencePieceEncoder` share: the vocabulary and special ids,
  words from continuation pieces, and packing (`encode`). A subclass sets `_vocab`,
  `special_tokens`, the five `*_id`, `_is_continuation`, `seq_length`, `truncator` and
  `cls_type_id` (`_set_packing`), and gives `tokenize`."""

  _is_continuation: np.ndarray   # set by the subclass

  def _set_packing(self, tokens: Sequence[str], defaults: Mapping[str, str],
                   special_tokens: Mapping[str, str] | None, seq_length: int, truncator: str,
                   cls_type_id: int, missing_hint: Callable[[tuple[str, ...]], str]) -> None:
    """Checks and sets the vocabulary, the special tokens (`defaults` `{role: token}` overridden by
    `special_tokens`) and their ids, and the packing settings; `missing_hint` ends the error of a special
    token the vocabulary lacks."""
    unknown_roles = sorted(set(special_tokens or {}) - set(SPECIAL_ROLES))
    if unknown_roles:
      raise ValueError(f"special_tokens has unknown role(s) {unknown_roles}; "
                       f"the roles are {list(SPECIAL_ROLES)}")
    named = {**defaults, **(special_tokens or {})}
    special = tuple(str(named[role]) for role in SPECIAL_ROLES)
    index = {token: i for i, token in reversed(list(enumerate(tokens)))}
    missing = [token for token in special if token not in index]
    if missing:
      raise ValueError(f"the vocabulary lacks the special tokens {missing}; {missing_hint(special)}")
    if len(set(special)) != len(special):
      raise ValueError(f"special_tokens must name five different tokens, got {named}")
    if cls_type_id not in (0, 1, 2):
      raise ValueError(f"cls_type_id must be 0, 1 or 2, got {cls_type_id}")
    if seq_length < 3:
      raise ValueError(f"seq_length must be at least 3 ([CLS] a [SEP] b [SEP] needs room), got {seq_length}")
    if truncator not in TRUNCATORS:
      raise ValueError(f"truncator must be one of {TRUNCATORS}, got {truncator!r}")
    self._vocab = tuple(tokens)
    self.seq_length = int(seq_length)
    self.truncator = truncator
    self.cls_type_id = int(cls_type_id)
    self.special_tokens = dict(zip(SPECIAL_ROLES, special, strict=True))
    self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (index[token] for token in special)

  @property
  def vocab(self) -> list[str]:
    """The tokens; a token's id is its index."""
    return list(self._vocab)

  @property
  def vocab_size(self) -> int:
    return len(self._vocab)

  @property
  def special_ids(self) -> dict[str, int]:
    """`{token: id}` of the five special tokens (`{"[PAD]": 0, ...}` with BERT's names)."""
    return {self.special_tokens[role]: getattr(self, f"{role}_id") for role in SPECIAL_ROLES}

  @property
  def is_continuation(self) -> np.ndarray:
    """bool `[V]`: True for pieces that continue the word before them; whole-word masking groups by it."""
    return self._is_continuation.copy()

  def word_ids(self, token_ids: tf.RaggedTensor | tf.Tensor) -> tf.RaggedTensor:
    """int `[B, (tokens)]` ids (from `tokenize`) -> int32 `[B, (tokens)]` word index per token.

    Pieces of one word share its index; words count from 0 in each row.
    """
    with self.name_scope:
      return word_ids_from_starts(word_starts(token_ids, self._is_continuation))

  def encode(self, text_a: Strings, text_b: Strings | None = None) -> dict[str, tf.Tensor]:
    """Packs one or two segments into encoder inputs.

    Args:
      text_a: string `[B]`.
      text_b: optional string `[B]`, the second segment.

    Returns:
      A dict of int32 `[B, T]` tensors: `input_word_ids` (`[CLS] a [SEP] (b [SEP])`,
      `[PAD]` after), `input_mask` (1 = real token) and `input_type_ids` (`cls_type_id`
      for [CLS]; 0 for a and its [SEP]; 1 for b and its [SEP]; 0 on padding).
    """
    segments = [self.tokenize(text_a)]
    if text_b is not None:
      segments.append(self.tokenize(text_b))
    with self.name_scope:
      features = pack(segments, self.seq_length, cls_id=self.cls_id, sep_id=self.sep_id,
                      pad_id=self.pad_id, truncator=self.truncator, cls_type_id=self.cls_type_id)
      batch = tf.convert_to_tensor(text_a).shape[0]
      for value in features.values():
        value.set_shape([batch, self.seq_length])
      return features


class TextEncoder(PackingEncoder):
  """Encodes raw text into BERT encoder inputs, in the graph, with a WordPiece vocabulary.

  Gives the ids of BERT's reference `FullTokenizer` (Devlin et al., 2019, Sec. 3 and the
  released `tokenization.py`), with core TensorFlow and tensorflow-text ops; see the
  module docstring for the steps and `zoo/text/README.md` for the known differences.
  Works eagerly, inside `tf.function` and `tf.data.Dataset.map`, and inside SavedModels
  (load them after `import tensorflow_text`). Any batch size works, including 0; empty
  strings, very long strings and invalid UTF-8 do not fail.

  Args:
    vocab: a list of WordPiece tokens (index = id) or the path of a vocabulary file.
      It must hold the five special tokens (`special_tokens`).
    seq_length: T, the length of the packed inputs (at least 3).
    lower_case: BERT uncased: lower-cased, NFD, accents stripped. Build the
      vocabulary with the same setting.
    truncator: how a pair is trimmed (`zoo.text.packing`): `"longest_first"` (transformers'
      fast tokenizers' rule, the default), `"round_robin"` (tensorflow-text's `RoundRobinTrimmer`:
      the odd token to a when both segments are long; the zoo's rule before) or `"waterfall"`
      (the first segment keeps as much as fits).
    max_chars_per_word: words of more characters (code points) become one `[UNK]`
      (Hugging Face's BERT tokenizers: 100).
    special_tokens: `{"pad": ..., "unk": ..., "cls": ..., "sep": ..., "mask": ...}`,
      the vocabulary's names of the special tokens; roles left out keep BERT's names
      (`[PAD]`, `[UNK]`, `[CLS]`, `[SEP]`, `[MASK]`).
    cls_type_id: the token type of [CLS] (0 as BERT; 2 as Funnel-Transformer).
    name: the module name.

  Example:

  >>> encoder = TextEncoder(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "dog",
  ...                        "##s", "run", "."], seq_length=8)
  >>> features = encoder.encode(tf.constant(["The dogs run."]))
  >>> features["input_word_ids"].numpy()
  array([[2, 5, 6, 7, 8, 9, 3, 0]], dtype=int32)
  >>> encoder.word_ids(encoder.tokenize(tf.constant(["The dogs run."]))).to_list()
  [[0, 1, 1, 2, 3]]
  """

  def __init__(self, vocab: str | Sequence[str], *, seq_length: int = 128, lower_case: bool = True,
               truncator: str = DEFAULT_TRUNCATOR, max_chars_per_word: int = MAX_CHARS_PER_WORD,
               special_tokens: dict[str, str] | None = None, cls_type_id: int = 0,
               name: str | None = None) -> None:
    super().__init__(name=name)
    tokens = load_vocab(vocab) if isinstance(vocab, str) else [str(token) for token in vocab]
    if not tokens:
      raise ValueError("the vocabulary is empty")
    blank = [i for i, token in enumerate(tokens) if not token.strip()]
    if blank:
      raise ValueError(f"the vocabulary has empty or blank tokens at ids {blank[:10]}")
    duplicates = sorted(token for token, count in collections.Counter(tokens).items() if count > 1)
    if duplicates:
      raise ValueError(f"the vocabulary repeats tokens {duplicates[:10]}; each token needs one id")
    self._set_packing(
        tokens, dict(zip(SPECIAL_ROLES, SPECIAL_TOKENS, strict=True)), special_tokens, seq_length, truncator,
        cls_type_id, lambda special: (f"TextEncoder needs all of {list(special)} (build one with `python -m "
                                      "zoo.text build-vocab`, or pass the vocabulary's own names as "
                                      "special_tokens)"))
    self.lower_case = bool(lower_case)
    if max_chars_per_word < 1:
      raise ValueError(f"max_chars_per_word must be positive, got {max_chars_per_word}")
    self.max_chars_per_word = int(max_chars_per_word)
    self._is_continuation = continuation_table(tokens)
    # Words come split (`split_words`); the byte limit lets every word of up to
    # `max_chars_per_word` characters through, `tokenize` applies the character limit.
    self._wordpiece = text.FastWordpieceTokenizer(
        vocab=list(tokens), suffix_indicator=SUFFIX_INDICATOR,
        max_bytes_per_word=_MAX_UTF8_BYTES * self.max_chars_per_word, token_out_type=tf.int32,
        unknown_token=self.special_tokens["unk"], no_pretokenization=True)

  def settings(self) -> dict[str, Any]:
    """The tokenizer's arguments besides the vocabulary and length, as JSON-ready values.

    `TextEncoder(vocab, seq_length=..., **encoder.settings())` tokenizes as `encoder` does.
    """
    return dict(lower_case=self.lower_case, truncator=self.truncator,
                max_chars_per_word=self.max_chars_per_word, special_tokens=dict(self.special_tokens),
                cls_type_id=self.cls_type_id)

  def normalize(self, texts: Strings) -> tf.Tensor:
    """string `[B]` -> string `[B]`: steps 1–2 (valid UTF-8, no control characters, optionally uncased)."""
    with self.name_scope:
      return normalize(texts, self.lower_case)

  def split_words(self, texts: Strings) -> tf.RaggedTensor:
    """string `[B]` -> string `[B, (words)]`: steps 1–3, the words WordPiece splits."""
    texts = tf.convert_to_tensor(texts, tf.string)
    if texts.shape.rank != 1:
      raise ValueError(f"TextEncoder takes a batch of strings of shape [B], got shape {texts.shape}")
    with self.name_scope:
      return split_words(texts, self.lower_case)

  def split_words_with_offsets(self, texts: Strings
                               ) -> tuple[tf.RaggedTensor, tf.RaggedTensor, tf.RaggedTensor]:
    """string `[B]` -> (words `[B, (words)]`, starts, ends int64 `[B, (words)]`): the words of
    `split_words` with the byte range `[start, end)` of each in the text (in
    `zoo.text.normalize.valid_utf8(texts)`, the text itself when it is valid UTF-8)."""
    texts = tf.convert_to_tensor(texts, tf.string)
    if texts.shape.rank != 1:
      raise ValueError(f"TextEncoder takes a batch of strings of shape [B], got shape {texts.shape}")
    with self.name_scope:
      return split_words_with_offsets(texts, self.lower_case)

  def tokenize(self, texts: Strings) -> tf.RaggedTensor:
    """string `[B]` -> int32 `[B, (tokens)]` WordPiece ids, no special tokens, no truncation."""
    words = self.split_words(texts)
    with self.name_scope:
      return words.with_flat_values(self._pieces(words.flat_values)).merge_dims(1, 2)

  def tokenize_with_offsets(self, texts: Strings) -> tuple[tf.RaggedTensor, tf.RaggedTensor, tf.RaggedTensor]:
    """string `[B]` -> (ids int32 `[B, (tokens)]`, starts int64 `[B, (tokens)]`, ends int64 `[B, (tokens)]`).

    The ids of `tokenize`, each with the byte range `[start, end)` of its word in the
    text (in `zoo.text.normalize.valid_utf8(texts)`, the text itself when it is valid
    UTF-8): the pieces of one word share their word's range. Extractive question
    answering maps answers between characters and tokens with them.
    """
    texts = tf.convert_to_tensor(texts, tf.string)
    if texts.shape.rank != 1:
      raise ValueError(f"TextEncoder takes a batch of strings of shape [B], got shape {texts.shape}")
    with self.name_scope:
      words, starts, ends = split_words_with_offsets(texts, self.lower_case)
      pieces = self._pieces(words.flat_values)   # [words, (pieces)]
      per_piece = lambda values: tf.repeat(values, pieces.row_lengths())   # noqa: E731
      ids = words.with_flat_values(pieces).merge_dims(1, 2)
      return ids, ids.with_flat_values(per_piece(starts.flat_values)), ids.with_flat_values(
          per_piece(ends.flat_values))

  def _pieces(self, words: tf.Tensor) -> tf.RaggedTensor:
    """string `[W]` -> int32 `[W, (pieces)]`: each word's WordPiece ids (one [UNK] for a long word)."""
    return wordpiece_pieces(self._wordpiece, words, self.max_chars_per_word, self.unk_id)

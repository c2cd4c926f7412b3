"""BERT's text normalisation and word splitting, in the graph.

Follows the reference `BasicTokenizer` of BERT's `tokenization.py` (Devlin et al.,
2019; Model Garden's `official/nlp/tools/tokenization.py`), character class by
character class, with core TensorFlow ops and one tensorflow-text op
(`NormalizeUTF8`, for NFD), so that exported SavedModels run on any TF Serving
that links tensorflow-text 2.12 (see `export/serving_ops.py`):

1. Invalid UTF-8 bytes are dropped (the reference decodes with `errors="ignore"`).
2. NUL, U+FFFD and control characters (categories Cc and Cf, but tab, newline and
   carriage return) are removed: `"a\\u200bb"` is one word, `"ab"`.
3. With `lower_case`: Unicode lower-casing (`str.lower`: full case mapping, Greek
   final sigma in context; no case folding, so `ß`, ligatures and full-width letters
   stay), NFD, and non-spacing marks (Mn) dropped. Without it the text stays as is
   (no NFD either).
4. Words are split on whitespace (space, tab, newline, carriage return, category
   Zs, and U+2028 / U+2029, on which the reference's `str.split` also splits), and
   every punctuation character (ASCII non-alphanumerics, category P*) and every CJK
   ideograph (the reference's `_is_chinese_char` blocks) is a word of its own.

Axes: B batch, W words.

Example:

>>> split_words(tf.constant(["Héllo, WORLD!\\u2028ok\\u200b?"])).to_list()
[[b'hello', b',', b'world', b'!', b'ok', b'?']]
"""

from collections.abc import Sequence
from typing import TypeAlias

import tensorflow as tf
import tensorflow_text as text

# A batch of texts as the functions here take it: a string tensor, or what `tf.convert_to_tensor`
# makes one of.
Strings: TypeAlias = tf.Tensor | Sequence[str] | Sequence[bytes]

# Removed (the reference's `_clean_text`): NUL, U+FFFD, Cc but \t \n \r (Cc is exactly
# U+0000-U+001F and U+007F-U+009F), and Cf.
REMOVED = r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\p{Cf}\x{fffd}]"
# Word separators: the reference's `_is_whitespace` (" ", \t, \n, \r, Zs) and the
# characters its `str.split()` splits on that survive cleaning (U+2028, U+2029; the
# others, U+001C-U+001F, U+0085, \v, \f, are Cc and already removed).
WHITESPACE = r"[ \t\n\r\p{Zs}\x{2028}\x{2029}]"
# The reference's `_is_punctuation`: ASCII 33-47, 58-64, 91-96, 123-126 and category P*.
PUNCTUATION = r"[!-/:-@\[-`{-~\p{P}]"
# The reference's `_is_chinese_char`.
CJK = (r"[\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{20000}-\x{2A6DF}\x{2A700}-\x{2B73F}"
       r"\x{2B740}-\x{2B81F}\x{2B820}-\x{2CEAF}\x{F900}-\x{FAFF}\x{2F800}-\x{2FA1F}]")


def valid_utf8(texts: Strings) -> tf.Tensor:
  """string `[...]` -> string `[...]`: step 1, the text without its invalid UTF-8 bytes."""
  texts = tf.convert_to_tensor(texts, tf.string)
  return tf.strings.unicode_transcode(texts, input_encoding="UTF-8", output_encoding="UTF-8", errors="ignore")


def normalize(texts: Strings, lower_case: bool = True) -> tf.Tensor:
  """string `[...]` -> string `[...]`: steps 1-3 (valid UTF-8, no control characters, uncased)."""
  texts = tf.strings.regex_replace(valid_utf8(texts), REMOVED, "")
  if lower_case:
    texts = tf.strings.lower(texts, encoding="utf-8")
    texts = text.normalize_utf8(texts, "NFD")
    texts = tf.strings.regex_replace(texts, r"\p{Mn}", "")
  return texts


def split_words(texts: Strings, lower_case: bool = True) -> tf.RaggedTensor:
  """string `[B]` -> string `[B, (W)]`: the normalised words, as the reference's `BasicTokenizer`."""
  texts = tf.convert_to_tensor(texts, tf.string)
  if texts.shape.rank != 1:
    raise ValueError(f"split_words takes a batch of strings of shape [B], got shape {texts.shape}")
  keep = f"{PUNCTUATION}|{CJK}"
  return text.regex_split(normalize(texts, lower_case), f"{WHITESPACE}+|{keep}", keep)


def split_words_with_offsets(texts: Strings, lower_case: bool = True
                             ) -> tuple[tf.RaggedTensor, tf.RaggedTensor, tf.RaggedTensor]:
  """string `[B]` -> (words string `[B, (W)]`, starts int64 `[B, (W)]`, ends int64 `[B, (W)]`).

  The words of `split_words`, each with the byte range `[start, end)` it comes from in
  `valid_utf8(texts)` (the text itself when it is valid UTF-8). The ranges come from
  splitting the text before normalising it, which gives the same words: a separator
  is whitespace, punctuation or a CJK ideograph, and normalising neither makes nor
  removes one (pieces that normalise to nothing, a lone control character or accent,
  are dropped). The words themselves are those of `split_words`, normalised in their
  whole text, since lower-casing depends on the context (Greek final sigma); a text
  whose two splits would still disagree in their number of words keeps the words
  normalised piece by piece.
  """
  texts = tf.convert_to_tensor(texts, tf.string)
  if texts.shape.rank != 1:
    raise ValueError(f"split_words_with_offsets takes a batch of strings of shape [B], got {texts.shape}")
  keep = f"{PUNCTUATION}|{CJK}"
  # The splitter stops at NUL; U+0001 has the same length and is removed as well.
  raw = tf.strings.regex_replace(valid_utf8(texts), "\x00", "\x01")
  pieces, starts, ends = text.regex_split_with_offsets(raw, f"{WHITESPACE}+|{keep}", keep)
  normalized = pieces.with_flat_values(normalize(pieces.flat_values, lower_case))
  kept = tf.strings.length(normalized) > 0
  normalized, starts, ends = (tf.ragged.boolean_mask(values, kept) for values in (normalized, starts, ends))
  words = split_words(texts, lower_case)
  same = tf.equal(words.row_lengths(), normalized.row_lengths())   # [B]

  def rows(values: tf.RaggedTensor, keep_rows: tf.Tensor) -> tf.RaggedTensor:
    return tf.ragged.boolean_mask(values, values.with_flat_values(tf.repeat(keep_rows, values.row_lengths())))

  return tf.concat([rows(words, same), rows(normalized, ~same)], axis=1), starts, ends

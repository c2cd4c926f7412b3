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

`transformers_words` gives instead the words of transformers' BERT and Funnel tokenizers (the
`tokenizers` library's `BertNormalizer` and `BertPreTokenizer`), which differ from the
reference on a few classes of characters: private-use characters (Co) are removed too; the
lower-casing maps each character alone (`"ΟΔΟΣ"` becomes `"οδοσ"`, no final sigma) after the
accents are stripped; casing, accent stripping and CJK splitting are separate settings; its
character tables are older than TensorFlow's (the characters Unicode assigned since, which it
does not count as punctuation, format characters or non-spacing marks, are listed here), and its
CJK blocks skip U+2B820-U+2B91F. Left: about a hundred capital letters encoded since Unicode 14
(Vithkuqi, ...), which its lower-casing knows and `tf.strings.lower` does not.

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

# transformers' rules (`transformers_words`). Its character tables are Unicode 8's: these characters,
# which TensorFlow's put in the classes P, Mn and Cf, are not punctuation, marks or format characters there.
_HF_NOT_P = (r"\x{61d}\x{9fd}\x{a76}\x{c77}\x{c84}\x{1b7d}-\x{1b7e}\x{2e43}-\x{2e4f}\x{2e52}-\x{2e5d}"
             r"\x{10ead}\x{10f55}-\x{10f59}\x{10f86}-\x{10f89}\x{1144b}-\x{1144f}\x{1145a}-\x{1145b}\x{1145d}"
             r"\x{11660}-\x{1166c}\x{116b9}\x{1183b}\x{11944}-\x{11946}\x{119e2}\x{11a3f}-\x{11a46}"
             r"\x{11a9a}-\x{11a9c}\x{11a9e}-\x{11aa2}\x{11b00}-\x{11b09}\x{11c41}-\x{11c45}\x{11c70}-\x{11c71}"
             r"\x{11ef7}-\x{11ef8}\x{11f43}-\x{11f4f}\x{11fff}\x{12ff1}-\x{12ff2}\x{16e97}-\x{16e9a}\x{16fe2}"
             r"\x{1e95e}-\x{1e95f}")
_HF_NOT_MN = (r"\x{7fd}\x{898}-\x{89f}\x{8ca}-\x{8e1}\x{9fe}\x{afa}-\x{aff}\x{b55}\x{c04}\x{c3c}\x{d00}"
              r"\x{d3b}-\x{d3c}\x{d81}\x{eba}\x{ece}\x{180f}\x{1885}-\x{1886}\x{1abf}-\x{1ace}\x{1df6}-\x{1dfb}"
              r"\x{a82c}\x{a8c5}\x{a8ff}\x{a9bd}\x{10d24}-\x{10d27}\x{10eab}-\x{10eac}\x{10efd}-\x{10eff}"
              r"\x{10f46}-\x{10f50}\x{10f82}-\x{10f85}\x{11070}\x{11073}-\x{11074}\x{110c2}\x{111c9}\x{111cf}"
              r"\x{1123e}\x{11241}\x{1133b}\x{11438}-\x{1143f}\x{11442}-\x{11444}\x{11446}\x{1145e}"
              r"\x{1182f}-\x{11837}\x{11839}-\x{1183a}\x{1193b}-\x{1193c}\x{1193e}\x{11943}\x{119d4}-\x{119d7}"
              r"\x{119da}-\x{119db}\x{119e0}\x{11a01}-\x{11a0a}\x{11a33}-\x{11a38}\x{11a3b}-\x{11a3e}\x{11a47}"
              r"\x{11a51}-\x{11a56}\x{11a59}-\x{11a5b}\x{11a8a}-\x{11a96}\x{11a98}-\x{11a99}\x{11c30}-\x{11c36}"
              r"\x{11c38}-\x{11c3d}\x{11c3f}\x{11c92}-\x{11ca7}\x{11caa}-\x{11cb0}\x{11cb2}-\x{11cb3}"
              r"\x{11cb5}-\x{11cb6}\x{11d31}-\x{11d36}\x{11d3a}\x{11d3c}-\x{11d3d}\x{11d3f}-\x{11d45}\x{11d47}"
              r"\x{11d90}-\x{11d91}\x{11d95}\x{11d97}\x{11ef3}-\x{11ef4}\x{11f00}-\x{11f01}\x{11f36}-\x{11f3a}"
              r"\x{11f40}\x{11f42}\x{13440}\x{13447}-\x{13455}\x{16f4f}\x{16fe4}\x{1cf00}-\x{1cf2d}"
              r"\x{1cf30}-\x{1cf46}\x{1e000}-\x{1e006}\x{1e008}-\x{1e018}\x{1e01b}-\x{1e021}\x{1e023}-\x{1e024}"
              r"\x{1e026}-\x{1e02a}\x{1e08f}\x{1e130}-\x{1e136}\x{1e2ae}\x{1e2ec}-\x{1e2ef}\x{1e4ec}-\x{1e4ef}"
              r"\x{1e944}-\x{1e94a}")
_HF_NOT_CF = r"\x{890}-\x{891}\x{8e2}\x{110cd}\x{13430}-\x{1343f}"
# Removed with clean_text: NUL, U+FFFD, and its `is_control` (Cc but \t \n \r, Cf, Co).
HF_REMOVED = rf"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\p{{Co}}\x{{fffd}}]|[^\P{{Cf}}{_HF_NOT_CF}]"
# Word separators: Rust's `char::is_whitespace` (Unicode's White_Space property).
HF_WHITESPACE = r"[\t\n\x0b\x0c\r \x{85}\p{Zs}\x{2028}\x{2029}]"
# ASCII punctuation and Unicode 8's P* (U+166D and U+111C9 were Po then).
HF_PUNCTUATION = rf"[!-/:-@\[-`{{-~\x{{166d}}\x{{111c9}}]|[^\P{{P}}{_HF_NOT_P}]"
# The marks accent stripping removes: Unicode 8's Mn (U+1734 was Mn then).
HF_MARKS = rf"[^\P{{Mn}}{_HF_NOT_MN}]|\x{{1734}}"
# Its CJK blocks: the reference's, but U+2B920 where that has U+2B820.
HF_CJK = CJK.replace(r"\x{2B820}", r"\x{2B920}")


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


def transformers_normalize(texts: Strings, lowercase: bool = True, strip_accents: bool | None = None,
                           clean_text: bool = True) -> tf.Tensor:
  """string `[...]` -> string `[...]`: the text as transformers' `BertNormalizer` leaves it (but
  for CJK padding, which `transformers_words` does by splitting).

  Args:
    texts: the texts (invalid UTF-8 bytes are dropped first; transformers takes Python strings).
    lowercase: lower-case each character (after stripping accents, as transformers does).
    strip_accents: NFD and non-spacing marks removed; None follows `lowercase`.
    clean_text: remove NUL, U+FFFD and control, format and private-use characters.
  """
  texts = valid_utf8(texts)
  if clean_text:
    texts = tf.strings.regex_replace(texts, HF_REMOVED, "")
  if lowercase if strip_accents is None else strip_accents:   # NFD, marks removed
    texts = tf.strings.regex_replace(text.normalize_utf8(texts, "NFD"), HF_MARKS, "")
  if lowercase:
    # One character at a time: a final capital sigma becomes σ, not the ς of Unicode's context rule.
    texts = tf.strings.lower(tf.strings.regex_replace(texts, "\u03a3", "\u03c3"), encoding="utf-8")
  return texts


def transformers_words(texts: Strings, lowercase: bool = True, strip_accents: bool | None = None,
                       split_on_cjk: bool = True, clean_text: bool = True) -> tf.RaggedTensor:
  """string `[B]` -> string `[B, (W)]`: the words transformers' BERT and Funnel tokenizers give WordPiece.

  `transformers_normalize`, then words split on whitespace, with each punctuation character and,
  with `split_on_cjk` (transformers' `tokenize_chinese_chars`), each CJK ideograph a word of its own.
  """
  texts = tf.convert_to_tensor(texts, tf.string)
  if texts.shape.rank != 1:
    raise ValueError(f"transformers_words takes a batch of strings of shape [B], got shape {texts.shape}")
  keep = f"{HF_PUNCTUATION}|{HF_CJK}" if split_on_cjk else HF_PUNCTUATION
  return text.regex_split(transformers_normalize(texts, lowercase, strip_accents, clean_text),
                          f"{HF_WHITESPACE}+|{keep}", keep)

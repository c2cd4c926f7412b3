"""The zoo's keras-hub tokenizers: WordPiece with a model directory's vocabulary, casing and special tokens,
giving the ids of `zoo.text.TextEncoder` or of transformers' tokenizers on any text.

keras-hub's `WordPieceTokenizer` splits and case-folds text its own way (NFKC case folding,
words split at control characters, not at non-ASCII spaces, at most 100 UTF-8 bytes a word).
`ZooWordPiece` keeps its API (`tokenize`, `detokenize`, the vocabulary, the special tokens, the
config and the saved vocabulary) and tokenizes as one of two references, `rules`:

- `"bert"`: `zoo.text.TextEncoder`'s (BERT's reference tokenizer; a zoo model directory's
  tokenizer), words of up to `max_chars_per_word` characters (default the encoder's, 400).
- `"transformers"`: transformers' `BertTokenizer` and `FunnelTokenizer`
  (`zoo.text.normalize.transformers_words`), words of up to 100 characters, and its added
  tokens (`added_tokens`: the special tokens, ...) whole wherever a text holds them.

Both run TensorFlow ops (`zoo.text.normalize`, tensorflow-text's `FastWordpieceTokenizer`): as
graph ops in `tf.data` and `tf.function`, and eagerly when called outside them (keras-hub's Python
path), returning what that path returns (lists, or arrays with `sequence_length`). `split=False`
(pre-split words) keeps keras-hub's WordPiece on the words.
"""

import keras_hub
import numpy as np
from keras_hub.src.utils.tensor_utils import canonicalize_python_string_inputs
from keras_hub.src.utils.tensor_utils import is_int_dtype
from keras_hub.src.utils.tensor_utils import preprocessing_function
from keras_hub.src.utils.tensor_utils import restore_outer_shape

from zoo.keras3.loading import DEFAULT_SPECIAL_TOKENS
from zoo.lazy import lazy_module

# keras-hub's tokenizers run on TensorFlow's string ops whatever Keras' backend (in `tf.data`, as keras-hub's
# own do); imported when a text is first tokenized, so `import zoo.keras3` loads no TensorFlow for it.
tf = lazy_module("tensorflow")
tf_text = lazy_module("tensorflow_text")
normalize = lazy_module("zoo.text.normalize")
text_tokenizer = lazy_module("zoo.text.tokenizer")

RULES = ("bert", "transformers")
# Longest word (characters) transformers' WordPiece splits.
TRANSFORMERS_MAX_CHARS_PER_WORD = 100
# UTF-8 bytes per character at most (FastWordpiece's word limit counts bytes).
_MAX_UTF8_BYTES = 4


def resolved_rules(rules, lowercase, strip_accents, split_on_cjk):
  """`rules` checked against the casing settings; None (a config saved before the setting existed):
  "bert" where the settings are `TextEncoder`'s (accents stripped exactly when lower-casing, CJK split),
  else "transformers"."""
  bert_settings = bool(strip_accents) == bool(lowercase) and split_on_cjk
  if rules is None:
    return "bert" if bert_settings else "transformers"
  if rules not in RULES:
    raise ValueError(f"rules must be one of {RULES}, got {rules!r}")
  if rules == "bert" and not bert_settings:
    raise ValueError(f"rules='bert' (zoo.text.TextEncoder's) strips accents exactly when it lower-cases and "
                     f"splits CJK characters; lowercase={lowercase}, strip_accents={strip_accents}, "
                     f"split_on_cjk={split_on_cjk} need rules='transformers'")
  return rules


def _literal(token):
  """A regex (RE2) matching `token` literally."""
  return "".join(char if char.isalnum() or ord(char) > 127 else f"\\x{{{ord(char):x}}}" for char in token)


def _alternatives(tokens):
  """A regex matching any of `tokens`, the longest first where several start at one place (transformers'
  added-token matching); None for no tokens."""
  tokens = sorted(set(tokens), key=lambda token: (-len(token), token))
  return "|".join(_literal(token) for token in tokens) or None


def _split_out(texts, pattern):
  """string `[N]` -> (pieces string `[N, (P)]`, bool `[N·P]`): the texts cut at the matches of `pattern`,
  kept as pieces of their own (True)."""
  pieces = tf_text.regex_split(texts, pattern, pattern)
  return pieces, tf.strings.regex_full_match(pieces.flat_values, pattern)


class ZooWordPiece:
  """What the zoo's keras-hub WordPiece tokenizers add to keras-hub's `WordPieceTokenizer` (a mixin before
  it in the bases): tokenization by `rules` (see the module docstring), with their settings
  `max_chars_per_word`, `clean_text`, `added_tokens` and `normalized_added_tokens` (transformers').

  A subclass calls `_set_rules` before `WordPieceTokenizer.__init__` (which builds the WordPiece model).
  """

  def _set_rules(self, rules, lowercase, strip_accents, split_on_cjk, max_chars_per_word, clean_text,
                 added_tokens, normalized_added_tokens):
    self.rules = resolved_rules(rules, lowercase, strip_accents, split_on_cjk)
    if max_chars_per_word is None:
      max_chars_per_word = (text_tokenizer.MAX_CHARS_PER_WORD if self.rules == "bert"
                            else TRANSFORMERS_MAX_CHARS_PER_WORD)
    if int(max_chars_per_word) < 1:
      raise ValueError(f"max_chars_per_word must be positive, got {max_chars_per_word}")
    self.max_chars_per_word = int(max_chars_per_word)
    self.clean_text = bool(clean_text)
    if not self.clean_text and self.rules == "bert":
      raise ValueError("clean_text=False is a setting of rules='transformers' (zoo.text.TextEncoder always "
                       "removes control characters)")
    self.added_tokens = list(added_tokens or [])
    self.normalized_added_tokens = list(normalized_added_tokens or [])

  def _set_vocabulary_tf(self):
    self._fast_word_piece = tf_text.FastWordpieceTokenizer(
        vocab=self.vocabulary, token_out_type=self.compute_dtype, suffix_indicator=self.suffix_indicator,
        unknown_token=self.oov_token, no_pretokenization=True, support_detokenization=True,
        max_bytes_per_word=_MAX_UTF8_BYTES * self.max_chars_per_word)

  def get_config(self):
    config = super().get_config()
    config.update(rules=self.rules, max_chars_per_word=self.max_chars_per_word, clean_text=self.clean_text,
                  split_on_cjk=self.split_on_cjk, added_tokens=list(self.added_tokens),
                  normalized_added_tokens=list(self.normalized_added_tokens))
    return config

  def _whole_tokens(self):
    """The tokens kept whole where the text holds them: `added_tokens`, and keras-hub's special tokens
    with `special_tokens_in_strings`."""
    return [*self.added_tokens, *(self._special_tokens_for_splitting() or [])]

  def _words(self, texts):
    """string `[N]` -> string `[N, (W)]`: the words `rules` give WordPiece."""
    if self.rules == "bert":
      return normalize.split_words(texts, self.lowercase)
    return normalize.transformers_words(texts, self.lowercase, self.strip_accents, self.split_on_cjk,
                                        self.clean_text)

  def _normalized(self, texts):
    if self.rules == "bert":
      return normalize.normalize(texts, self.lowercase)
    return normalize.transformers_normalize(texts, self.lowercase, self.strip_accents, self.clean_text)

  def _wordpiece(self, words):
    """string `[N, (W)]` -> `[N, (T)]`: the words' pieces, one unknown token for a long word."""
    unknown = self.token_to_id(self.oov_token) if is_int_dtype(self.compute_dtype) else self.oov_token
    pieces = text_tokenizer.wordpiece_pieces(self._fast_word_piece, words.flat_values,
                                             self.max_chars_per_word, unknown)
    return words.with_flat_values(pieces).merge_dims(1, 2)

  def _with_whole(self, texts, pattern, tokenize):
    """string `[N]` -> `[N, (T)]`: `tokenize` (string `[M]` -> `[M, (T)]`) on the text between the matches
    of the regex `pattern`, each match one token (a token of the vocabulary)."""
    if pattern is None:
      return tokenize(texts)
    pieces, kept = _split_out(texts, pattern)
    flat = pieces.flat_values
    whole = self._fast_word_piece.tokenize(tf.where(kept, flat, ""))   # [P, (1)] for a match, else [P, (0)]
    tokens = tf.concat([tokenize(tf.where(kept, "", flat)), whole], axis=1)
    return pieces.with_flat_values(tokens).merge_dims(1, 2)

  def _token_ids(self, texts):
    """string `[N]` -> `[N, (T)]`: the tokens (ids, or strings with a string dtype) of each text."""
    normalized = _alternatives(self.normalized_added_tokens)

    def between_added(pieces):   # the normalised text's added tokens (normalising twice changes nothing)
      return self._with_whole(self._normalized(pieces) if normalized else pieces, normalized,
                              lambda words: self._wordpiece(self._words(words)))

    # The splitter stops at NUL: U+0001 takes its place (both are control characters, which cleaning removes).
    texts = tf.strings.regex_replace(normalize.valid_utf8(texts), "\x00", "\x01")
    return self._with_whole(texts, _alternatives(self._whole_tokens()), between_added)

  def tokenize(self, inputs):
    if not self.split:   # pre-split words: keras-hub's WordPiece on them
      return super().tokenize(inputs)
    self._check_vocabulary()
    if self._use_tf_workflow():
      return self._zoo_tokenize_tf(inputs)
    return self._zoo_tokenize_python(inputs)

  @preprocessing_function
  def _zoo_tokenize_tf(self, inputs):
    self._maybe_initialized_tf()
    if not isinstance(inputs, tf.RaggedTensor):
      inputs = tf.convert_to_tensor(inputs)
    unbatched = inputs.shape.rank == 0
    if unbatched:
      inputs = tf.expand_dims(inputs, 0)
    if isinstance(inputs, tf.RaggedTensor):
      tokens = inputs.with_flat_values(self._token_ids(inputs.flat_values))
    else:   # [B, ...] -> [B, ..., (T)]
      tokens = self._token_ids(tf.reshape(inputs, [-1]))
      for axis in range(inputs.shape.rank - 1, 0, -1):
        tokens = tf.RaggedTensor.from_uniform_row_length(tokens, tf.shape(inputs, out_type=tf.int64)[axis])
    if self.sequence_length:
      shape = tokens.shape.as_list()
      shape[-1] = self.sequence_length
      tokens = tokens.to_tensor(shape=shape)
    if unbatched:
      tokens = tf.squeeze(tokens, 0)
      tf.ensure_shape(tokens, shape=[self.sequence_length])
    return tokens

  def _zoo_tokenize_python(self, inputs):
    """keras-hub's Python path: the outputs its `WordPieceTokenizer` gives there (lists, arrays with
    `sequence_length`), the tokens computed with TensorFlow eagerly."""
    texts, batched, outer_shape = canonicalize_python_string_inputs(inputs, errors="ignore")
    with tf.device("cpu"):
      rows = self._token_ids(tf.constant(texts, tf.string)).to_list()
    integers = is_int_dtype(self.compute_dtype)
    if not integers:
      rows = [[token.decode("utf-8") for token in row] for row in rows]
    if self.sequence_length:
      pad = 0 if integers else ""
      rows = [row[:self.sequence_length] + [pad] * (self.sequence_length - len(row)) for row in rows]
      if integers:
        rows = np.array(rows, dtype=self.compute_dtype).reshape(len(rows), self.sequence_length)
    if outer_shape is not None:
      return restore_outer_shape(rows, outer_shape)
    if not batched:
      rows = rows[0]
      if not self.sequence_length and integers:
        rows = np.array(rows, dtype=self.compute_dtype)
    return rows


class ZooTokenizer(ZooWordPiece, keras_hub.tokenizers.WordPieceTokenizer):
  """WordPiece with a zoo model directory's vocabulary, casing and special tokens.

  Args:
    vocabulary: the tokens (index = id) or a vocabulary file.
    lowercase: lower-case first (BERT uncased, the zoo's default).
    special_tokens_names: `{role: token}` for `pad`, `unk`, `cls`, `sep`, `mask`
      (defaults BERT's `[PAD]`, ...).
    strip_accents: strip accents first; None (the default) follows `lowercase`, as BERT's
      uncased and cased tokenizers do (a Hugging Face directory can set it either way).
    rules: `"bert"` (`zoo.text.TextEncoder`'s, a zoo model directory's) or `"transformers"` (a
      Hugging Face directory's); see the module docstring. None: "bert" unless the casing
      settings are ones only transformers has (what a config saved before this setting means).
    max_chars_per_word: a longer word is one unknown token (None: 400 with "bert", as
      `TextEncoder`, 100 with "transformers").
    clean_text: with "transformers", remove control and format characters (FunnelTokenizer's
      `clean_text`).
    added_tokens, normalized_added_tokens: tokens kept whole where the text, or the normalised
      text, holds them (transformers' added tokens: `zoo.convert.tokenizer_files.keras_hub_settings`).
    **kwargs: `WordPieceTokenizer`'s (e.g. `split_on_cjk`, which the config keeps too).
  """

  def __init__(self, vocabulary=None, lowercase=True, special_tokens_names=None, strip_accents=None,
               rules=None, max_chars_per_word=None, clean_text=True, added_tokens=None,
               normalized_added_tokens=None, **kwargs):
    names = {**DEFAULT_SPECIAL_TOKENS, **(special_tokens_names or {})}
    self.special_tokens_names = names
    for role in ("cls", "sep", "pad", "mask"):
      self._add_special_token(names[role], f"{role}_token")
    self._add_special_token(names["cls"], "start_token")
    self._add_special_token(names["sep"], "end_token")
    kwargs.pop("oov_token", None)
    strip_accents = lowercase if strip_accents is None else strip_accents
    self._set_rules(rules, lowercase, strip_accents, kwargs.get("split_on_cjk", True), max_chars_per_word,
                    clean_text, added_tokens, normalized_added_tokens)
    super().__init__(vocabulary=vocabulary, lowercase=lowercase, strip_accents=strip_accents,
                     oov_token=names["unk"], **kwargs)

  def get_config(self):
    config = super().get_config()   # with `strip_accents` as applied
    config.update(special_tokens_names=dict(self.special_tokens_names))
    return config

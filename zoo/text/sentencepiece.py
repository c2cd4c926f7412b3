"""In-graph SentencePiece text encoding (ALBERT's tokenizer): raw strings in, packed encoder inputs out.

Axes: B batch, T sequence length (`seq_length`), V vocabulary size.

`SentencePieceEncoder` has the interface of `zoo.text.TextEncoder` (`encode`, `tokenize`,
`word_ids`, the special ids, `settings()`), with a SentencePiece model (`spiece.model`, the
serialized `ModelProto`) in place of a WordPiece vocabulary. The model sits in the graph
(tensorflow-text's `SentencepieceTokenizer`, whose ops TF Serving 2.12 and later link), so
a SavedModel needs no asset. Load such a SavedModel after `import tensorflow_text`.

Steps, as Hugging Face's `AlbertTokenizer` takes them (`tokenizer.json`: its normalizers,
then `WhitespaceSplit` and `Metaspace`):

1. Invalid UTF-8 bytes are dropped (Python strings cannot hold them).
2. "``" and "''" become '"'.
3. Unless `keep_accents`: NFKD, and non-spacing marks (Mn) dropped.
4. With `lower_case`: Unicode lower-casing.
5. Runs of whitespace (Unicode White_Space) become one space; leading and trailing
   whitespace is dropped.
6. The SentencePiece model on each word: its own normalization (ALBERT's: `nmt_nfkc`, the
   `Precompiled` normalizer of `tokenizer.json`), "▁" before the word, and its pieces
   (unigram or BPE). A piece the model lacks is `<unk>`.
7. Packing (`zoo.text.packing`): `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`, trimmed to
   `seq_length` and padded, as `TextEncoder` packs.

A piece that does not start with "▁" continues the word before it (`is_continuation`,
`word_ids`: whole-word masking groups by them). Word offsets in the text
(`tokenize_with_offsets`, which question answering and tagging use) are not provided:
SentencePiece's offsets point into its normalized text, not into the input.

Example:

  >>> import sentencepiece  # doctest: +SKIP
  >>> encoder = SentencePieceEncoder("spiece.model", seq_length=8)  # doctest: +SKIP
  >>> encoder.encode(tf.constant(["Hello world"]))["input_word_ids"]  # doctest: +SKIP
"""

from collections.abc import Iterator
from collections.abc import Sequence
from typing import Any
from typing import NoReturn

import numpy as np
import tensorflow as tf
import tensorflow_text as text

from zoo.text.normalize import Strings
from zoo.text.normalize import valid_utf8
from zoo.text.packing import DEFAULT_TRUNCATOR
from zoo.text.tokenizer import PackingEncoder
from zoo.text.tokenizer import TextEncoder
from zoo.text.vocab import SPECIAL_ROLES
from zoo.text.vocab import load_vocab

KIND = "sentencepiece"
MODEL_FILE = "spiece.model"
WORD_START = "▁"
# ALBERT's special tokens (its `spiece.model` and `AlbertTokenizer`).
ALBERT_SPECIAL_TOKENS = dict(pad="<pad>", unk="<unk>", cls="[CLS]", sep="[SEP]", mask="[MASK]")
# Unicode's White_Space characters: what Hugging Face's `WhitespaceSplit` splits on.
NO_OFFSETS = ("SentencePieceEncoder gives no offsets into the input text (SentencePiece's point into its "
              "normalized text): tasks that map answers or labels to characters need a WordPiece model")
WHITESPACE_RUN = r"[\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}]+"


# sentencepiece_model.proto: ModelProto's fields; SentencePiece's; TrainerSpec's model type, NormalizerSpec's
# charsmap.
_PIECES, _TRAINER_SPEC, _NORMALIZER_SPEC = 1, 2, 3
_PIECE, _SCORE, _TYPE = 1, 2, 3
_MODEL_TYPE, _PRECOMPILED_CHARSMAP = 3, 2
MODEL_TYPES = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}


def _varint(buffer: bytes, i: int) -> tuple[int, int]:
  value = shift = 0
  while True:
    byte = buffer[i]
    i += 1
    value |= (byte & 0x7F) << shift
    shift += 7
    if not byte & 0x80:
      return value, i


def _fields(buffer: bytes) -> Iterator[tuple[int, Any]]:
  """`(field number, value)` of a serialized protobuf message: ints, 4- or 8-byte blobs, or bytes (which
  one, the field's number tells the caller)."""
  i = 0
  while i < len(buffer):
    key, i = _varint(buffer, i)
    wire = key & 7
    value: int | bytes
    if wire == 0:
      value, i = _varint(buffer, i)
    elif wire in (1, 5):
      size = 8 if wire == 1 else 4
      value, i = buffer[i:i + size], i + size
    elif wire == 2:
      size, i = _varint(buffer, i)
      value, i = buffer[i:i + size], i + size
    else:
      raise ValueError(f"not a SentencePiece model (protobuf wire type {wire})")
    yield key >> 3, value


def describe_model(model: bytes | str) -> dict[str, Any]:
  """What exporters need of a serialized SentencePiece model, read from its protobuf fields (without
  protobuf's generated code): `pieces` `[(piece, score, type)]` in id order (type 1 normal, 2
  unknown, 3 control, 4 user-defined), `model_type` ("unigram", "bpe", ...) and
  `precompiled_charsmap` (bytes: the normalization that `tokenizers`' `Precompiled` applies)."""
  import struct
  pieces, model_type, charsmap = [], "unigram", b""
  for number, value in _fields(read_model(model)):
    if number == _PIECES:
      fields = dict(_fields(value))
      score = struct.unpack("<f", fields[_SCORE])[0] if _SCORE in fields else 0.0
      pieces.append((fields.get(_PIECE, b"").decode("utf-8"), score, fields.get(_TYPE, 1)))
    elif number == _TRAINER_SPEC:
      model_type = MODEL_TYPES.get(dict(_fields(value)).get(_MODEL_TYPE, 1), "unknown")
    elif number == _NORMALIZER_SPEC:
      charsmap = dict(_fields(value)).get(_PRECOMPILED_CHARSMAP, b"")
  return dict(pieces=pieces, model_type=model_type, precompiled_charsmap=charsmap)


def read_model(model: bytes | str) -> bytes:
  """The serialized SentencePiece model: `model` itself (bytes) or the file at the path `model`."""
  if isinstance(model, bytes):
    return model
  with tf.io.gfile.GFile(model, "rb") as file:
    return file.read()


class SentencePieceEncoder(PackingEncoder):
  """Encodes raw text into encoder inputs, in the graph, with a SentencePiece model.

  Gives the ids of Hugging Face's `AlbertTokenizer` (see the module docstring for the
  steps). Works eagerly, inside `tf.function`, `tf.data.Dataset.map` and SavedModels.
  Any batch size works, including 0; empty strings and invalid UTF-8 do not fail.

  Args:
    model: the serialized SentencePiece model (bytes) or its path (`spiece.model`).
    seq_length: T, the length of the packed inputs (at least 3).
    lower_case: lower-case the text first (ALBERT's `do_lower_case`).
    keep_accents: keep accents (ALBERT's `keep_accents`; False: NFKD and marks dropped).
    truncator: `"longest_first"` (the default), `"round_robin"` or `"waterfall"`, as `TextEncoder`'s.
    special_tokens: `{"pad": ..., "unk": ..., "cls": ..., "sep": ..., "mask": ...}`, the
      model's pieces of the five roles; roles left out keep ALBERT's names.
    cls_type_id: the token type of [CLS].
    name: the module name.

  Raises:
    ValueError: a model that does not parse, a special token it lacks, bad settings.
  """

  def __init__(self, model: bytes | str, *, seq_length: int = 128, lower_case: bool = True,
               keep_accents: bool = False, truncator: str = DEFAULT_TRUNCATOR,
               special_tokens: dict[str, str] | None = None, cls_type_id: int = 0,
               name: str | None = None) -> None:
    super().__init__(name=name)
    serialized = read_model(model)
    try:
      self._sentencepiece = text.SentencepieceTokenizer(model=serialized, out_type=tf.int32)
      size = int(self._sentencepiece.vocab_size())
    except (tf.errors.InvalidArgumentError, tf.errors.InternalError) as error:
      where = model if isinstance(model, str) else "the model"
      raise ValueError(f"{where} is not a SentencePiece model ({error.message.strip()})") from error
    pieces = [piece.decode("utf-8") for piece in self._sentencepiece.id_to_string(tf.range(size)).numpy()]
    self._set_packing(pieces, ALBERT_SPECIAL_TOKENS, special_tokens, seq_length, truncator, cls_type_id,
                      lambda special: (f"it is the SentencePiece model's: pass its own pieces as "
                                       f"special_tokens (roles {list(SPECIAL_ROLES)})"))
    self.lower_case = bool(lower_case)
    self.keep_accents = bool(keep_accents)
    special = set(self.special_tokens.values())
    self._is_continuation = np.array([not piece.startswith(WORD_START) and piece not in special
                                      for piece in self._vocab], dtype=bool)

  def settings(self) -> dict[str, Any]:
    """The arguments besides the model and length, as JSON-ready values (`kind` names the class)."""
    return dict(kind=KIND, lower_case=self.lower_case, keep_accents=self.keep_accents,
                truncator=self.truncator, special_tokens=dict(self.special_tokens),
                cls_type_id=self.cls_type_id)

  def normalize(self, texts: Strings) -> tf.Tensor:
    """string `[B]` -> string `[B]`: steps 1–5, the text the SentencePiece model reads."""
    with self.name_scope:
      texts = tf.strings.regex_replace(valid_utf8(texts), "``|''", '"')
      if not self.keep_accents:
        texts = tf.strings.regex_replace(text.normalize_utf8(texts, "NFKD"), r"\p{Mn}", "")
      if self.lower_case:
        texts = tf.strings.lower(texts, encoding="utf-8")
      return tf.strings.strip(tf.strings.regex_replace(texts, WHITESPACE_RUN, " "))

  def tokenize(self, texts: Strings) -> tf.RaggedTensor:
    """string `[B]` -> int32 `[B, (tokens)]` piece ids, no special tokens, no truncation."""
    texts = tf.convert_to_tensor(texts, tf.string)
    if texts.shape.rank != 1:
      raise ValueError(f"SentencePieceEncoder takes a batch of strings of shape [B], got shape {texts.shape}")
    words = tf.strings.split(self.normalize(texts), " ")   # [B, (words)]
    with self.name_scope:
      # One word at a time, as Hugging Face's pre-tokenizer hands them to the model: over a whole
      # document, the op's float32 path scores round enough to pick another segmentation of a word.
      return words.with_flat_values(self._sentencepiece.tokenize(words.flat_values)).merge_dims(1, 2)

  def tokenize_with_offsets(self, texts: Strings) -> NoReturn:
    raise ValueError(NO_OFFSETS)

  def split_words_with_offsets(self, texts: Strings) -> NoReturn:
    raise ValueError(NO_OFFSETS)


def text_encoder(vocab: str | Sequence[str] | None, *, seq_length: int,
                 sentencepiece_model: bytes | str | None = None,
                 **settings: Any) -> TextEncoder | SentencePieceEncoder:
  """The text encoder of a model's tokenizer settings (`config.json`'s `lower_case` and `tokenizer`).

  `settings["kind"]` "sentencepiece" gives a `SentencePieceEncoder` of `sentencepiece_model`
  (bytes or a path: a model directory's `spiece.model`), whose pieces must be `vocab`
  when one is given; otherwise (no kind, or "wordpiece") a `zoo.text.TextEncoder` of `vocab`.

  Raises:
    ValueError: an unknown kind, a SentencePiece setting without its model, a WordPiece one without
      its vocabulary, or a model whose pieces are not the vocabulary.
  """
  kind = settings.pop("kind", "wordpiece")
  if kind == KIND:
    if sentencepiece_model is None:
      raise ValueError(f"the tokenizer is SentencePiece, but its model ({MODEL_FILE}) was not found beside "
                       "the vocabulary")
    encoder = SentencePieceEncoder(sentencepiece_model, seq_length=seq_length, **settings)
    if vocab is not None:
      tokens = load_vocab(vocab) if isinstance(vocab, str) else list(vocab)
      if tokens != encoder.vocab:
        raise ValueError(f"the vocabulary ({len(tokens)} tokens) is not the pieces of the SentencePiece "
                         f"model ({encoder.vocab_size} pieces) it was written with")
    return encoder
  if kind != "wordpiece":
    raise ValueError(f"unknown tokenizer kind {kind!r}; choose one of ['wordpiece', '{KIND}']")
  if vocab is None:
    raise ValueError("the tokenizer is WordPiece, but no vocabulary was given")
  return TextEncoder(vocab, seq_length=seq_length, **settings)

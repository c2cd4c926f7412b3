"""A SentencePiece model (`spiece.model`) built from the Unigram model of a fast tokenizer's
`tokenizer.json`.

transformers 5 saves an ALBERT tokenizer (and sentence-transformers 6 an ALBERT-based model) as
`tokenizer.json` alone, without the `spiece.model` the zoo's in-graph tokenizer
(`zoo.text.SentencePieceEncoder`) is built from. `from_tokenizer_json` writes the serialized
`ModelProto` (sentencepiece_model.proto) with which the zoo's tokenizer gives the ids of
transformers' `AlbertTokenizer` loaded from the same files; it is then used exactly as a shipped
`spiece.model` is. The protobuf fields are written here (`model_proto`): sentencepiece's generated
`sentencepiece_model_pb2` needs a newer protobuf runtime (7) than TensorFlow 2.20's stack holds.

What maps where:

- the model (`Unigram`): its `vocab`, `[piece, score]` in id order, gives the pieces and scores;
  the piece at `unk_id` is UNKNOWN; the special tokens (`added_tokens`, and tokenizer_config.json's
  `added_tokens_decoder`, marked special; the pad, cls, sep and mask tokens the tokenizer files
  name) are CONTROL, never produced from text; the other added tokens are USER_DEFINED
  (SentencePiece's user-defined symbols, which transformers' converter makes added tokens that are
  not special); every other piece is NORMAL. `trainer_spec`: model type unigram, the vocabulary
  size, the unknown and pad pieces and ids, no bos/eos (ALBERT's).
- the normalizer: `Precompiled`'s `precompiled_charsmap` (base64 in tokenizer.json) is
  `normalizer_spec.precompiled_charsmap` (without one, no map: SentencePiece's "identity"). The
  steps ALBERT's normalizer runs before it are the zoo's own preprocessing (`SentencePieceEncoder`
  steps 2-4), which follows `do_lower_case` and `keep_accents` as `zoo.convert.tokenizer_files`
  reads them: `Replace` of "``" and "''" with '"', `NFKD` and `StripAccents` (unless
  `keep_accents`), `Lowercase` (with `do_lower_case`); they must be there, in that order, exactly
  as the settings say. A `Replace` of runs of spaces with one (transformers 4's converter adds it)
  changes nothing once words are split on whitespace.
- the pre-tokenizer: `WhitespaceSplit` (the zoo's step 5) then `Metaspace` with replacement "▁"
  and `prepend_scheme` "always" (tokenizers before 0.14: `add_prefix_space` true; transformers 4's
  converter wrote `Metaspace` alone, which `AlbertTokenizer` rebuilds as both): the model's
  `add_dummy_prefix` and `escape_whitespaces`, with `remove_extra_whitespaces` as ALBERT's.

Refused with a `ConversionError` naming tokenizer.json and the step, with what is supported:
another model type, Unigram's `byte_fallback`, an unknown piece other than the one the tokenizer
files name (or, for `AlbertTokenizer`, at another id than 1, where it maps unknown text), added
tokens that are not pieces of the model, normalizer steps neither SentencePiece nor the zoo's
preprocessing runs (or in another order, or other than the settings say), another pre-tokenizer, a
replacement other than "▁" and a `prepend_scheme` other than "always" (the zoo runs the model on
each word, and "▁" marks where words start).

Known differences from transformers, the same as with a shipped `spiece.model`: special tokens and
added tokens written in the raw text (transformers splits them out before its pre-tokenizer), a
vertical tab (U+000B, a word boundary for the zoo, deleted by the map for transformers) and NUL.
"""

import base64
import struct
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

from zoo.convert.errors import ConversionError

WORD_START = "▁"   # SentencePiece's whitespace marker: Metaspace's replacement must be it
# sentencepiece_model.proto: ModelProto's fields, SentencePiece's, TrainerSpec's and NormalizerSpec's.
_PIECES, _TRAINER_SPEC, _NORMALIZER_SPEC = 1, 2, 3
_PIECE, _SCORE, _TYPE = 1, 2, 3
_MODEL_TYPE, _VOCAB_SIZE = 3, 4
_UNK_ID, _BOS_ID, _EOS_ID, _PAD_ID, _UNK_PIECE, _PAD_PIECE = 40, 41, 42, 43, 45, 48
_NAME, _CHARSMAP, _ADD_DUMMY_PREFIX, _REMOVE_EXTRA_WHITESPACES, _ESCAPE_WHITESPACES = 1, 2, 3, 4, 5
NORMAL, UNKNOWN, CONTROL, USER_DEFINED = 1, 2, 3, 4   # SentencePiece.Type
UNIGRAM = 1   # TrainerSpec.ModelType
# NormalizerSpec.name: without a map SentencePiece's "identity"; a map read from tokenizer.json is not one of
# its named rules (nmt_nfkc, ...) as far as the file says, hence the name of a map given by the user.
IDENTITY, USER_DEFINED_RULE = "identity", "user_defined"
SUPPORTED_NORMALIZER = ("ALBERT's: Replace of \"``\" and \"''\" with '\"', NFKD and StripAccents (unless "
                        "keep_accents), Lowercase (with do_lower_case), then Precompiled, and a Replace of "
                        "runs of spaces with one")
SUPPORTED_PRE_TOKENIZER = "ALBERT's: WhitespaceSplit then Metaspace (replacement '▁', prepend_scheme always)"
ALBERT_CLASSES = (None, "AlbertTokenizer", "AlbertTokenizerFast")   # tokenizer_class: None is config.json's
ALBERT_UNK_ID = 1   # AlbertTokenizer builds its Unigram model with unk_id=1 whatever tokenizer.json says

# The normalizer steps the zoo's preprocessing runs, in its order (ranks), before the model's map.
_QUOTES, _NFKD, _STRIP_ACCENTS, _LOWERCASE, _PRECOMPILED = range(5)


# Protobuf's wire format, for the few field kinds a ModelProto needs.

def _varint(value):
  value &= (1 << 64) - 1   # a negative int32 (bos_id -1) is ten bytes, two's complement
  out = bytearray()
  while value > 0x7F:
    out.append(value & 0x7F | 0x80)
    value >>= 7
  out.append(value)
  return bytes(out)


def _field(number, value):
  """One serialized field: a varint (int, bool, enum), a float (fixed32) or bytes/str (length-delimited)."""
  if isinstance(value, float):
    return _varint(number << 3 | 5) + struct.pack("<f", value)
  if isinstance(value, int):
    return _varint(number << 3) + _varint(int(value))
  data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
  return _varint(number << 3 | 2) + _varint(len(data)) + data


def _message(*fields):
  """A serialized message of `(number, value)` pairs, in order (repeated fields repeat their number)."""
  return b"".join(_field(number, value) for number, value in fields)


def model_proto(pieces: Sequence[tuple[str, float, int]], *, unk_id: int, pad_id: int = -1,
                precompiled_charsmap: bytes = b"") -> bytes:
  """The serialized unigram `ModelProto` of `pieces`, `[(piece, score, type)]` in id order.

  `unk_id`: the UNKNOWN piece's id; `pad_id`: the pad piece's (-1: none); `precompiled_charsmap`: the
  normalization map (empty: none). As in ALBERT's model, "▁" goes before the text (`add_dummy_prefix`: before
  each word, as the zoo runs the model), whitespace is escaped as "▁" and extra whitespace removed.
  """
  encoded = []
  for piece, score, kind in pieces:
    fields = [(_PIECE, piece), (_SCORE, float(score))]
    if kind != NORMAL:   # the default, left out as SentencePiece's trainer leaves it
      fields.append((_TYPE, kind))
    encoded.append((_PIECES, _message(*fields)))
  trainer = [(_MODEL_TYPE, UNIGRAM), (_VOCAB_SIZE, len(pieces)), (_UNK_ID, unk_id), (_BOS_ID, -1),
             (_EOS_ID, -1), (_PAD_ID, pad_id), (_UNK_PIECE, pieces[unk_id][0])]
  if pad_id >= 0:
    trainer.append((_PAD_PIECE, pieces[pad_id][0]))
  normalizer: list[tuple[int, object]] = [(_NAME, USER_DEFINED_RULE if precompiled_charsmap else IDENTITY)]
  if precompiled_charsmap:
    normalizer.append((_CHARSMAP, bytes(precompiled_charsmap)))
  normalizer += [(_ADD_DUMMY_PREFIX, True), (_REMOVE_EXTRA_WHITESPACES, True),
                 (_ESCAPE_WHITESPACES, True)]
  return _message(*encoded, (_TRAINER_SPEC, _message(*trainer)), (_NORMALIZER_SPEC, _message(*normalizer)))


def _describe(step):
  """A normalizer or pre-tokenizer step as the error names it: its type and settings."""
  settings = ", ".join(f"{key}={value!r}" for key, value in step.items()
                       if key not in ("type", "precompiled_charsmap"))
  return f"{step.get('type')}({settings})" if settings else str(step.get("type"))


def _flatten(step, key):
  """The steps of a tokenizer.json normalizer or pre-tokenizer, `Sequence`s unfolded ([] for null)."""
  if step is None:
    return []
  if not isinstance(step, dict):
    return [{"type": repr(step)}]
  if step.get("type") == "Sequence":
    return [inner for nested in step.get(key) or [] for inner in _flatten(nested, key)]
  return [step]


def _rank(step):
  """The zoo's step (`_QUOTES` ... `_PRECOMPILED`) a normalizer step is, None for the collapse of space runs
  (no effect once words are split on whitespace); raises KeyError for a step the zoo cannot run."""
  kind = step.get("type")
  pattern = step.get("pattern") if isinstance(step.get("pattern"), dict) else {}
  if kind == "Replace":
    if pattern.get("String") in ("``", "''") and step.get("content") == '"':
      return _QUOTES
    if pattern.get("Regex") == " {2,}" and step.get("content") == " ":
      return None
    raise KeyError(kind)
  return dict(NFKD=_NFKD, StripAccents=_STRIP_ACCENTS, Lowercase=_LOWERCASE, Precompiled=_PRECOMPILED)[kind]


def _charsmap(normalizer, path, lower_case, keep_accents):
  """The precompiled charsmap (bytes, b"" for none) of tokenizer.json's normalizer, whose other steps must
  be the zoo's preprocessing with the settings `lower_case` and `keep_accents` (see the module docstring)."""
  steps = _flatten(normalizer, "normalizers")
  ranks, quotes, charsmap = [], set(), b""
  for step in steps:
    try:
      rank = _rank(step)
    except KeyError:
      raise ConversionError(f"{path}: normalizer step {_describe(step)} is neither SentencePiece's nor one "
                            "of the zoo's own preprocessing steps; "
                            f"supported: {SUPPORTED_NORMALIZER}") from None
    if rank is None:
      continue
    if ranks and rank < ranks[-1] or rank == _PRECOMPILED and _PRECOMPILED in ranks:
      raise ConversionError(f"{path}: normalizer step {_describe(step)} comes after a step it must "
                            "precede (the zoo runs its steps in their order, then the model's map); "
                            f"supported: {SUPPORTED_NORMALIZER}")
    ranks.append(rank)
    if rank == _QUOTES:
      quotes.add(step["pattern"]["String"])
    if rank == _PRECOMPILED:
      try:
        charsmap = base64.b64decode(step.get("precompiled_charsmap") or "", validate=True)
      except (ValueError, TypeError) as error:
        raise ConversionError(f"{path}: the Precompiled normalizer's precompiled_charsmap is not base64 "
                              f"({error})") from None
  if (_NFKD in ranks) != (_STRIP_ACCENTS in ranks):
    present, absent = ("NFKD", "StripAccents") if _NFKD in ranks else ("StripAccents", "NFKD")
    raise ConversionError(f"{path}: normalizer step {present} without {absent}: the zoo strips accents as "
                          f"NFKD followed by StripAccents, or not at all; supported: {SUPPORTED_NORMALIZER}")
  found = dict(quotes=quotes == {"``", "''"}, accents=_NFKD in ranks, lowercase=_LOWERCASE in ranks)
  expected = dict(quotes=True, accents=not keep_accents, lowercase=lower_case)
  steps = dict(quotes=("the Replace steps of \"``\" and \"''\" with '\"'",
                       "AlbertTokenizer always runs them"),
               accents=("NFKD and StripAccents", f"the tokenizer files say keep_accents={keep_accents}"),
               lowercase=("Lowercase", f"the tokenizer files say do_lower_case={lower_case}"))
  wrong = [f"{'no' if expected[name] else 'a'} {steps[name][0]}, where {steps[name][1]}"
           for name in expected if found[name] != expected[name]]
  if wrong:
    raise ConversionError(f"{path}: the normalizer has {'; '.join(wrong)}; supported: {SUPPORTED_NORMALIZER}")
  return charsmap


def _check_pre_tokenizer(pre_tokenizer, path, config):
  """Refuses a tokenizer.json pre-tokenizer other than ALBERT's: words split on whitespace, "▁" before each
  (what the zoo's per-word run of a SentencePiece model with `add_dummy_prefix` does)."""
  steps = _flatten(pre_tokenizer, "pretokenizers")
  kinds = [step.get("type") for step in steps]
  if kinds not in (["WhitespaceSplit", "Metaspace"], ["Metaspace"]):
    described = " then ".join(map(_describe, steps)) or "none"
    raise ConversionError(f"{path}: pre_tokenizer {described}; supported: {SUPPORTED_PRE_TOKENIZER}")
  metaspace = steps[-1]
  if metaspace.get("replacement", WORD_START) != WORD_START:
    raise ConversionError(f"{path}: Metaspace replacement {metaspace['replacement']!r}: SentencePiece "
                          f"marks whitespace with '{WORD_START}'; supported: {SUPPORTED_PRE_TOKENIZER}")
  scheme = metaspace.get("prepend_scheme")
  if scheme is None:   # tokenizers before 0.14: a boolean
    scheme = "always" if metaspace.get("add_prefix_space", True) else "never"
  if scheme != "always":
    raise ConversionError(
        f"{path}: Metaspace prepend_scheme {scheme!r} ('▁' before no word, or the first only): the zoo runs "
        f"the SentencePiece model on each word with '▁' before it, which marks where words start (whole-word "
        f"masking groups pieces by it); supported: {SUPPORTED_PRE_TOKENIZER}")
  if config.get("add_prefix_space", True) is not True:
    raise ConversionError(f"{path}: Metaspace prepend_scheme 'always', but tokenizer_config.json says "
                          f"add_prefix_space={config['add_prefix_space']!r}, from which AlbertTokenizer "
                          f"builds its pre-tokenizer; supported: {SUPPORTED_PRE_TOKENIZER}")


def _added_tokens(fast, config):
  """`{id: (content, special)}` of tokenizer.json's `added_tokens` and tokenizer_config.json's
  `added_tokens_decoder`."""
  tokens = {}
  for token in fast.get("added_tokens") or []:
    if isinstance(token, dict) and isinstance(token.get("id"), int):
      tokens[token["id"]] = (token.get("content"), bool(token.get("special")))
  for key, token in (config.get("added_tokens_decoder") or {}).items():
    if isinstance(token, dict) and str(key).isdigit():
      content, special = tokens.get(int(key), (token.get("content"), False))
      tokens[int(key)] = (content, special or bool(token.get("special")))
  return tokens


def _pieces(model, path, fast, config, special_tokens):
  """`([(piece, score, type)], unk_id)` of tokenizer.json's Unigram model (see the module docstring)."""
  vocab = model.get("vocab")
  if not isinstance(vocab, list) or not vocab or not all(
      isinstance(entry, list | tuple) and len(entry) == 2 and isinstance(entry[0], str) and entry[0]
      and isinstance(entry[1], int | float) for entry in vocab):
    raise ConversionError(f"{path}: the Unigram model's vocab is not a list of [piece, score] pairs")
  if model.get("byte_fallback"):
    raise ConversionError(f"{path}: the Unigram model has byte_fallback (unknown characters as byte pieces), "
                          "which ALBERT's SentencePiece model does not; supported: byte_fallback false")
  pieces = [piece for piece, _ in vocab]
  if len(set(pieces)) != len(pieces):
    twice = sorted({piece for piece in pieces if pieces.count(piece) > 1})[:5]
    raise ConversionError(f"{path}: the Unigram model holds pieces more than once ({twice}); a SentencePiece "
                          "model's pieces are unique")
  unk_id = model.get("unk_id")
  if not isinstance(unk_id, int) or not 0 <= unk_id < len(pieces):
    raise ConversionError(f"{path}: the Unigram model's unk_id is {unk_id!r}; a SentencePiece model needs "
                          f"its unknown piece, one of ids 0..{len(pieces) - 1}")
  unknown = special_tokens.get("unk")
  if unknown is not None and pieces[unk_id] != unknown:
    raise ConversionError(f"{path}: the Unigram model's unknown piece (unk_id {unk_id}) is "
                          f"{pieces[unk_id]!r}, but the tokenizer files name {unknown!r} the unknown token")
  if unk_id != ALBERT_UNK_ID and config.get("tokenizer_class") in ALBERT_CLASSES:
    raise ConversionError(f"{path}: the Unigram model's unk_id is {unk_id}, but transformers' "
                          f"AlbertTokenizer maps unknown text to id {ALBERT_UNK_ID} whatever tokenizer.json "
                          f"says; supported: unk_id {ALBERT_UNK_ID}")
  types = [NORMAL] * len(pieces)
  for token_id, (content, special) in sorted(_added_tokens(fast, config).items()):
    if token_id >= len(pieces) or content != pieces[token_id]:
      held = (f"piece {pieces[token_id]!r}" if token_id < len(pieces)
              else f"no piece: the model's ids are 0..{len(pieces) - 1}")
      raise ConversionError(f"{path}: added token {content!r} (id {token_id}) is not a piece of the Unigram "
                            f"model (its id holds {held}); the zoo's SentencePiece model holds the model's "
                            "pieces only; supported: added tokens that are pieces of the model")
    types[token_id] = CONTROL if special else USER_DEFINED
  index = {piece: i for i, piece in enumerate(pieces)}
  for role, token in special_tokens.items():
    if role != "unk" and token in index:
      types[index[token]] = CONTROL
  types[unk_id] = UNKNOWN
  return [(piece, float(score), kind) for (piece, score), kind in zip(vocab, types, strict=True)], unk_id


def from_tokenizer_json(fast: Mapping[str, Any], *, path: str, config: Mapping[str, Any], lower_case: bool,
                        keep_accents: bool, special_tokens: Mapping[str, str]) -> bytes:
  """The serialized SentencePiece model (`spiece.model`'s bytes) of a parsed `tokenizer.json`.

  Args:
    fast: `tokenizer.json`, parsed.
    path: its path, which errors name.
    config: the `tokenizer_config.json` beside it, parsed ({} when there is none): its
      `added_tokens_decoder`, `add_prefix_space` and `tokenizer_class`.
    lower_case, keep_accents: the tokenizer's settings (`do_lower_case`, `keep_accents`:
      `zoo.convert.tokenizer_files.sentencepiece_settings`), which the zoo's preprocessing applies;
      tokenizer.json's normalizer must run the same steps.
    special_tokens: `{role: token}` the tokenizer files name (pad, unk, cls, sep, mask).

  Raises:
    ConversionError: what tokenizer.json holds that the model cannot represent (see the module docstring),
      naming the file and the step.
  """
  model = fast["model"] if isinstance(fast.get("model"), dict) else {}
  if model.get("type") != "Unigram":
    raise ConversionError(f"{path}: a {model.get('type')} model; a SentencePiece model is built from a "
                          "Unigram model (ALBERT's tokenizer) only")
  pieces, unk_id = _pieces(model, path, fast, config, special_tokens)
  charsmap = _charsmap(fast.get("normalizer"), path, lower_case, keep_accents)
  _check_pre_tokenizer(fast.get("pre_tokenizer"), path, config)
  pad = special_tokens.get("pad")
  pad_id = next((i for i, (piece, _, kind) in enumerate(pieces) if piece == pad and kind == CONTROL), -1)
  return model_proto(pieces, unk_id=unk_id, pad_id=pad_id, precompiled_charsmap=charsmap)

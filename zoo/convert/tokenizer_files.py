"""The tokenizer settings of a published checkpoint, as `zoo.text.TextEncoder` arguments.

Reads what ships beside the weights, without TensorFlow:

- Hugging Face (`BertTokenizer`, `FunnelTokenizer` and their fast versions):
  `tokenizer_config.json` (`do_lower_case`, `strip_accents`, `tokenize_chinese_chars`,
  `do_basic_tokenize`, the special tokens), `special_tokens_map.json` and the fast
  tokenizer's `tokenizer.json` (its normaliser's casing, WordPiece's
  `max_input_chars_per_word`). Words of more than 100 characters are one [UNK]
  (Hugging Face's WordPiece default). FunnelTokenizer names its special tokens `<pad>
  <unk> <cls> <sep> <mask>` and gives [cls] token type 2.
- Google's TF1 BERT releases: casing from the flag the user passes (the release's
  directory name says it: `uncased_L-12_H-768_A-12`), BERT's `[PAD]`-style names, words
  of more than 200 characters one [UNK] (the original `tokenization.py`).

`settings(...)` returns `(lower_case, tokenizer)`, the two `config.json` fields of a
model directory (`tpu.config.TrainConfig.lower_case` and `.tokenizer`).

`keras_hub_settings` reads the same Hugging Face files for the zoo's keras-hub tokenizers
(`zoo.keras3.hf_presets`, `zoo.keras3.models.tokenizer` with transformers' rules), which, unlike
`TextEncoder`, keep accents while lower-casing, leave CJK characters unsplit when the files say
so and keep the added tokens whole; it resolves the files as transformers 5's `AutoTokenizer`
does (see its docstring).
"""

import json
import os
from typing import Any

from zoo.convert import sentencepiece_model

TOKENIZER_CONFIG = "tokenizer_config.json"
SPECIAL_TOKENS_MAP = "special_tokens_map.json"
FAST_TOKENIZER = "tokenizer.json"
TOKENIZER_FILES = (TOKENIZER_CONFIG, SPECIAL_TOKENS_MAP, FAST_TOKENIZER, "vocab.txt")
# `zoo.text.vocab.SPECIAL_ROLES` and BERT's names (not imported: that module loads TensorFlow).
SPECIAL_ROLES = ("pad", "unk", "cls", "sep", "mask")
BERT_NAMES = dict(pad="[PAD]", unk="[UNK]", cls="[CLS]", sep="[SEP]", mask="[MASK]")
FUNNEL_NAMES = dict(pad="<pad>", unk="<unk>", cls="<cls>", sep="<sep>", mask="<mask>")
HF_MAX_CHARS_PER_WORD = 100   # transformers' WordpieceTokenizer(max_input_chars_per_word=100)
GOOGLE_MAX_CHARS_PER_WORD = 200   # google-research/bert tokenization.py


class TokenizerFilesError(ValueError):
  """Tokenizer files the zoo's `TextEncoder` cannot reproduce; the message names the file."""


def read_json_object(path: str) -> dict[str, Any]:
  """The JSON object in `path`, {} when there is no such file or it holds no object."""
  if not os.path.isfile(path):
    return {}
  with open(path, encoding="utf-8") as file:
    try:
      values = json.load(file)
    except json.JSONDecodeError as error:
      raise TokenizerFilesError(f"{path}: not valid JSON ({error})") from error
  return values if isinstance(values, dict) else {}


def _token(value):
  """A special token as the files store it: a string or an AddedToken dict with "content"."""
  if isinstance(value, dict):
    value = value.get("content")
  return value if isinstance(value, str) and value else None


def _vocab_txt(src):
  """The tokens (index = id) of `vocab.txt`, None when there is none."""
  path = os.path.join(src, "vocab.txt")
  if not os.path.isfile(path):
    return None
  with open(path, encoding="utf-8") as file:
    return [line.rstrip("\n").rstrip("\r") for line in file]


def _fast_vocab(src, fast):
  """The WordPiece tokens (index = id) of `fast`, the directory's parsed `tokenizer.json`; None when it
  holds no vocabulary."""
  fast_path = os.path.join(src, FAST_TOKENIZER)
  model = fast.get("model")
  if not isinstance(model, dict) or not isinstance(model.get("vocab"), dict):
    return None
  if model.get("type") != "WordPiece" or model.get("continuing_subword_prefix", "##") != "##":
    raise TokenizerFilesError(f"{fast_path}: a {model.get('type')} model with continuing_subword_prefix="
                              f"{model.get('continuing_subword_prefix')!r}; the zoo's tokenizers reproduce "
                              "WordPiece with '##' only")
  ids = sorted(model["vocab"].items(), key=lambda item: item[1])
  if [i for _, i in ids] != list(range(len(ids))):
    raise TokenizerFilesError(f"{fast_path}: the WordPiece ids are not 0..{len(ids) - 1} without gaps")
  return [token for token, _ in ids]


def hf_vocab(src: str) -> list[str] | None:
  """The WordPiece tokens (index = id) of `vocab.txt`, else of the fast tokenizer's `tokenizer.json`.

  None when there is neither.
  """
  tokens = _vocab_txt(src)
  if tokens is None:
    tokens = _fast_vocab(src, read_json_object(os.path.join(src, FAST_TOKENIZER)))
  return tokens


def _hf_files(src):
  """`(tokenizer_config.json, special_tokens_map.json, tokenizer.json)` parsed, each {} when absent."""
  return tuple(read_json_object(os.path.join(src, name))
               for name in (TOKENIZER_CONFIG, SPECIAL_TOKENS_MAP, FAST_TOKENIZER))


def _special_names(src, defaults, sources, tokens):
  """`{role: token}`: for each role the first of `sources` (parsed files, in precedence order) to name
  its `{role}_token`, else `defaults`' name.

  Raises:
    TokenizerFilesError: a name `tokens` (the vocabulary, when not None) does not hold.
  """
  names = dict(defaults)
  for role in SPECIAL_ROLES:
    token = next(filter(None, (_token(source.get(f"{role}_token")) for source in sources)), None)
    if token:
      names[role] = token
  if tokens is not None:
    vocab = set(tokens)
    missing = {role: token for role, token in names.items() if token not in vocab}
    if missing:
      raise TokenizerFilesError(f"{src}: the vocabulary lacks the special token(s) {missing} that the "
                                "tokenizer files name")
  return names


def hf_settings(src: str, funnel: bool = False) -> tuple[bool, dict[str, Any]]:
  """`(lower_case, tokenizer)` of a Hugging Face checkpoint directory's tokenizer files.

  Args:
    src: the checkpoint directory.
    funnel: a Funnel checkpoint (FunnelTokenizer: `<cls>`-style names when the files
      name none and the vocabulary has them rather than BERT's, [cls] token type 2).

  Raises:
    TokenizerFilesError: settings `TextEncoder` cannot reproduce (accents kept while
      lower-casing, CJK characters not split, no basic tokenization) or a special
      token the vocabulary does not hold.
  """
  config_path = os.path.join(src, TOKENIZER_CONFIG)
  config, special_map, fast = _hf_files(src)
  normalizer = fast.get("normalizer") if isinstance(fast.get("normalizer"), dict) else {}
  model = fast.get("model") if isinstance(fast.get("model"), dict) else {}

  if "do_lower_case" in config:
    lower_case = bool(config["do_lower_case"])
  elif "lowercase" in normalizer:
    lower_case = bool(normalizer["lowercase"])
  else:
    lower_case = True   # BertTokenizer's and FunnelTokenizer's default
  strip_accents = config.get("strip_accents", normalizer.get("strip_accents"))
  if strip_accents is not None and bool(strip_accents) != lower_case:
    raise TokenizerFilesError(f"{config_path}: strip_accents={strip_accents} with do_lower_case={lower_case} "
                              "is not supported: TextEncoder strips accents exactly when it lower-cases")
  chinese = config.get("tokenize_chinese_chars", normalizer.get("handle_chinese_chars", True))
  if not chinese:
    raise TokenizerFilesError(f"{config_path}: tokenize_chinese_chars=false is not supported: TextEncoder "
                              "splits each CJK character into a word of its own")
  if not config.get("do_basic_tokenize", True):
    raise TokenizerFilesError(f"{config_path}: do_basic_tokenize=false is not supported: TextEncoder always "
                              "splits words on whitespace and punctuation first")

  tokens = hf_vocab(src)
  vocab = set(tokens or ())
  funnel_names = funnel and FUNNEL_NAMES["cls"] in vocab and BERT_NAMES["cls"] not in vocab
  names = _special_names(src, FUNNEL_NAMES if funnel_names else BERT_NAMES, (config, special_map), tokens)
  max_chars = model.get("max_input_chars_per_word", HF_MAX_CHARS_PER_WORD)
  tokenizer = dict(special_tokens=names, cls_type_id=2 if funnel else 0, max_chars_per_word=int(max_chars))
  return lower_case, tokenizer


def _flag(config, field, default, path):
  """`config[field]` (a parsed tokenizer_config.json), `default` when absent.

  Raises:
    TokenizerFilesError: a value that is not true or false (nor null, when `default` is None).
  """
  value = config.get(field, default)
  if not isinstance(value, bool) and not (value is None and default is None):
    raise TokenizerFilesError(f"{path}: {field}={json.dumps(value)}, where transformers takes true or false")
  return value


def keras_hub_settings(src: str, funnel: bool = False) -> dict[str, Any]:
  """The zoo's keras-hub `WordPieceTokenizer` arguments giving transformers 5's ids for a Hugging Face
  directory (`zoo.keras3.models.tokenizer`, with `rules="transformers"`).

  transformers 5's `BertTokenizer` and `FunnelTokenizer` (what `AutoTokenizer` loads, also
  for files naming transformers 4's `BertTokenizerFast`) take the vocabulary from
  `tokenizer.json`'s WordPiece model when there is one, else from `vocab.txt`, and build
  everything else from `tokenizer_config.json` and the class's defaults. They do not read
  `tokenizer.json`'s normaliser (`lowercase`, `strip_accents`, `handle_chinese_chars`) or
  its WordPiece settings, so a `tokenizer.json` without `tokenizer_config.json` is uncased
  with accents stripped whatever its normaliser says. Hence:

  - `lowercase`: `do_lower_case`, default true.
  - `strip_accents`: `strip_accents` when true or false (accents kept or stripped whatever
    the casing), `lowercase` when it is null or absent.
  - `split_on_cjk`: `tokenize_chinese_chars`, default true (false: a run of CJK characters
    is one word).
  - `clean_text`: `clean_text` (FunnelTokenizer's), default true (false: control and format
    characters stay in the words).
  - `special_tokens_names`, `{role: token}` for `pad unk cls sep mask`: when
    `tokenizer_config.json` lists `added_tokens_decoder`, its `{role}_token`s; without it
    (older files) `special_tokens_map.json`'s over `tokenizer_config.json`'s; else the
    class's, BERT's `[CLS]`-style, or for `funnel` `<cls>`-style unless the vocabulary has
    BERT's `[CLS]` and not `<cls>`.
  - `added_tokens`, `normalized_added_tokens`: transformers' added tokens, which a text
    holding them gets whole (`"[CLS] hi"` is `[CLS]` and `hi`, not `[`, `cl`, `##s`, `]`): the
    special tokens above (and FunnelTokenizer's `<s>` and `</s>`, or the files' `bos_token`
    and `eos_token`), `additional_special_tokens` and `extra_special_tokens`, and the tokens of
    `added_tokens_decoder` and of `tokenizer.json`'s `added_tokens`; matched in the text as
    written, or with `"normalized": true` in the normalised text. A token the vocabulary lacks
    extends it at its id (transformers' `add_tokens`), when the files give one right after the
    vocabulary's; one without an id there (a class default the files do not name) is left out.
  - `vocabulary`: the tokens, index = id.
  - `max_chars_per_word`: 100: transformers ignores `do_basic_tokenize` and both files'
    `max_input_chars_per_word` (its WordPiece makes a word of more than 100 characters one
    unknown token).

  Raises:
    TokenizerFilesError: no vocabulary (neither `vocab.txt` nor a WordPiece `tokenizer.json`
      with '##' and ids without gaps), a setting that is not true or false, a special token
      the vocabulary does not hold, an added token with `single_word: true` or whose id
      leaves a gap after the vocabulary.
  """
  config_path = os.path.join(src, TOKENIZER_CONFIG)
  config, special_map, fast = _hf_files(src)
  tokens = _fast_vocab(src, fast)
  if tokens is None:
    tokens = _vocab_txt(src)
  if tokens is None:
    raise TokenizerFilesError(f"{src}: no vocab.txt or WordPiece {FAST_TOKENIZER} to build a tokenizer from")
  lowercase = _flag(config, "do_lower_case", True, config_path)
  strip_accents = _flag(config, "strip_accents", None, config_path)
  vocab = set(tokens)
  funnel_names = funnel and not (BERT_NAMES["cls"] in vocab and FUNNEL_NAMES["cls"] not in vocab)
  sources = (config,) if "added_tokens_decoder" in config else (special_map, config)
  names = _special_names(src, FUNNEL_NAMES if funnel_names else BERT_NAMES, sources, tokens)
  tokens, added, normalized = _added_tokens(src, tokens, names, sources, fast, config, funnel)
  return dict(vocabulary=tokens, lowercase=lowercase,
              strip_accents=lowercase if strip_accents is None else strip_accents,
              split_on_cjk=_flag(config, "tokenize_chinese_chars", True, config_path),
              clean_text=_flag(config, "clean_text", True, config_path) if funnel else True,
              special_tokens_names=names, added_tokens=added, normalized_added_tokens=normalized,
              max_chars_per_word=HF_MAX_CHARS_PER_WORD)


# FunnelTokenizer's other special tokens, by their files' names.
FUNNEL_OTHER_SPECIAL = dict(bos_token="<s>", eos_token="</s>")


def _added_tokens(src, tokens, names, sources, fast, config, funnel):
  """`(vocabulary, added tokens, normalized added tokens)` as transformers 5 builds them from the
  directory's files (`sources`: the parsed special-token files in precedence order; see
  `keras_hub_settings`): the vocabulary `tokens` extended by the added tokens it lacks, and the added
  tokens matched in the text as written and in the normalised text."""
  found = {}   # content -> (normalized, id or None, file)

  def add(value, where, token_id=None):
    if isinstance(value, dict):
      content = value.get("content")
      normalized = bool(value.get("normalized", not value.get("special", True)))
      if value.get("single_word"):
        raise TokenizerFilesError(f"{os.path.join(src, where)}: the added token {content!r} has "
                                  "single_word=true, which the zoo's keras-hub tokenizers do not reproduce")
    else:
      content, normalized = value, False
    if isinstance(content, str) and content and content not in found:
      found[content] = (normalized, token_id, where)

  for token in fast.get("added_tokens") or []:
    if isinstance(token, dict):
      add(token, FAST_TOKENIZER, token.get("id"))
  for token_id, token in (config.get("added_tokens_decoder") or {}).items():
    add(token, TOKENIZER_CONFIG, int(token_id))
  for token in names.values():
    add(token, TOKENIZER_CONFIG)
  roles = {key: (token, TOKENIZER_CONFIG) for key, token in FUNNEL_OTHER_SPECIAL.items()} if funnel else {}
  for source in reversed(sources):   # the first file of the precedence order names them last
    where = TOKENIZER_CONFIG if source is config else SPECIAL_TOKENS_MAP
    for key in FUNNEL_OTHER_SPECIAL:
      if _token(source.get(key)):
        roles[key] = (_token(source.get(key)), where)
    for key in ("additional_special_tokens", "extra_special_tokens"):
      values = source.get(key) or []
      for value in values.values() if isinstance(values, dict) else values:
        add(value, where)
  for token, where in roles.values():
    add(token, where)
  index = {token: i for i, token in reversed(list(enumerate(tokens)))}
  extra = sorted((token_id, content) for content, (_, token_id, _) in found.items()
                 if content not in index and token_id is not None)
  ids = [token_id for token_id, _ in extra]
  if ids != list(range(len(tokens), len(tokens) + len(extra))):
    raise TokenizerFilesError(f"{os.path.join(src, found[extra[0][1]][2])}: the added tokens the vocabulary "
                              f"lacks have ids {ids}, not the ones after its {len(tokens)} tokens")
  tokens = [*tokens, *(content for _, content in extra)]
  kept = [content for content, (_, token_id, _) in found.items() if content in index or token_id is not None]
  return (tokens, [content for content in kept if not found[content][0]],
          [content for content in kept if found[content][0]])


def google_settings(lower_case: bool) -> tuple[bool, dict[str, Any]]:
  """`(lower_case, tokenizer)` of Google's BERT release (`tokenization.FullTokenizer`)."""
  return bool(lower_case), dict(special_tokens=dict(BERT_NAMES), cls_type_id=0,
                                max_chars_per_word=GOOGLE_MAX_CHARS_PER_WORD)


# ALBERT's tokenizer (`AlbertTokenizer`): a SentencePiece model and these special tokens.
SENTENCEPIECE_MODEL = "spiece.model"
ALBERT_NAMES = dict(pad="<pad>", unk="<unk>", cls="[CLS]", sep="[SEP]", mask="[MASK]")


def sentencepiece_settings(src: str) -> tuple[bool, dict[str, Any], bytes]:
  """`(lower_case, tokenizer, model bytes)` of a Hugging Face ALBERT directory's tokenizer files.

  The SentencePiece model is `spiece.model`, else the one `zoo.convert.sentencepiece_model` builds
  from `tokenizer.json`'s Unigram model (transformers 5 saves that file alone: see
  `sentencepiece_file`); `tokenizer_config.json` gives `do_lower_case` and `keep_accents` and the
  special tokens (default ALBERT's), `special_tokens_map.json` the special tokens too. Without
  those settings, `tokenizer.json`'s normalizers say them (`Lowercase`; `StripAccents`), else
  ALBERT's defaults (uncased, accents stripped). `tokenizer` is the `config.json` field
  (`kind: "sentencepiece"`, `zoo.text.sentencepiece.text_encoder`).

  Raises:
    TokenizerFilesError: neither `spiece.model` nor `tokenizer.json`.
    ConversionError: a `tokenizer.json` (without `spiece.model`) the SentencePiece model cannot
      represent, naming the step.
  """
  if sentencepiece_file(src) is None:
    raise TokenizerFilesError(f"{src}: no {SENTENCEPIECE_MODEL}, the SentencePiece model of the checkpoint's "
                              f"tokenizer, nor a {FAST_TOKENIZER} whose Unigram model it is built from")
  config = read_json_object(os.path.join(src, TOKENIZER_CONFIG))
  special_map = read_json_object(os.path.join(src, SPECIAL_TOKENS_MAP))
  names = dict(ALBERT_NAMES)
  for role in SPECIAL_ROLES:
    token = _token(config.get(f"{role}_token")) or _token(special_map.get(f"{role}_token"))
    if token:
      names[role] = token
  fast = read_json_object(os.path.join(src, FAST_TOKENIZER))
  steps = _normalizer_types(fast.get("normalizer"))
  lower_case = config.get("do_lower_case", "Lowercase" in steps if steps else True)
  keep_accents = config.get("keep_accents", "StripAccents" not in steps if steps else False)
  tokenizer = dict(kind="sentencepiece", keep_accents=bool(keep_accents), special_tokens=names,
                   cls_type_id=0)
  if sentencepiece_file(src) == SENTENCEPIECE_MODEL:
    with open(os.path.join(src, SENTENCEPIECE_MODEL), "rb") as file:
      model = file.read()
  else:
    model = sentencepiece_model.from_tokenizer_json(
        fast, path=os.path.join(src, FAST_TOKENIZER), config=config, lower_case=bool(lower_case),
        keep_accents=bool(keep_accents), special_tokens=names)
  return bool(lower_case), tokenizer, model


def sentencepiece_file(src: str) -> str | None:
  """The file of `src` the SentencePiece model comes from: `spiece.model`, else `tokenizer.json` (the model
  is built from it), else None."""
  for name in (SENTENCEPIECE_MODEL, FAST_TOKENIZER):
    if os.path.isfile(os.path.join(src, name)):
      return name
  return None


def _normalizer_types(normalizer):
  """The `type`s of a `tokenizer.json` normalizer and of the steps of a `Sequence` ([] for none)."""
  if not isinstance(normalizer, dict):
    return []
  steps = normalizer.get("normalizers") if normalizer.get("type") == "Sequence" else [normalizer]
  return [step.get("type") for step in steps or [] if isinstance(step, dict)]

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
"""

import json
import os

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


def read_json_object(path):
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


def hf_vocab(src):
  """The WordPiece tokens (index = id) of `vocab.txt`, else of the fast tokenizer's `tokenizer.json`.

  None when there is neither.
  """
  path = os.path.join(src, "vocab.txt")
  if os.path.isfile(path):
    with open(path, encoding="utf-8") as file:
      return [line.rstrip("\n").rstrip("\r") for line in file]
  fast_path = os.path.join(src, FAST_TOKENIZER)
  model = read_json_object(fast_path).get("model")
  if not isinstance(model, dict) or not isinstance(model.get("vocab"), dict):
    return None
  if model.get("type") != "WordPiece" or model.get("continuing_subword_prefix", "##") != "##":
    raise TokenizerFilesError(f"{fast_path}: a {model.get('type')} model with continuing_subword_prefix="
                              f"{model.get('continuing_subword_prefix')!r}; TextEncoder reproduces WordPiece "
                              "with '##' only")
  ids = sorted(model["vocab"].items(), key=lambda item: item[1])
  if [i for _, i in ids] != list(range(len(ids))):
    raise TokenizerFilesError(f"{fast_path}: the WordPiece ids are not 0..{len(ids) - 1} without gaps")
  return [token for token, _ in ids]


def hf_settings(src, funnel=False):
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
  config = read_json_object(config_path)
  special_map = read_json_object(os.path.join(src, SPECIAL_TOKENS_MAP))
  fast = read_json_object(os.path.join(src, FAST_TOKENIZER))
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
  vocab = None if tokens is None else set(tokens)
  names = dict(BERT_NAMES)
  if funnel and vocab is not None and FUNNEL_NAMES["cls"] in vocab and BERT_NAMES["cls"] not in vocab:
    names = dict(FUNNEL_NAMES)   # FunnelTokenizer's defaults
  for role in SPECIAL_ROLES:
    token = _token(config.get(f"{role}_token")) or _token(special_map.get(f"{role}_token"))
    if token:
      names[role] = token
  if vocab is not None:
    missing = {role: token for role, token in names.items() if token not in vocab}
    if missing:
      raise TokenizerFilesError(f"{src}: the vocabulary lacks the special token(s) {missing} that the "
                                "tokenizer files name")
  max_chars = model.get("max_input_chars_per_word", HF_MAX_CHARS_PER_WORD)
  tokenizer = dict(special_tokens=names, cls_type_id=2 if funnel else 0, max_chars_per_word=int(max_chars))
  return lower_case, tokenizer


def google_settings(lower_case):
  """`(lower_case, tokenizer)` of Google's BERT release (`tokenization.FullTokenizer`)."""
  return bool(lower_case), dict(special_tokens=dict(BERT_NAMES), cls_type_id=0,
                                max_chars_per_word=GOOGLE_MAX_CHARS_PER_WORD)


# ALBERT's tokenizer (`AlbertTokenizer`): a SentencePiece model and these special tokens.
SENTENCEPIECE_MODEL = "spiece.model"
ALBERT_NAMES = dict(pad="<pad>", unk="<unk>", cls="[CLS]", sep="[SEP]", mask="[MASK]")


def sentencepiece_settings(src):
  """`(lower_case, tokenizer, model bytes)` of a Hugging Face ALBERT directory's tokenizer files.

  The SentencePiece model is `spiece.model`; `tokenizer_config.json` gives `do_lower_case`
  and `keep_accents` and the special tokens (default ALBERT's), `special_tokens_map.json` the
  special tokens too. Without those settings, `tokenizer.json`'s normalizers say them
  (`Lowercase`; `StripAccents`), else ALBERT's defaults (uncased, accents stripped).
  `tokenizer` is the `config.json` field (`kind: "sentencepiece"`,
  `zoo.text.sentencepiece.text_encoder`).

  Raises:
    TokenizerFilesError: no `spiece.model` (a `tokenizer.json` alone holds no model that
      tensorflow-text's SentencePiece op reads).
  """
  path = os.path.join(src, SENTENCEPIECE_MODEL)
  if not os.path.isfile(path):
    others = [name for name in os.listdir(src) if name == FAST_TOKENIZER] if os.path.isdir(src) else []
    hint = (f" (it has {others[0]}, whose Unigram model the in-graph tokenizer cannot read: add the "
            f"release's {SENTENCEPIECE_MODEL})") if others else ""
    raise TokenizerFilesError(f"{src}: no {SENTENCEPIECE_MODEL}, the SentencePiece model of the checkpoint's "
                              f"tokenizer{hint}")
  with open(path, "rb") as file:
    model = file.read()
  config = read_json_object(os.path.join(src, TOKENIZER_CONFIG))
  special_map = read_json_object(os.path.join(src, SPECIAL_TOKENS_MAP))
  names = dict(ALBERT_NAMES)
  for role in SPECIAL_ROLES:
    token = _token(config.get(f"{role}_token")) or _token(special_map.get(f"{role}_token"))
    if token:
      names[role] = token
  steps = _normalizer_types(read_json_object(os.path.join(src, FAST_TOKENIZER)).get("normalizer"))
  lower_case = config.get("do_lower_case", "Lowercase" in steps if steps else True)
  keep_accents = config.get("keep_accents", "StripAccents" not in steps if steps else False)
  tokenizer = dict(kind="sentencepiece", keep_accents=bool(keep_accents), special_tokens=names,
                   cls_type_id=0)
  return bool(lower_case), tokenizer, model


def _normalizer_types(normalizer):
  """The `type`s of a `tokenizer.json` normalizer and of the steps of a `Sequence` ([] for none)."""
  if not isinstance(normalizer, dict):
    return []
  steps = normalizer.get("normalizers") if normalizer.get("type") == "Sequence" else [normalizer]
  return [step.get("type") for step in steps or [] if isinstance(step, dict)]

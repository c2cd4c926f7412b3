"""The Hugging Face tokenizer files an export to Hugging Face writes, which tokenize as the run's own
text encoder (`zoo.text`); `zoo.convert.tokenizer_files` reads such files, the other way.

A SentencePiece model directory (`hf-albert`) gets its `spiece.model` and the
`tokenizer.json` of transformers' `AlbertTokenizer` (unigram, its normalizers and
`Metaspace`): `sentencepiece_tokenizer_files`. A WordPiece one (`wordpiece_tokenizer_files`):
`vocab.txt`, and `FunnelTokenizer` / `BertTokenizer` when they compute the run's tokenizer
(words of at most 100 characters, [CLS]'s token type theirs), else `PreTrainedTokenizerFast`,
which runs `tokenizer.json` as written. A Funnel's [CLS] has token type 2 in Hugging Face (the
zoo's Funnel gives the first token segment 2 whatever its type id, Hugging Face's the tokens of
type 2), so the Funnel tokenizer gives it 2. Both are built with Hugging Face's `tokenizers`,
with `tokenizer_config.json` and `special_tokens_map.json`.
"""

import json
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

from zoo.convert.errors import ConversionError

HF_MAX_CHARS_PER_WORD = 100   # transformers' BertTokenizer / FunnelTokenizer WordPiece
FUNNEL_CLS_TYPE_ID = 2


def tokenizer_settings(settings: Mapping[str, Any], vocab: Sequence[str], sentencepiece: bytes | None = None
                       ) -> dict[str, Any]:
  """The run's text encoder settings (casing, special tokens, [CLS]'s type, word length; `kind`
  "sentencepiece" for a SentencePiece model)."""
  from zoo.text import text_encoder
  lower_case = settings.get("lower_case")
  encoder = text_encoder(vocab, seq_length=max(3, int(settings.get("seq_length") or 3)),
                         sentencepiece_model=sentencepiece,
                         lower_case=True if lower_case is None else bool(lower_case),
                         **(settings.get("tokenizer") or {}))
  return encoder.settings()


def sentencepiece_tokenizer_files(model: bytes, text: Mapping[str, Any], seq_length: int
                                  ) -> dict[str, str | bytes]:
  """`{file name: text or bytes}` of the Hugging Face tokenizer files (`spiece.model` and ALBERT's
  `tokenizer.json`, as transformers' `AlbertTokenizer` builds it) that tokenize as
  `zoo.text.SentencePieceEncoder` with the settings `text` does.

  Raises:
    ConversionError: a SentencePiece model other than unigram (ALBERT's).
  """
  from tokenizers import Tokenizer
  from tokenizers import decoders
  from tokenizers import normalizers
  from tokenizers import pre_tokenizers
  from tokenizers import processors
  from tokenizers.models import Unigram

  from zoo.text.sentencepiece import describe_model
  described = describe_model(model)
  if described["model_type"] != "unigram":
    raise ConversionError(f"a {described['model_type']} SentencePiece model: transformers' AlbertTokenizer "
                          "runs unigram models only")
  special = text["special_tokens"]
  pieces = [piece for piece, _, _ in described["pieces"]]
  ids = {piece: i for i, piece in reversed(list(enumerate(pieces)))}
  cls, sep = special["cls"], special["sep"]
  tokenizer = Tokenizer(Unigram([(piece, score) for piece, score, _ in described["pieces"]],
                                unk_id=ids[special["unk"]], byte_fallback=False))
  steps: list[normalizers.Normalizer] = [normalizers.Replace("``", '"'), normalizers.Replace("''", '"')]
  if not text["keep_accents"]:
    steps += [normalizers.NFKD(), normalizers.StripAccents()]
  if text["lower_case"]:
    steps.append(normalizers.Lowercase())
  if described["precompiled_charsmap"]:
    steps.append(normalizers.Precompiled(described["precompiled_charsmap"]))
  tokenizer.normalizer = normalizers.Sequence(steps)
  tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
      pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")])
  tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
  cls_type = int(text["cls_type_id"])
  tokenizer.post_processor = processors.TemplateProcessing(
      single=f"{cls}:{cls_type} $A:0 {sep}:0", pair=f"{cls}:{cls_type} $A:0 {sep}:0 $B:1 {sep}:1",
      special_tokens=[(cls, ids[cls]), (sep, ids[sep])])
  tokenizer.add_special_tokens([special[role] for role in ("pad", "unk", "cls", "sep", "mask")])
  names = {f"{role}_token": special[role] for role in ("unk", "sep", "pad", "cls", "mask")}
  # The generic class runs tokenizer.json as written (AlbertTokenizer would rebuild its normalizer from
  # its arguments); `token_type_ids` as ALBERT's models take them.
  config = dict(tokenizer_class="PreTrainedTokenizerFast", do_lower_case=text["lower_case"],
                keep_accents=text["keep_accents"], bos_token=cls, eos_token=sep, **names,
                model_max_length=int(seq_length), padding_side="right", truncation_side="right",
                model_input_names=["input_ids", "token_type_ids", "attention_mask"])
  return {"tokenizer.json": tokenizer.to_str(pretty=True),
          "tokenizer_config.json": json.dumps(config, indent=2) + "\n",
          "special_tokens_map.json": json.dumps(names, indent=2) + "\n",
          "spiece.model": bytes(model)}


def wordpiece_tokenizer_files(vocab: Sequence[str], text: Mapping[str, Any], family: str, seq_length: int
                              ) -> dict[str, str | bytes]:
  """`{file name: text}` of the Hugging Face tokenizer files (`vocab.txt` and BERT's `tokenizer.json`)
  that tokenize as `zoo.text.TextEncoder` with the settings `text` (`TextEncoder.settings()`) does."""
  from tokenizers import Tokenizer
  from tokenizers import decoders
  from tokenizers import normalizers
  from tokenizers import pre_tokenizers
  from tokenizers import processors
  from tokenizers.models import WordPiece

  special = text["special_tokens"]
  ids = {token: i for i, token in enumerate(vocab)}
  cls, sep = special["cls"], special["sep"]
  cls_type = FUNNEL_CLS_TYPE_ID if family == "funnel" else int(text["cls_type_id"])
  tokenizer = Tokenizer(WordPiece(ids, unk_token=special["unk"], continuing_subword_prefix="##",
                                  max_input_chars_per_word=int(text["max_chars_per_word"])))
  tokenizer.normalizer = normalizers.BertNormalizer(
      clean_text=True, handle_chinese_chars=True, strip_accents=text["lower_case"],
      lowercase=text["lower_case"])
  tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
  tokenizer.decoder = decoders.WordPiece(prefix="##")
  tokenizer.post_processor = processors.TemplateProcessing(
      single=f"{cls}:{cls_type} $A:0 {sep}:0", pair=f"{cls}:{cls_type} $A:0 {sep}:0 $B:1 {sep}:1",
      special_tokens=[(cls, ids[cls]), (sep, ids[sep])])
  tokenizer.add_special_tokens([special[role] for role in ("pad", "unk", "cls", "sep", "mask")])
  # The model's own class when it computes the same ids (it rebuilds WordPiece with 100 characters per
  # word and its own [CLS] type); else the generic class, which runs tokenizer.json as written.
  own_class = "FunnelTokenizer" if family == "funnel" else "BertTokenizer"
  native = text["max_chars_per_word"] == HF_MAX_CHARS_PER_WORD and (family == "funnel" or cls_type == 0)
  names = {f"{role}_token": special[role] for role in ("unk", "sep", "pad", "cls", "mask")}
  config = dict(
      tokenizer_class=own_class if native else "PreTrainedTokenizerFast", do_lower_case=text["lower_case"],
      strip_accents=None, tokenize_chinese_chars=True, clean_text=True, **names,
      bos_token="<s>" if "<s>" in ids else None, eos_token="</s>" if "</s>" in ids else None,
      model_max_length=int(seq_length), padding_side="right", truncation_side="right",
      model_input_names=["input_ids", "token_type_ids", "attention_mask"])
  return {"tokenizer.json": tokenizer.to_str(pretty=True),
          "tokenizer_config.json": json.dumps(config, indent=2) + "\n",
          "special_tokens_map.json": json.dumps(names, indent=2) + "\n",
          "vocab.txt": "".join(token + "\n" for token in vocab)}

"""keras-hub tokenizers of Hugging Face BERT and Funnel directories: transformers' ids, whatever the layout.

Every layout of tokenizer files users meet is written here, beside a tiny config.json (the
tokenizer needs no weights): transformers 5's `save_pretrained` output (tokenizer.json and
tokenizer_config.json) cased, uncased, uncased with accents kept, cased with accents
stripped and with CJK characters left unsplit; transformers 4's (vocab.txt, tokenizer_config.json
with `added_tokens_decoder`, special_tokens_map.json, tokenizer.json), written by hand from
those; a tokenizer.json alone (transformers reads no setting from it: uncased, accents
stripped, whatever its normaliser says); a vocab.txt alone; a vocab.txt that disagrees with
tokenizer.json (transformers takes tokenizer.json's); special_tokens_map.json renaming the
unknown token, which transformers reads only when tokenizer_config.json has no
`added_tokens_decoder`. `keras_hub.models.Tokenizer.from_preset` (after `import zoo.keras3`,
in one process: keras-hub tokenizes with TensorFlow whatever Keras' backend) must give
`transformers.AutoTokenizer`'s ids (without special tokens) and special tokens.

The vocabulary holds every character of the texts (alone and as a `##` piece) under every
setting and every other whole word, so a wrong casing, accent or CJK setting changes the ids
rather than giving unknown tokens. The texts leave out what keras-hub's pre-tokenization does
differently whatever the settings (`zoo.convert.tokenizer_files.keras_hub_settings`): control
characters, non-ASCII spaces, and what its NFKC case folding changes ("ß", ligatures, Hangul).
"""

import json
import os

import pytest

from tests.zoo.keras3.conftest import run_in_backend
from zoo.convert import tokenizer_files

BERT_SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
FUNNEL_SPECIAL = ["<pad>", "<unk>", "<cls>", "<sep>", "<mask>", "<s>", "</s>"]
UNKNOWN = "☃🙂"   # characters left out of the vocabulary
TEXTS = [
    "Ünïcödé wörds, 漢字 and CJK: 東京!",
    "Thé naïve café's rôle — déjà vu?",
    "A  B\tc\nd",
    "The dogs run, the cat was running! A good film is bad. The dog runs, a cat runs.",
    "The Zürich office’s CEO said: «Ça va?» — Señor Muñoz agreed, and Ångström nodded.",
    "  Leading and trailing spaces, then MIXED case: iPhone, McDonald's, O'Brien.  ",
    "Numbers 3.14 and 1,000; an e-mail@example.com & (brackets) [too] {and} <these>.",
    "A snowman ☃ melts; an émoji 🙂 too. 日本語のテキストです。",
    "A word of a hundred and twenty letters: " + "y" * 120 + ".",
    "",
]
# (do_lower_case, strip_accents, tokenize_chinese_chars) of transformers 5's save_pretrained layouts.
SAVED = {"cased": (False, None, True), "uncased": (True, None, True),
         "uncased_keep_accents": (True, False, True), "cased_strip_accents": (False, True, True),
         "uncased_cjk_words": (True, None, False)}


def _normalized_words(lowercase, strip_accents, cjk):
  from tokenizers import normalizers
  from tokenizers import pre_tokenizers
  normalizer = normalizers.BertNormalizer(lowercase=lowercase, strip_accents=strip_accents,
                                          handle_chinese_chars=cjk)
  split = pre_tokenizers.BertPreTokenizer()
  return [word for text in TEXTS for word, _ in split.pre_tokenize_str(normalizer.normalize_str(text))]


def vocabulary(special):
  """`special`, then every character of the texts' words under every setting and `##` it, then every
  other of those words (a word in the vocabulary is one token, any other one piece per character)."""
  words = sorted({word for lowercase in (False, True) for strip in (False, True) for cjk in (False, True)
                  for word in _normalized_words(lowercase, strip, cjk) if not set(word) & set(UNKNOWN)})
  characters = sorted(set("".join(words)))
  tokens = special + characters + [f"##{character}" for character in characters]
  tokens += [word for word in words[::2] if len(word) <= 20]
  return list(dict.fromkeys(tokens))


def _write_json(path, values):
  with open(path, "w", encoding="utf-8") as file:
    json.dump(values, file, ensure_ascii=False, indent=2)


def _read_json(path):
  with open(path, encoding="utf-8") as file:
    return json.load(file)


def _directory(root, name, model_config, files):
  """`root/name` with `model_config`'s config.json and `files` ({file name: JSON value or vocab list})."""
  path = os.path.join(root, name)
  os.makedirs(path)
  model_config.save_pretrained(path)
  for file_name, value in files.items():
    if file_name == "vocab.txt":
      with open(os.path.join(path, file_name), "w", encoding="utf-8") as file:
        file.write("".join(f"{token}\n" for token in value))
    else:
      _write_json(os.path.join(path, file_name), value)
  return path


def _transformers_4_files(saved, tokens, special, names):
  """transformers 4's files from a transformers 5 directory `saved`: vocab.txt, a tokenizer_config.json with
  the settings and `added_tokens_decoder`, special_tokens_map.json (AddedToken dicts) and tokenizer.json."""
  config = _read_json(os.path.join(saved, "tokenizer_config.json"))
  settings = {key: config[key] for key in ("do_lower_case", "strip_accents", "tokenize_chinese_chars")}
  added = {str(tokens.index(token)): dict(content=token, lstrip=False, normalized=False, rstrip=False,
                                          single_word=False, special=True) for token in special}
  role_tokens = {f"{role}_token": token for role, token in names.items()}
  return {"vocab.txt": tokens,
          "tokenizer_config.json": dict(added_tokens_decoder=added, clean_up_tokenization_spaces=True,
                                        do_basic_tokenize=True, model_max_length=512, never_split=None,
                                        tokenizer_class=config["tokenizer_class"], **settings, **role_tokens),
          "special_tokens_map.json": {key: dict(content=token, lstrip=False, normalized=False, rstrip=False,
                                                single_word=False) for key, token in role_tokens.items()},
          "tokenizer.json": _read_json(os.path.join(saved, "tokenizer.json"))}


def write_layouts(root):
  """`({case: directory}, {case: directory keras-hub refuses})`: every layout of BERT's and Funnel's
  tokenizer files (see the module docstring); refused, a BERT directory naming other special tokens
  than keras-hub's BertTokenizer packs with."""
  import transformers
  cases = {}
  for family, special in (("bert", BERT_SPECIAL), ("funnel", FUNNEL_SPECIAL)):
    tokens = vocabulary(special)
    names = dict(zip(tokenizer_files.SPECIAL_ROLES, special[:5], strict=True))
    if family == "bert":
      tokenizer_class = transformers.BertTokenizer
      model_config = transformers.BertConfig(vocab_size=len(tokens), hidden_size=8, num_hidden_layers=1,
                                             num_attention_heads=1, intermediate_size=8)
    else:
      tokenizer_class = transformers.FunnelTokenizer
      model_config = transformers.FunnelConfig(vocab_size=len(tokens), d_model=8, n_head=1, d_head=8,
                                               d_inner=8, block_sizes=[1])
    for name, (lowercase, strip_accents, cjk) in SAVED.items():
      saved = _directory(root, f"{family}_v5_{name}", model_config, {})
      tokenizer_class(vocab={token: i for i, token in enumerate(tokens)}, do_lower_case=lowercase,
                      strip_accents=strip_accents, tokenize_chinese_chars=cjk).save_pretrained(saved)
      cases[f"{family}_v5_{name}"] = saved
      if name in ("cased", "uncased", "uncased_keep_accents"):
        cases[f"{family}_v4_{name}"] = _directory(root, f"{family}_v4_{name}", model_config,
                                                  _transformers_4_files(saved, tokens, special, names))
        fast = _read_json(os.path.join(saved, "tokenizer.json"))
        cases[f"{family}_tokenizer_json_{name}"] = _directory(root, f"{family}_tokenizer_json_{name}",
                                                              model_config, {"tokenizer.json": fast})
    cases[f"{family}_vocab_txt"] = _directory(root, f"{family}_vocab_txt", model_config,
                                              {"vocab.txt": tokens})
    # vocab.txt with its words in reverse order beside tokenizer.json: transformers reads tokenizer.json's.
    fast = _read_json(os.path.join(cases[f"{family}_v5_cased"], "tokenizer.json"))
    reordered = special + tokens[len(special):][::-1]
    cases[f"{family}_vocab_txt_and_tokenizer_json"] = _directory(
        root, f"{family}_vocab_txt_and_tokenizer_json", model_config,
        {"vocab.txt": reordered, "tokenizer.json": fast, "tokenizer_config.json": dict(do_lower_case=False)})
    # Older files (no added_tokens_decoder): special_tokens_map.json's names win over tokenizer_config.json's;
    # with added_tokens_decoder, special_tokens_map.json is not read.
    for name, added in (("special_tokens_map", {}), ("added_tokens_decoder", dict(added_tokens_decoder={}))):
      cases[f"{family}_{name}"] = _directory(
          root, f"{family}_{name}", model_config,
          {"vocab.txt": tokens, "special_tokens_map.json": dict(unk_token=names["mask"]),
           "tokenizer_config.json": dict(do_lower_case=True, unk_token=names["unk"], **added)})
    if family == "bert":
      refused = {"bert_renamed_cls": _directory(
          root, "bert_renamed_cls", model_config,
          {"vocab.txt": [*tokens, "<cls>"], "tokenizer_config.json": dict(cls_token="<cls>")})}
  return cases, refused


def transformers_results(cases):
  """`{case: (ids of TEXTS, {role: special token})}` of `transformers.AutoTokenizer`."""
  import transformers
  results = {}
  for name, path in cases.items():
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    ids = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in TEXTS]
    names = {role: str(getattr(tokenizer, f"{role}_token")) for role in tokenizer_files.SPECIAL_ROLES}
    results[name] = ids, names
  return results


def _differences(result, ids, names, family):
  """How keras-hub's `result` (the runner's, for one case) differs from transformers' `ids`, `names`."""
  if "error" in result:
    return result["error"]
  wrong = {}
  for part, got, want in (("class", result["cls"], f"{family.capitalize()}Tokenizer"),
                          ("special tokens", result["names"], names)):
    if got != want:
      wrong[part] = f"{got} != {want}"
  for part in ("ids", "round_trip_ids"):
    texts = [f"{text!r}: {got} != {want}" for text, got, want in zip(TEXTS, result.get(part, ids), ids,
                                                                     strict=True) if got != want]
    if texts:
      wrong[part] = texts
  return wrong


# One process for every layout: its keras-hub import is the test's cost (slow, as every test of this
# folder that starts a Keras 3 process).
@pytest.mark.slow
def test_tokenizer_layouts_give_transformers_ids(tmp_path):
  cases, refused = write_layouts(str(tmp_path / "layouts"))
  expected = transformers_results(cases)
  # The vocabulary makes the settings matter: each of transformers 5's layouts gives other ids.
  saved = [json.dumps(expected[f"{family}_v5_{name}"][0]) for family in ("bert", "funnel") for name in SAVED]
  assert len(set(saved)) == len(saved)
  spec = dict(texts=TEXTS, cases={**cases, **refused}, presets=str(tmp_path / "presets"),
              round_trip=[name for name in cases if name.startswith("funnel_")])
  _write_json(tmp_path / "spec.json", spec)
  run_in_backend("jax", "tests.zoo.keras3.tokenizer_layouts_run", str(tmp_path / "spec.json"),
                 str(tmp_path / "out.json"))
  out = _read_json(tmp_path / "out.json")
  wrong = {name: _differences(out[name], ids, names, name.split("_")[0])
           for name, (ids, names) in expected.items()}
  wrong = {name: difference for name, difference in wrong.items() if difference}
  assert not wrong, json.dumps(wrong, ensure_ascii=False, indent=1)
  assert "cls_token" in out["bert_renamed_cls"].get("error", ""), out["bert_renamed_cls"]


def test_settings_must_be_true_or_false(tmp_path):
  _write_json(tmp_path / "tokenizer_config.json", dict(do_lower_case=None))
  (tmp_path / "vocab.txt").write_text("".join(f"{token}\n" for token in BERT_SPECIAL))
  with pytest.raises(tokenizer_files.TokenizerFilesError, match="tokenizer_config.json: do_lower_case=null"):
    tokenizer_files.keras_hub_settings(str(tmp_path))

"""keras-hub tokenizers of Hugging Face BERT and Funnel directories and of zoo model directories:
transformers' ids (and the zoo's TextEncoder's) on any text, whatever the layout; text pairs trimmed as
transformers trims them.

Every layout of tokenizer files users meet is written here, beside a tiny config.json (the
tokenizer needs no weights): transformers 5's `save_pretrained` output (tokenizer.json and
tokenizer_config.json) cased, uncased, uncased with accents kept, cased with accents
stripped and with CJK characters left unsplit; FunnelTokenizer's with `clean_text=false`; one with
added tokens (an extra special token and a normalised one, both beyond the vocabulary);
transformers 4's (vocab.txt, tokenizer_config.json with `added_tokens_decoder`,
special_tokens_map.json, tokenizer.json), written by hand from those; a tokenizer.json alone
(transformers reads no setting from it: uncased, accents stripped, whatever its normaliser says); a
vocab.txt alone; a vocab.txt that disagrees with tokenizer.json (transformers takes
tokenizer.json's); special_tokens_map.json renaming the unknown token, which transformers reads only
when tokenizer_config.json has no `added_tokens_decoder`. Beside them, zoo model directories
(config.json and vocab.txt, as a training run writes them): uncased, cased, recording the truncator,
with Funnel's special tokens and a word limit of 200 characters. `keras_hub.models.Tokenizer.from_preset`
(after `import zoo.keras3`, in one process: keras-hub tokenizes with TensorFlow whatever Keras' backend)
must give `transformers.AutoTokenizer`'s ids (without special tokens) and special tokens, and for
a zoo directory its `zoo.text.TextEncoder`'s ids, eagerly and in `tf.data`, and again after a
config and vocabulary round trip.

The texts hold every class of text keras-hub's own WordPiece tokenizes otherwise: control and
format characters, non-ASCII spaces, what NFKC case folding changes (`…`, `™`, `：`, `ß`,
ligatures, full-width letters, Hangul), special tokens typed in the text (transformers keeps its
added tokens whole; the zoo's TextEncoder splits them as any text), Greek final sigma, private-use
characters and long words (51 `é`, 120 and 500 letters); a few layouts also tokenize the
standard library's docstrings (`tests.zoo.text.test_reference.stdlib_prose`). The vocabulary holds
every character of the texts (alone and as a `##` piece) under every setting and every other whole
word, so a wrong casing, accent or CJK setting changes the ids rather than giving unknown tokens.

Text pairs of docstring lines go through `TextClassifierPreprocessor.from_preset` at lengths that
trim one or both segments: transformers' `truncation="longest_first"` ids for Hugging Face
directories, the directory's TextEncoder's (its truncator: "longest_first", or "round_robin" for a
directory that records none) for zoo directories.
"""

import functools
import itertools
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
    # Control and format characters (removed), non-ASCII spaces (word separators).
    "zero\u200bwidth soft\u00adhyphen bell\x07ring rtl\u200fmark bom\ufeffx del\x7fc1\x85",
    "nbsp\u00a0here ideographic\u3000space thin\u2009space ogham\u1680x line\u2028sep",
    # Compatibility characters, which keras-hub's NFKC case folding rewrites.
    "\u2026 ellipsis\u2122 trade\uff1acolon Stra\u00dfe \u00df \u1e9e \ufb01nance \ufb02ow "
    "\uff26\uff55\uff4c\uff4c \uff57\uff49\uff44\uff54\uff48 \uff21\uff22\uff23 \uff11\uff12\uff13 "
    "\u2103 \u2116 \u338f",
    # Special tokens typed in the text.
    "[CLS] hello [SEP] a [MASK] b [UNK] [PAD]", "<cls> x <sep> y <mask> <s> </s> <unk> [cls] <CLS>",
    "x[SEP]y<sep>z [E1] zebrafish Zebrafish",
    # Words of 51 é (102 UTF-8 bytes), of 120 and of 500 letters.
    "\u00e9" * 51, "a " + "x" * 120 + " b", "z" * 500,
    # Greek capital sigma ending a word, private-use characters, Hangul.
    "\u039f\u0394\u039f\u03a3 \u03a3\u0391\u03a3' \u03a3", "private\ue000use \U000f0000x",
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8",
]
# Transformers 5's BertTokenizer with added tokens: an extra special token and a normalised token, both
# beyond the vocabulary (`add_special_tokens`, `add_tokens`).
EXTRA_SPECIAL, NORMALIZED_ADDED = "[E1]", "rafi"
# The layouts that also tokenize the docstring corpus, and those whose text pairs are packed.
CORPUS_CASES = ("bert_v5_uncased", "bert_v5_cased", "funnel_v4_uncased", "zoo_uncased", "zoo_cased")
PAIR_CASES = ("bert_v5_uncased", "funnel_v5_cased", "zoo_uncased", "zoo_recorded_truncator")
# The layouts whose keras-hub text tasks are built at TASK_LENGTH (keras-hub's own BERT loader dropped it).
TASK_CASES, TASK_LENGTH = ("bert_v5_uncased", "funnel_v5_uncased"), 24
# The layouts also tokenized in `tf.data` (the graph path: the same TensorFlow ops, traced).
GRAPH_CASES = ("bert_v5_uncased", "bert_v5_added_tokens", "funnel_v5_no_clean_text",
               "funnel_v5_cased_strip_accents", "zoo_uncased", "zoo_funnel_200_characters")
PAIR_LENGTHS = (16, 17, 40)
# (do_lower_case, strip_accents, tokenize_chinese_chars) of transformers 5's save_pretrained layouts.
SAVED = {"cased": (False, None, True), "uncased": (True, None, True),
         "uncased_keep_accents": (True, False, True), "cased_strip_accents": (False, True, True),
         "uncased_cjk_words": (True, None, False)}


def corpus():
  """The docstring lines of the standard library (`stdlib_prose`, about 19,000), and a text with NUL
  (which FunnelTokenizer's `clean_text=false` would keep, so not in TEXTS)."""
  from tests.zoo.text.test_reference import stdlib_prose
  return [*stdlib_prose(), "nul\x00byte, [CLS] after it"]


def _normalized_words(texts, lowercase, strip_accents, cjk):
  from tokenizers import normalizers
  from tokenizers import pre_tokenizers
  normalizer = normalizers.BertNormalizer(lowercase=lowercase, strip_accents=strip_accents,
                                          handle_chinese_chars=cjk)
  split = pre_tokenizers.BertPreTokenizer()
  return [word for text in texts for word, _ in split.pre_tokenize_str(normalizer.normalize_str(text))]


@functools.cache
def _words():
  """Every word of the texts and the corpus under every setting (lowercase, strip_accents, CJK split)."""
  texts = TEXTS + corpus()
  return sorted({word for setting in itertools.product((False, True), repeat=3)
                 for word in _normalized_words(texts, *setting) if not set(word) & set(UNKNOWN)})


def vocabulary(special):
  """`special`, then every character of the texts' and the corpus's words under every setting and `##` it,
  then every other of those words (a word in the vocabulary is one token, any other one piece per
  character)."""
  words = _words()
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
                                             num_attention_heads=1, intermediate_size=8,
                                             architectures=["BertModel"])
    else:
      tokenizer_class = transformers.FunnelTokenizer
      model_config = transformers.FunnelConfig(vocab_size=len(tokens), d_model=8, n_head=1, d_head=8,
                                               d_inner=8, block_sizes=[1], architectures=["FunnelModel"])
    for name, (lowercase, strip_accents, cjk) in SAVED.items():
      saved = _directory(root, f"{family}_v5_{name}", model_config, {})
      tokenizer_class(vocab={token: i for i, token in enumerate(tokens)}, do_lower_case=lowercase,
                      strip_accents=strip_accents, tokenize_chinese_chars=cjk).save_pretrained(saved)
      cases[f"{family}_v5_{name}"] = saved
      if name == "uncased" and family == "funnel":   # control and format characters kept
        kept = _directory(root, "funnel_v5_no_clean_text", model_config, {})
        tokenizer_class(vocab={token: i for i, token in enumerate(tokens)},
                        clean_text=False).save_pretrained(kept)
        cases["funnel_v5_no_clean_text"] = kept
      if name == "uncased" and family == "bert":   # added tokens beyond the vocabulary
        added = _directory(root, "bert_v5_added_tokens", model_config, {})
        tokenizer = tokenizer_class(vocab={token: i for i, token in enumerate(tokens)})
        tokenizer.add_special_tokens({"additional_special_tokens": [EXTRA_SPECIAL]})
        tokenizer.add_tokens([NORMALIZED_ADDED])
        tokenizer.save_pretrained(added)
        cases["bert_v5_added_tokens"] = added
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


# Zoo model directories `{case: (lower_case, config.json's tokenizer, family of the vocabulary's specials)}`.
ZOO_DIRECTORIES = {"zoo_uncased": (True, None, "bert"), "zoo_cased": (False, None, "bert"),
                   "zoo_recorded_truncator": (True, dict(truncator="longest_first"), "bert"),
                   "zoo_funnel_200_characters": (True, dict(special_tokens=tokenizer_files.FUNNEL_NAMES,
                                                            cls_type_id=2, max_chars_per_word=200), "funnel")}


def write_zoo_directories(root):
  """`{case: directory}` of ZOO_DIRECTORIES: config.json and vocab.txt, what keras-hub's tokenizer and
  preprocessors of a zoo model directory read (a training run records its truncator; one written
  before that records none)."""
  cases = {}
  for name, (lower_case, tokenizer, family) in ZOO_DIRECTORIES.items():
    tokens = vocabulary(BERT_SPECIAL if family == "bert" else FUNNEL_SPECIAL)
    path = os.path.join(root, name)
    os.makedirs(path)
    model = "bert_small" if family == "bert" else "funnel_b4_4_4"
    _write_json(os.path.join(path, "config.json"),
                dict(model=model, task="classify", num_classes=2, seq_length=PAIR_LENGTHS[0],
                     vocab_size=len(tokens), lower_case=lower_case, tokenizer=tokenizer))
    with open(os.path.join(path, "vocab.txt"), "w", encoding="utf-8") as file:
      file.write("".join(f"{token}\n" for token in tokens))
    cases[name] = path
  return cases


def pairs():
  """Text pairs of docstring lines of many lengths, some trimmed at every PAIR_LENGTHS."""
  lines = corpus()
  return [(lines[i], lines[(7 * i + 3) % len(lines)] + " " + lines[i + 1]) for i in range(0, 6000, 50)]


def transformers_results(cases):
  """`{case: dict(cls, names, ids, corpus_ids?, pairs?)}` of `transformers.AutoTokenizer`: the keras-hub
  class expected, the special tokens by role, the ids (without special tokens) of TEXTS and, for
  CORPUS_CASES, of the corpus, and for PAIR_CASES the packed ids of `pairs()` at each PAIR_LENGTHS."""
  import transformers
  results = {}
  for name, path in cases.items():
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    result = results[name] = dict(
        cls=f"{name.split('_')[0].capitalize()}Tokenizer",
        names={role: str(getattr(tokenizer, f"{role}_token")) for role in tokenizer_files.SPECIAL_ROLES},
        ids=tokenizer(TEXTS, add_special_tokens=False)["input_ids"])
    if name in CORPUS_CASES:
      result["corpus_ids"] = tokenizer(corpus(), add_special_tokens=False)["input_ids"]
    if name in PAIR_CASES:
      first, second = zip(*pairs(), strict=True)
      result["pairs"] = {str(length): tokenizer(list(first), list(second), truncation="longest_first",
                                                max_length=length, padding="max_length")["input_ids"]
                         for length in PAIR_LENGTHS}
  return results


def text_encoder_results(cases):
  """`{case: dict(...)}` as `transformers_results`, of zoo model directories: their `zoo.text.TextEncoder`'s
  ids (its truncator as the directory records it, "round_robin" when it records none)."""
  import tensorflow as tf

  from zoo.model_dir import ModelDir
  from zoo.model_dir import tokenizer_as_written
  from zoo.text import TextEncoder
  results = {}
  for name, path in cases.items():
    settings = ModelDir(path).read_config()
    tokenizer = tokenizer_as_written(settings)
    encoder = TextEncoder(ModelDir(path).read_vocab(), lower_case=settings["lower_case"], **tokenizer)
    family = "Transformer" if settings["model"].startswith("bert") else "Funnel"
    result = results[name] = dict(cls=f"{family}Tokenizer", names=encoder.special_tokens,
                                  ids=encoder.tokenize(tf.constant(TEXTS)).to_list())
    if name in CORPUS_CASES:
      result["corpus_ids"] = encoder.tokenize(tf.constant(corpus())).to_list()
    if name in PAIR_CASES:
      first, second = (tf.constant(side) for side in zip(*pairs(), strict=True))
      result["pairs"] = {}
      for length in PAIR_LENGTHS:
        packer = TextEncoder(encoder.vocab, seq_length=length, lower_case=encoder.lower_case, **tokenizer)
        result["pairs"][str(length)] = packer.encode(first, second)["input_word_ids"].numpy().tolist()
  return results


def _differences(result, expected):
  """How keras-hub's `result` (the runner's, for one case) differs from `expected` (transformers')."""
  if "error" in result:
    return result["error"]
  wrong = {}
  for part in ("cls", "names"):
    if result[part] != expected[part]:
      wrong[part] = f"{result[part]} != {expected[part]}"
  for part, texts, reference in (("ids", TEXTS, "ids"), ("graph_ids", TEXTS, "ids"),
                                 ("round_trip_ids", TEXTS, "ids"), ("corpus_ids", None, "corpus_ids")):
    if part not in result:
      continue
    texts = texts or corpus()
    differing = [f"{text!r}: {got} != {want}" for text, got, want
                 in zip(texts, result[part], expected[reference], strict=True) if got != want]
    if differing:
      wrong[part] = differing[:10] + [f"({len(differing)} texts)"]
  for length, want in expected.get("pairs", {}).items():
    for path, got in result["pairs"][length].items():
      differing = [index for index, (row, expected_row) in enumerate(zip(got, want, strict=True))
                   if row != expected_row]
      if differing:
        wrong[f"pairs at {length} ({path})"] = f"{len(differing)} of {len(want)} pairs, e.g. {differing[:5]}"
  return wrong


# One process for every layout: its keras-hub import is the test's cost (slow, as every test of this
# folder that starts a Keras 3 process).
@pytest.mark.slow
def test_tokenizer_layouts_give_transformers_ids(tmp_path):
  cases, refused = write_layouts(str(tmp_path / "layouts"))
  zoo_cases = write_zoo_directories(str(tmp_path / "zoo"))
  expected = {**transformers_results(cases), **text_encoder_results(zoo_cases)}
  # The vocabulary makes the settings matter: each of transformers 5's layouts gives other ids.
  saved = [json.dumps(expected[f"{family}_v5_{name}"]["ids"]) for family in ("bert", "funnel")
           for name in SAVED]
  assert len(set(saved)) == len(saved)
  # The texts hold what the references tell apart: transformers keeps typed special tokens whole,
  # TextEncoder splits them.
  typed = TEXTS.index("[CLS] hello [SEP] a [MASK] b [UNK] [PAD]")
  assert expected["bert_v5_uncased"]["ids"][typed] != expected["zoo_uncased"]["ids"][typed]
  round_trip = [name for name in {**cases, **zoo_cases} if name.startswith(("funnel_v", "bert_v5", "zoo_"))]
  (tmp_path / "empty").mkdir()
  missing = [str(tmp_path / "missing"), str(tmp_path / "empty"), str(tmp_path / "layouts" / "bert_vocab_txt"
                                                                     / "vocab.txt")]
  spec = dict(texts=TEXTS, corpus=corpus(), cases={**cases, **zoo_cases, **refused}, graph_cases=GRAPH_CASES,
              presets=str(tmp_path / "presets"), round_trip=round_trip, corpus_cases=CORPUS_CASES,
              pair_cases=PAIR_CASES, pairs=pairs(), pair_lengths=PAIR_LENGTHS, task_cases=TASK_CASES,
              task_length=TASK_LENGTH, missing=missing)
  _write_json(tmp_path / "spec.json", spec)
  run_in_backend("jax", "tests.zoo.keras3.tokenizer_layouts_run", str(tmp_path / "spec.json"),
                 str(tmp_path / "out.json"))
  out = _read_json(tmp_path / "out.json")
  wrong = {name: _differences(out[name], want) for name, want in expected.items()}
  wrong = {name: difference for name, difference in wrong.items() if difference}
  assert not wrong, json.dumps(wrong, ensure_ascii=False, indent=1)
  assert "cls_token" in out["bert_renamed_cls"].get("error", ""), out["bert_renamed_cls"]
  assert all("graph_ids" in out[name] for name in GRAPH_CASES)
  assert all("graph" in out[name]["pairs"][str(PAIR_LENGTHS[1])] for name in PAIR_CASES)
  # The pairs tell the rules apart: a directory recording no truncator (round robin, as written) packs
  # some of them otherwise than one recording transformers' rule.
  assert expected["zoo_uncased"]["pairs"] != expected["zoo_recorded_truncator"]["pairs"]
  # Every text task of a BERT or Funnel directory packs to the length asked for, pairs as transformers.
  for name in TASK_CASES:
    family = name.split("_")[0].capitalize()
    tasks = out[name]["tasks"]
    # BERT has 512 positions; Funnel's relative attention takes any length.
    assert ("100000; the BERT checkpoint has 512 positions" if family == "Bert" else "no error") in tasks.pop(
        "too_long"), out[name]["tasks"]
    for task, built in tasks.items():
      assert built == [f"{family}{task}", f"{family}{task}Preprocessor", TASK_LENGTH, "longest_first"], (
          name, task, built)
  # A path that holds no preset: one line naming it and what from_preset takes.
  for path, errors in out["missing"].items():
    for error in errors:
      assert error.startswith(f"FileNotFoundError: {path} ") and "\n" not in error, error
      assert "a zoo model directory" in error and "a Hugging Face directory" in error, error
  # Preprocessors and tokenizers saved before these settings existed still load (their config's keys).
  assert all(out[name]["old_config_ids"] == expected[name]["ids"][3] for name in round_trip), {
      name: out[name]["old_config_ids"] for name in round_trip}


def test_settings_must_be_true_or_false(tmp_path):
  _write_json(tmp_path / "tokenizer_config.json", dict(do_lower_case=None))
  (tmp_path / "vocab.txt").write_text("".join(f"{token}\n" for token in BERT_SPECIAL))
  with pytest.raises(tokenizer_files.TokenizerFilesError, match="tokenizer_config.json: do_lower_case=null"):
    tokenizer_files.keras_hub_settings(str(tmp_path))

"""TextEncoder against BERT's reference tokenizer (Model Garden's `official.nlp.tools.tokenization`), and
`normalize.transformers_words` against transformers' (the `tokenizers` library's `BertNormalizer` and
`BertPreTokenizer`, what its BERT and Funnel tokenizers run).

Real English prose: the docstrings of Python's standard library on this machine (about
19,000 lines). Unicode edge cases: accents, CJK, ß, ligatures, full-width letters,
Greek sigma, control and format characters, emoji, very long words, U+2028 and friends,
invalid UTF-8. Fuzz: seeded random strings of assigned code points of every plane.
Both uncased and cased; each side gets the same vocabulary file.
"""

import ast
import functools
import os
import random
import sysconfig
import unicodedata

import pytest
import tensorflow as tf
from official.nlp.tools import tokenization

from tests.conftest import fast_or_slow
from zoo.text import normalize
from zoo.text.tokenizer import TextEncoder
from zoo.text.vocab import SPECIAL_TOKENS
from zoo.text.vocab import write_vocab

EDGE_CASES = [
    "Café naïve résumé Ångström façade", "CAFÉ ÀÉÎÕÜ cafe\u0301", "Straße STRASSE ß ẞ", "ﬁnance ﬂow ﬀ ﬃ",
    "Ｆｕｌｌ ｗｉｄｔｈ ＡＢＣ １２３", "ΟΔΟΣ ΟΔΟΣ. ΣΑΣ' Σ ΑΣ中", "İstanbul ıi",
    "中文字符 日本語のテキスト 한국어 텍스트",
    "豈更車 \U0002F800 \U00020000x", "tab\there\nnew\rline", "nul\x00byte", "bell\x07 del\x7f c1\x85 \x9f",
    "zero\u200bwidth joiner\u200d\u2060 bom\ufeffx", "soft\u00adhyphen", "rtl\u200fmark \u202ex",
    "line\u2028sep para\u2029sep", "nbsp\u00a0here thin\u2009space ideo\u3000space ogham\u1680x",
    "vt\x0bff\x0cfs\x1cus\x1f", "emoji 😀👍🏽 👨\u200d👩\u200d👧 🇩🇪",
    "a" * 399, "b" * 400 + " x", "c" * 401, "é" * 400, "é" * 401, "ü" * 401,
    "中" * 10, "𝐀𝐁𝐂 ⓐⒶ Ⅻⅻ", "ǅ ǈ ǋ Ǆ", "…ellipsis… ‘quotes’ “double” — dash – «guillemets»",
    "$100 ^caret ~tilde `grave` |pipe| <a href='x'>", "##hash [UNK] [CLS] ##", "हिन्दी भाषा",
    "ไทย ภาษา",
    "العربية", "Ελληνικά κείμενα", "Кириллица ЁЁ", "x\u0301\u0302 \u0301start", "\ue000private \U000f0000",
    "\u0378unassigned", "replacement\ufffdchar", "ⅰⅱ ǰ ŉ ΐ", "Ꭰ ꮰ", "℃ ℉ № ™ ㎏", "", "   ", "\u2028",
    "a.b,c;d:e!f?g", "don't can't it's", "hello—world", "1,000.50", "e.g. i.e. U.S.A.", "Ǆemal ǅemal",
]
INVALID_UTF8 = [b"dog \xff\xfe run", b"\xc3", b"the\x80dog", b"caf\xc3\xa9 \xe2\x82", b"\xed\xa0\x80x"]


@functools.cache
def stdlib_prose():
  """The non-blank lines of every docstring of the standard library's top-level modules."""
  folder = sysconfig.get_paths()["stdlib"]
  lines = []
  for name in sorted(os.listdir(folder)):
    if not name.endswith(".py"):
      continue
    try:
      with open(os.path.join(folder, name), encoding="utf-8") as file:
        tree = ast.parse(file.read())
    except (SyntaxError, UnicodeDecodeError):
      continue
    for node in ast.walk(tree):
      if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
        lines.extend(line.strip() for line in (ast.get_docstring(node) or "").splitlines() if line.strip())
  return lines


@functools.cache
def assigned_code_points():
  return [cp for cp in range(0x110000) if unicodedata.category(chr(cp)) not in ("Cn", "Cs")]


def fuzz_strings(count=2000, seed=0):
  """Seeded random strings: words, spaces, separators and runs of random assigned code points."""
  rng = random.Random(seed)
  assigned = assigned_code_points()
  pieces = ["the", "Dog", "CAFÉ", "ß", " ", "\u2028", "\u00a0", "中", ".", "Σ", "\u200b", "\x85"]
  strings = []
  for _ in range(count):
    parts = []
    for _ in range(rng.randint(1, 12)):
      if rng.random() < 0.3:
        parts.append("".join(chr(rng.choice(assigned)) for _ in range(rng.randint(1, 6))))
      else:
        parts.append(rng.choice(pieces))
    strings.append("".join(parts))
  return strings


def identical_fraction(vocab_path, lower_case, texts):
  """The fraction of `texts` (str or bytes) both tokenizers map to the same ids, and those they do not."""
  reference = tokenization.FullTokenizer(vocab_path, do_lower_case=lower_case)
  encoder = TextEncoder(vocab_path, lower_case=lower_case)
  ours = []
  for start in range(0, len(texts), 2048):
    ours.extend(encoder.tokenize(tf.constant(texts[start:start + 2048], tf.string)).to_list())
  different = [(text, mine) for text, mine in zip(texts, ours, strict=True)
               if mine != reference.convert_tokens_to_ids(reference.tokenize(text))]
  return 1 - len(different) / len(texts), different


def vocab_with_edge_words(tmp_path, lower_case):
  """Special tokens, the reference's words of the edge cases, and their characters as pieces."""
  basic = tokenization.BasicTokenizer(do_lower_case=lower_case)
  words = sorted({word for text in EDGE_CASES + fuzz_strings(200) for word in basic.tokenize(text)})
  tokens = list(SPECIAL_TOKENS)
  for word in words:
    if len(word.encode()) <= 256:   # FastWordpiece's limit on a token
      tokens.append(word)
    tokens.extend(("##" if index else "") + char for index, char in enumerate(word[:3]))
  tokens = list(dict.fromkeys(token for token in tokens if token.strip() == token and token))
  path = str(tmp_path / f"vocab-{lower_case}.txt")
  write_vocab(tokens, path)
  return path


@pytest.mark.parametrize("lower_case", [True, False])
def test_unicode_edge_cases_match_the_reference(tmp_path, lower_case):
  path = vocab_with_edge_words(tmp_path, lower_case)
  fraction, different = identical_fraction(path, lower_case, EDGE_CASES + INVALID_UTF8)
  assert different == [], different


@pytest.mark.parametrize("lower_case", [True, False])
def test_fuzz_matches_the_reference(tmp_path, lower_case):
  path = vocab_with_edge_words(tmp_path, lower_case)
  fraction, different = identical_fraction(path, lower_case, fuzz_strings())
  assert fraction >= 0.999, different[:5]


@pytest.mark.parametrize("lower_case", [True, False])
def test_words_match_the_reference_basic_tokenizer(lower_case):
  """The words before WordPiece; they differ only for characters newer than TensorFlow's Unicode tables."""
  basic = tokenization.BasicTokenizer(do_lower_case=lower_case)
  texts = EDGE_CASES + fuzz_strings()
  ours = normalize.split_words(tf.constant(texts), lower_case).to_list()
  different = [text for text, words in zip(texts, ours, strict=True)
               if [word.decode() for word in words] != basic.tokenize(text)]
  assert not set(different) & set(EDGE_CASES)
  assert len(different) / len(texts) < 0.005, [ascii(text) for text in different[:5]]


@pytest.mark.slow
@pytest.mark.parametrize("lower_case", [True, False])
def test_stdlib_prose_matches_the_reference(prose_vocab, lower_case):
  lines = stdlib_prose()
  assert len(lines) > 5000
  # The vocabulary is learned from a quarter of the lines: the rest also meets words it splits or lacks.
  path = prose_vocab(lower_case)
  fraction, different = identical_fraction(path, lower_case, lines)
  print(f"lower_case={lower_case}: {fraction:.5f} of {len(lines)} lines identical")
  assert fraction >= 0.999, different[:5]


@pytest.mark.parametrize("lower_case", fast_or_slow([True, False], (False,)))
def test_offsets_give_the_ids_of_tokenize_and_the_words_they_come_from(tmp_path, lower_case):
  """`tokenize_with_offsets`: the same ids as `tokenize`; each token's byte range holds its word.

  The independent check of the ranges: the reference's `BasicTokenizer` applied to the
  text each token points at gives back one word, the one whose pieces the token is.
  """
  path = vocab_with_edge_words(tmp_path, lower_case)
  encoder = TextEncoder(path, lower_case=lower_case)
  basic = tokenization.BasicTokenizer(do_lower_case=lower_case)
  texts = EDGE_CASES + fuzz_strings(300) + stdlib_prose()[:300]
  ids, starts, ends = encoder.tokenize_with_offsets(tf.constant(texts))
  assert ids.to_list() == encoder.tokenize(tf.constant(texts)).to_list()
  words = normalize.split_words(tf.constant(texts), lower_case).to_list()
  checked = 0
  for text, row_words, row_ids, row_starts, row_ends in zip(texts, words, ids.to_list(), starts.to_list(),
                                                            ends.to_list(), strict=True):
    pieces = encoder.word_ids(tf.ragged.constant([row_ids], tf.int32)).to_list()[0] if row_ids else []
    raw = text.encode()
    for index, word in enumerate(pieces):
      start, end = row_starts[index], row_ends[index]
      assert 0 <= start < end <= len(raw)
      span = raw[start:end].decode("utf-8")
      if basic.tokenize(span) == [row_words[word].decode()]:
        checked += 1
      else:   # the one known difference: characters newer than TensorFlow's Unicode tables
        assert text not in EDGE_CASES, (text, span, row_words[word])
  assert checked >= 0.995 * sum(len(row) for row in ids.to_list())


# (lowercase, strip_accents, split_on_cjk, clean_text) of transformers' BERT and Funnel tokenizers.
TRANSFORMERS_SETTINGS = [(True, None, True, True), (False, None, True, True), (False, True, True, True),
                         (True, False, True, True), (True, None, False, True), (True, None, True, False)]


def transformers_words(texts, lowercase, strip_accents, split_on_cjk, clean_text):
  """The words of `texts` by transformers' normaliser and pre-tokenizer (`tokenizers`)."""
  from tokenizers import normalizers
  from tokenizers import pre_tokenizers
  normalizer = normalizers.BertNormalizer(lowercase=lowercase, strip_accents=strip_accents,
                                          handle_chinese_chars=split_on_cjk, clean_text=clean_text)
  split = pre_tokenizers.BertPreTokenizer()
  return [[word for word, _ in split.pre_tokenize_str(normalizer.normalize_str(text))] for text in texts]


@pytest.mark.parametrize("settings", TRANSFORMERS_SETTINGS)
def test_transformers_words_match_transformers(settings):
  """Every edge case exactly (but NUL kept by `clean_text=False`, which the splitter stops at), and
  nearly every fuzz string: the rest hold characters newer than TensorFlow's case tables."""
  texts = EDGE_CASES + fuzz_strings()
  ours = normalize.transformers_words(tf.constant(texts), *settings).to_list()
  theirs = transformers_words(texts, *settings)
  different = [text for text, words, want in zip(texts, ours, theirs, strict=True)
               if [word.decode() for word in words] != want]
  assert not [text for text in different if text in EDGE_CASES and (settings[3] or "\x00" not in text)]
  assert len(different) / len(texts) < 0.005, [ascii(text) for text in different[:5]]


@pytest.mark.slow
def test_transformers_words_match_transformers_on_every_code_point():
  """Each code point between two letters: cased, no difference; uncased, only the capital letters
  (of scripts encoded since Unicode 14) that transformers lower-cases and `tf.strings.lower` does not."""
  texts = [f"x{chr(cp)}y" for cp in range(0x110000) if not 0xD800 <= cp < 0xE000]
  for lowercase in (False, True):
    different = []
    for start in range(0, len(texts), 100_000):   # a batch's words at a time: a bounded memory peak
      batch = texts[start:start + 100_000]
      ours = normalize.transformers_words(tf.constant(batch), lowercase).to_list()
      theirs = transformers_words(batch, lowercase, None, True, True)
      different += [text[1] for text, words, want in zip(batch, ours, theirs, strict=True)
                    if [word.decode() for word in words] != want]
    if not lowercase:
      assert not different, [hex(ord(char)) for char in different[:10]]
      continue
    unlowered = tf.strings.lower(tf.constant(different), encoding="utf-8").numpy()
    assert all(char.encode() == lowered for char, lowered in zip(different, unlowered, strict=True))
    assert len(different) < 120, [hex(ord(char)) for char in different[:10]]

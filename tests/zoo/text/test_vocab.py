"""Vocabulary building on a corpus written to a temporary folder, and the build-vocab CLI."""

import doctest
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from zoo.text import vocab as vocab_lib
from zoo.text.__main__ import main
from zoo.text.tokenizer import TextEncoder
from zoo.text.vocab import SPECIAL_TOKENS
from zoo.text.vocab import build_vocab
from zoo.text.vocab import corpus_files
from zoo.text.vocab import load_vocab
from zoo.text.vocab import write_vocab

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "A lazy dog sleeps; the quick fox runs, jumping and running.",
    "Foxes and dogs: running, jumping, sleeping!",
    "Über café naïve résumé — the dog's toy.",
]


@pytest.fixture
def corpus(tmp_path):
  """Two files of 50 lines each (sentences repeated so that common words pass the count threshold)."""
  folder = tmp_path / "corpus"
  folder.mkdir()
  for index in range(2):
    lines = [SENTENCES[(index + line) % len(SENTENCES)] for line in range(50)]
    (folder / f"part-{index}.txt").write_text("\n".join(lines) + "\n\n", encoding="utf-8")
  return folder


def test_docstring_examples_run():
  result = doctest.testmod(vocab_lib, extraglobs={"tf": tf, "np": np},
                           optionflags=doctest.NORMALIZE_WHITESPACE)
  assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("lower_case", [True, False])
def test_built_vocab_covers_the_corpus(corpus, lower_case):
  messages = []
  vocab = build_vocab(corpus_files([str(corpus / "*.txt")]), 200, lower_case=lower_case,
                      progress=messages.append)
  assert vocab[:5] == list(SPECIAL_TOKENS)
  assert len(vocab) == len(set(vocab)) and len(vocab) <= 200
  assert {"the", "dog", "fox", "##s"} <= set(vocab)
  assert any("2 file(s)" in message for message in messages)
  has_upper = any(token != token.lower() for token in vocab[len(SPECIAL_TOKENS):])
  assert has_upper != lower_case
  if lower_case:
    assert "cafe" in vocab or {"c", "##a", "##f", "##e"} <= set(vocab)   # accents stripped
    assert not any("é" in token for token in vocab)
  # Every character of the corpus is in the vocabulary: the corpus encodes without [UNK].
  encoder = TextEncoder(vocab, seq_length=64, lower_case=lower_case)
  tokens = encoder.tokenize(tf.constant(SENTENCES)).flat_values.numpy()
  assert tokens.size > 40 and encoder.unk_id not in tokens


def test_write_and_load_round_trip(tmp_path):
  vocab = list(SPECIAL_TOKENS) + ["the", "##s", "中", "é"]
  write_vocab(vocab, str(tmp_path / "sub" / "vocab.txt"))
  assert (tmp_path / "sub" / "vocab.txt").read_text(encoding="utf-8") == "\n".join(vocab) + "\n"
  assert load_vocab(str(tmp_path / "sub" / "vocab.txt")) == vocab
  (tmp_path / "bad.txt").write_text("[PAD]\n\n[UNK]\n", encoding="utf-8")
  with pytest.raises(ValueError, match="bad.txt, line 2: empty token"):
    load_vocab(str(tmp_path / "bad.txt"))
  (tmp_path / "latin1.txt").write_bytes("[PAD]\r\nthe\ncaf\u00e9\n".encode("latin-1"))
  with pytest.raises(ValueError, match="latin1.txt, line 3: not UTF-8"):
    load_vocab(str(tmp_path / "latin1.txt"))
  with pytest.raises(FileNotFoundError, match="vocabulary file .*missing.txt does not exist"):
    load_vocab(str(tmp_path / "missing.txt"))


def test_errors_name_the_problem(tmp_path):
  with pytest.raises(FileNotFoundError, match="no corpus files match '.*nothing-\\*.txt'"):
    corpus_files([str(tmp_path / "nothing-*.txt")])
  (tmp_path / "moved.txt").symlink_to(tmp_path / "elsewhere.txt")
  with pytest.raises(FileNotFoundError, match=r"moved.txt: a symbolic link to .*elsewhere.txt, which does"):
    corpus_files([str(tmp_path / "*.txt")])
  (tmp_path / "moved.txt").unlink()
  (tmp_path / "empty.txt").write_text("\n  \n\n", encoding="utf-8")
  with pytest.raises(ValueError, match="the corpus holds no words.*empty.txt"):
    build_vocab([str(tmp_path / "empty.txt")], 100)
  with pytest.raises(ValueError, match="vocab_size must be larger than the 5 reserved tokens"):
    build_vocab([str(tmp_path / "empty.txt")], 5)


def test_cli_builds_a_vocabulary_and_reports_progress(corpus, tmp_path, capsys):
  out = tmp_path / "out" / "vocab.txt"
  assert main(["build-vocab", str(corpus / "part-*.txt"), "--out", str(out), "--size", "150",
               "--lower-case"]) == 0
  vocab = load_vocab(str(out))
  assert vocab[:5] == list(SPECIAL_TOKENS) and len(vocab) <= 150 and "the" in vocab
  stderr = capsys.readouterr().err
  assert "2 file(s)" in stderr and f"wrote {len(vocab)} tokens to {out}" in stderr


def test_cli_errors_and_help(tmp_path, capsys):
  assert main(["build-vocab", str(tmp_path / "missing-*.txt"), "--out", str(tmp_path / "v.txt"),
               "--size", "100"]) == 2
  assert "no corpus files match" in capsys.readouterr().err and not (tmp_path / "v.txt").exists()
  (tmp_path / "empty.txt").write_text("", encoding="utf-8")
  assert main(["build-vocab", str(tmp_path / "empty.txt"), "--out", str(tmp_path / "v.txt"),
               "--size", "100"]) == 2
  assert "no words" in capsys.readouterr().err
  with pytest.raises(SystemExit) as exit_info:
    main(["build-vocab", "--help"])
  assert exit_info.value.code == 0
  help_text = capsys.readouterr().out
  assert "CORPUS_GLOB" in help_text and "--lower-case" in help_text and "--size" in help_text
  with pytest.raises(SystemExit) as exit_info:
    main(["build-vocab", "corpus.txt", "--out", "v.txt"])   # --size missing
  assert exit_info.value.code == 2
  assert "--size" in capsys.readouterr().err


@pytest.mark.slow
def test_python_dash_m_entry_point(corpus, tmp_path):
  out = tmp_path / "vocab.txt"
  env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
  result = subprocess.run([sys.executable, "-m", "zoo.text", "build-vocab", str(corpus / "*.txt"),
                           "--out", str(out), "--size", "120"],
                          capture_output=True, text=True, timeout=120, check=False, env=env, cwd=tmp_path)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout == "" and "wrote" in result.stderr
  assert load_vocab(str(out))[:5] == list(SPECIAL_TOKENS)


# Characters that Python, Unicode or BERT treat as whitespace or line breaks, between words.
SEPARATORS = ["\u2028", "\u2029", "\x85", "\u00a0", "\u3000", "\u1680", "\u2009", "\u202f", "\x1c", "\x1f",
              "\x0b", "\x0c", "\r", "\t", "\u200b", "\ufeff", "\u180e", "\x00"]


@pytest.mark.parametrize("lower_case", [True, False])
def test_vocabularies_survive_any_unicode(tmp_path, lower_case):
  """Every token written loads back unchanged, here and in the reference loader; both tokenizers agree."""
  from official.nlp.tools import tokenization

  lines = [f"Alpha{separator}Beta{separator}ΣΑΣ{separator}中文 naïve{separator}"
           for separator in SEPARATORS]
  lines += ["line one\u2028line two\u2029line three", "tab\there new\x85line", "emoji😀 ﬁ Ｆｕｌｌ"]
  corpus = tmp_path / "corpus.txt"
  # newline="" keeps \r and \x85 inside a line; the file is split on "\n" only.
  with open(corpus, "w", encoding="utf-8", newline="") as file:
    file.write("".join(line.replace("\n", " ") + "\n" for line in lines * 12))
  out = tmp_path / "vocab.txt"
  assert main(["build-vocab", str(corpus), "--out", str(out), "--size", "300",
               "--lower-case" if lower_case else "--no-lower-case"]) == 0
  vocab = load_vocab(str(out))
  assert list(tokenization.load_vocab(str(out))) == vocab   # the reference strips each line: nothing to strip
  assert all(token == token.strip() and token for token in vocab)
  assert not any(separator in token for token in vocab for separator in SEPARATORS if separator != "\x00")
  words = {token for token in vocab if not token.startswith("##")}
  assert ({"alpha", "beta", "line", "one", "two"} if lower_case else {"Alpha", "Beta", "line"}) <= words
  reference = tokenization.FullTokenizer(str(out), do_lower_case=lower_case)
  encoder = TextEncoder(str(out), lower_case=lower_case)
  ours = encoder.tokenize(tf.constant(lines)).to_list()
  assert ours == [reference.convert_tokens_to_ids(reference.tokenize(line)) for line in lines]
  assert encoder.unk_id not in {token for row in ours for token in row}


@pytest.mark.parametrize("token, ok", [
    ("the", True), ("##s", True), ("a b", True), ("", False), (" ", False), ("a\u2028", False),
    ("\x85", False), ("\u3000x", False), ("a\nb", False), ("a\rb", False), ("##\u00a0", False)])
def test_write_vocab_refuses_tokens_that_do_not_read_back(tmp_path, token, ok):
  assert vocab_lib.storable(token) == ok
  if ok:
    write_vocab(list(SPECIAL_TOKENS) + [token], str(tmp_path / "v.txt"))
    assert load_vocab(str(tmp_path / "v.txt"))[-1] == token
  else:
    with pytest.raises(ValueError, match="cannot be stored one per line"):
      write_vocab(list(SPECIAL_TOKENS) + [token], str(tmp_path / "v.txt"))

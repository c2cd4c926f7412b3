"""WordPiece vocabularies: load, write, and learn one from a text corpus.

A vocabulary is a list of tokens; a token's id is its index. Suffix pieces carry the
`##` prefix (BERT's convention). Files hold one token per line, UTF-8.

`build_vocab` learns a vocabulary with tensorflow-text's WordPiece learner
(`tensorflow_text.tools.wordpiece_vocab.wordpiece_tokenizer_learner_lib`): the corpus
is split into words exactly as `TextEncoder` splits it (`zoo.text.normalize.split_words`,
BERT's `BasicTokenizer`: whitespace, punctuation, CJK characters; optionally
lower-cased with accents stripped), then WordPiece tokens are learned from the word
counts. The special tokens `SPECIAL_TOKENS` come first, so `[PAD]` is id 0.

Every token written is one that `load_vocab` (and the reference BERT `load_vocab`,
which strips each line) reads back unchanged: words never hold whitespace, and a
learned token that would not survive a file round trip is dropped.

Example:

>>> import os, shutil, tempfile
>>> folder = tempfile.mkdtemp()
>>> with open(os.path.join(folder, "corpus.txt"), "w") as corpus:
...   _ = corpus.write("the cat sat on the mat\\nthe dog sat on the log\\n" * 20)
>>> vocab = build_vocab([os.path.join(folder, "corpus.txt")], vocab_size=60)
>>> vocab[:5]
['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']
>>> "the" in vocab and "##t" in vocab
True
>>> shutil.rmtree(folder)
"""

import collections
import sys
import time
from collections.abc import Callable
from collections.abc import Sequence

import tensorflow as tf

from zoo.atomic_files import write_atomically

# BERT's special tokens, written first by `build_vocab`; `TextEncoder`'s default names.
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# What each of them is for, in the same order: the keys of `TextEncoder(special_tokens=...)`.
SPECIAL_ROLES = ("pad", "unk", "cls", "sep", "mask")
# Lines read per step while counting words.
_BATCH_LINES = 1024


def storable(token: str) -> bool:
  """True if `token` survives a vocabulary file: not blank, no line break, no surrounding whitespace."""
  return bool(token.strip()) and token == token.strip() and "\n" not in token and "\r" not in token


def load_vocab(path: str) -> list[str]:
  """Reads a vocabulary file (one token per line, UTF-8; `gs://` paths work).

  Raises:
    FileNotFoundError: no such file.
    ValueError: an empty token, naming its line; bytes that are not UTF-8.
  """
  if not tf.io.gfile.exists(path):
    raise FileNotFoundError(f"vocabulary file {path} does not exist")
  tokens = []
  with tf.io.gfile.GFile(path, "rb") as file:
    for line_number, line in enumerate(file, start=1):
      try:
        tokens.append(line.decode("utf-8").rstrip("\r\n"))
      except UnicodeDecodeError as error:
        raise ValueError(f"{path}, line {line_number}: not UTF-8 ({error.reason}); a vocabulary file holds "
                         "one UTF-8 token per line") from None
  for line_number, token in enumerate(tokens, start=1):
    if not token.strip():
      raise ValueError(f"{path}, line {line_number}: empty token; a vocabulary file holds one token per line")
  return tokens


def write_vocab(vocab: Sequence[str], path: str) -> None:
  """Writes `vocab` one token per line (UTF-8) at once (`zoo.atomic_files.write_atomically`), creating
  the parent folder if needed.

  Raises:
    ValueError: a token would not read back as written (see `storable`).
  """
  bad = [token for token in vocab if not storable(token)]
  if bad:
    raise ValueError(f"tokens {bad[:10]!r} cannot be stored one per line (blank, a line break or "
                     "surrounding whitespace)")
  write_atomically(path, "".join(f"{token}\n" for token in vocab))


def corpus_files(patterns: str | Sequence[str]) -> list[str]:
  """Expands glob patterns (local or `gs://`) into a sorted list of files, without duplicates.

  Raises:
    FileNotFoundError: when a pattern matches nothing, or a match is a symbolic link whose target does
      not exist; the message names the pattern or the link.
  """
  import os
  if isinstance(patterns, str):
    patterns = [patterns]
  files = []
  for pattern in patterns:
    matches = [path for path in tf.io.gfile.glob(pattern) if not tf.io.gfile.isdir(path)]
    if not matches:
      raise FileNotFoundError(f"no corpus files match {pattern!r}")
    for path in matches:
      if "://" not in path and os.path.islink(path) and not os.path.exists(path):
        raise FileNotFoundError(f"{path}: a symbolic link to {os.readlink(path)}, which does not exist")
    files.extend(matches)
  return sorted(set(files))


def build_vocab(
    files: Sequence[str],
    vocab_size: int,
    *,
    lower_case: bool = True,
    reserved_tokens: Sequence[str] = SPECIAL_TOKENS,
    progress: Callable[[str], None] | None = None,
) -> list[str]:
  """Learns a WordPiece vocabulary of at most about `vocab_size` tokens from text files.

  Each line of each file is a text. Words are split as BERT's `BasicTokenizer` splits
  them, with `lower_case` as in `TextEncoder` (use the same value for both), and the
  vocabulary is learned by `bert_vocab_from_dataset`. Every character of the corpus
  (as a word start and as a `##` suffix) is in the vocabulary, so the corpus itself
  encodes without `[UNK]`; on a tiny corpus those characters alone can exceed
  `vocab_size`.

  Args:
    files: text files (see `corpus_files` to expand globs).
    vocab_size: the target size, reserved tokens included.
    lower_case: lower-case, NFD-normalise and strip accents before counting words.
    reserved_tokens: tokens placed first, in this order.
    progress: called with one-line progress messages (the CLI prints them to stderr).

  Returns:
    The vocabulary, reserved tokens first.

  Raises:
    ValueError: when `vocab_size` is not larger than the reserved tokens, or the corpus
      holds no words.
  """
  if vocab_size <= len(reserved_tokens):
    raise ValueError(f"vocab_size must be larger than the {len(reserved_tokens)} reserved tokens, "
                     f"got {vocab_size}")
  if not files:
    raise ValueError("build_vocab needs at least one corpus file")
  report = progress or (lambda message: None)
  started = time.monotonic()
  total_bytes = sum(tf.io.gfile.stat(path).length for path in files)
  report(f"corpus: {len(files)} file(s), {total_bytes:,} bytes")
  lines = tf.data.TextLineDataset(list(files))
  has_words = lines.filter(lambda line: tf.strings.length(tf.strings.strip(line)) > 0).take(1)
  if not any(True for _ in has_words):
    raise ValueError(f"the corpus holds no words: every line of {', '.join(files)} is empty")
  return learn_vocab(lines, vocab_size, lower_case=lower_case, reserved_tokens=reserved_tokens,
                     progress=progress, started=started)


def learn_vocab(texts: tf.data.Dataset, vocab_size: int, *, lower_case: bool = True,
                reserved_tokens: Sequence[str] = SPECIAL_TOKENS,
                progress: Callable[[str], None] | None = None, started: float | None = None) -> list[str]:
  """Learns a WordPiece vocabulary from a dataset of tf.string scalars; see `build_vocab`."""
  from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

  from zoo.text.normalize import split_words

  if vocab_size <= len(reserved_tokens):
    raise ValueError(f"vocab_size must be larger than the {len(reserved_tokens)} reserved tokens, "
                     f"got {vocab_size}")
  report = progress or (lambda message: None)
  started = time.monotonic() if started is None else started
  report(f"counting words and learning up to {vocab_size} tokens (lower_case={lower_case})")
  words = texts.batch(_BATCH_LINES).map(lambda batch: split_words(batch, lower_case).flat_values)
  counts: collections.Counter[bytes] = collections.Counter()
  for batch in words.as_numpy_iterator():
    counts.update(batch)
  if not counts:
    raise ValueError("the corpus holds no words")
  word_counts = {word.decode("utf-8"): count for word, count in counts.items()}
  vocab = learner.learn(word_counts, vocab_size, list(reserved_tokens))
  dropped = [token for token in vocab if not storable(token)]
  if dropped:
    report(f"dropped {len(dropped)} tokens that a vocabulary file cannot hold: {dropped[:10]!r}")
    vocab = [token for token in vocab if storable(token)]
  report(f"learned {len(vocab)} tokens in {time.monotonic() - started:.1f} s")
  if len(vocab) > vocab_size:
    report(f"note: {len(vocab)} tokens exceed vocab_size={vocab_size}: the corpus has that many "
           "distinct characters (each is kept as a start piece and a ## suffix)")
  return vocab


def print_progress(message: str) -> None:
  """Progress reporter for `build_vocab` that writes to stderr."""
  print(message, file=sys.stderr, flush=True)

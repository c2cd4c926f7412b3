"""TextEncoder: hand-written ids for a tiny vocabulary, robustness, tf.function / tf.data, and a
SavedModel loaded in a fresh process. `test_reference.py` compares it with BERT's reference tokenizer."""

import doctest
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from zoo.text import tokenizer
from zoo.text.tokenizer import TextEncoder

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",   # 0-4
         "the", "dog", "##s", "run", "##ning",            # 5-9
         "cafe", ".", ",", "!", "a",                      # 10-14
         "中", "文", "un", "##believ", "##able"]          # 15-19
PAD, UNK, CLS, SEP, MASK = range(5)
THE, DOG, S, RUN, NING, CAFE, DOT, COMMA, BANG, A, ZHONG, WEN, UN, BELIEV, ABLE = range(5, 20)


@pytest.fixture(scope="module")
def encoder():
  return TextEncoder(VOCAB, seq_length=8)


def ids(ragged):
  return ragged.to_list()


def test_docstring_examples_run():
  result = doctest.testmod(tokenizer, extraglobs={"tf": tf, "np": np},
                           optionflags=doctest.NORMALIZE_WHITESPACE)
  assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("raw, expected", [
    ("The dogs run.", [THE, DOG, S, RUN, DOT]),
    ("Café RUNNING", [CAFE, RUN, NING]),                      # lower-cased, accent stripped
    ("CAFÉ", [CAFE]),                                         # É: lower-cased, then NFD
    ("dog,the!", [DOG, COMMA, THE, BANG]),                    # punctuation splits words
    ("中文a", [ZHONG, WEN, A]),                               # CJK characters are words
    ("unbelievable!", [UN, BELIEV, ABLE, BANG]),
    ("xyz dog", [UNK, DOG]),                                  # no WordPiece split: [UNK]
    ("un" + "able" * 99 + "ss", [UN] + [ABLE] * 99 + [S, S]),  # 400 characters: split
    ("un" + "able" * 99 + "ss!", [UN] + [ABLE] * 99 + [S, S, BANG]),
    ("un" + "able" * 99 + "sss the", [UNK, THE]),             # 401 characters: one [UNK]
    ("dog\x00s\trun\u200b", [DOG, S, RUN]),                  # control/format chars are removed
    ("the\u2028dog\u00a0run\u3000a", [THE, DOG, RUN, A]),     # whitespace-like characters split
    ("the\x85dog\x0bs", [UNK]),                               # ... but not the control ones: "thedogs"
    ("ＴＨＥ ﬁ", [UNK, UNK]),                                   # no case folding, no NFKC
    ("", []),
    ("  \n ", []),
])
def test_tokenize_matches_hand_written_ids(encoder, raw, expected):
  assert ids(encoder.tokenize(tf.constant([raw]))) == [expected]


def test_invalid_utf8_is_replaced_not_fatal(encoder):
  # Dropped, as the reference's `bytes.decode("utf-8", "ignore")` drops them.
  tokens = encoder.tokenize(tf.constant([b"dog \xff\xfe run", b"\xc3", b"the\x80dog", "caf\ufffd".encode()]))
  assert ids(tokens) == [[DOG, RUN], [], [UNK], [UNK]]
  features = encoder.encode(tf.constant([b"\xff"]), tf.constant([b"dog \xe2\x82"]))
  assert features["input_word_ids"].numpy().tolist() == [[CLS, SEP, DOG, SEP, PAD, PAD, PAD, PAD]]


def test_cased_encoder_does_not_lower_case():
  cased = TextEncoder(VOCAB, seq_length=8, lower_case=False)
  assert ids(cased.tokenize(tf.constant(["The the Café cafe\u0301"]))) == [[UNK, THE, UNK, UNK]]


def test_max_chars_per_word_counts_characters():
  short = TextEncoder(VOCAB, seq_length=8, max_chars_per_word=6)
  assert ids(short.tokenize(tf.constant(["dogsdogs dogs café中"]))) == [[UNK, DOG, S, CAFE, ZHONG]]
  assert ids(short.tokenize(tf.constant(["running runs"]))) == [[UNK, RUN, S]]


def test_word_ids_group_pieces_of_a_word(encoder):
  tokens = encoder.tokenize(tf.constant(["unbelievable dogs, running.", "", "a"]))
  assert ids(tokens) == [[UN, BELIEV, ABLE, DOG, S, COMMA, RUN, NING, DOT], [], [A]]
  assert ids(encoder.word_ids(tokens)) == [[0, 0, 0, 1, 1, 2, 3, 3, 4], [], [0]]
  assert encoder.word_ids(tokens).dtype == tf.int32


def test_encode_single_segment(encoder):
  features = encoder.encode(tf.constant(["The dogs run.", "", "the " * 20]))
  np.testing.assert_array_equal(features["input_word_ids"], [
      [CLS, THE, DOG, S, RUN, DOT, SEP, PAD],
      [CLS, SEP, PAD, PAD, PAD, PAD, PAD, PAD],
      [CLS, THE, THE, THE, THE, THE, THE, SEP]])
  np.testing.assert_array_equal(features["input_mask"], [[1] * 7 + [0], [1] * 2 + [0] * 6, [1] * 8])
  np.testing.assert_array_equal(features["input_type_ids"], np.zeros([3, 8]))
  for value in features.values():
    assert value.dtype == tf.int32 and value.shape == (3, 8)


def test_encode_pairs_trims_longest_first(encoder):
  # Room for 5 tokens. 4 + 2 tokens -> 3 + 2; 1 + 5 -> 1 + 4; 0 + 3 -> 0 + 3 (zoo.text.packing's tests
  # compare every length with transformers').
  features = encoder.encode(tf.constant(["the dogs run", "a", ""]),
                            tf.constant(["a dog", "the dogs run the", "the the the"]))
  np.testing.assert_array_equal(features["input_word_ids"], [
      [CLS, THE, DOG, S, SEP, A, DOG, SEP],
      [CLS, A, SEP, THE, DOG, S, RUN, SEP],
      [CLS, SEP, THE, THE, THE, SEP, PAD, PAD]])
  np.testing.assert_array_equal(features["input_type_ids"], [
      [0, 0, 0, 0, 0, 1, 1, 1],
      [0, 0, 0, 1, 1, 1, 1, 1],
      [0, 0, 1, 1, 1, 1, 0, 0]])
  np.testing.assert_array_equal(features["input_mask"], [[1] * 8, [1] * 8, [1] * 6 + [0] * 2])


def test_waterfall_truncator_fills_the_first_segment_first():
  waterfall = TextEncoder(VOCAB, seq_length=8, truncator="waterfall")
  features = waterfall.encode(tf.constant(["the dogs run"]), tf.constant(["a dog"]))
  assert features["input_word_ids"].numpy().tolist() == [[CLS, THE, DOG, S, RUN, SEP, A, SEP]]


def test_long_empty_single_and_zero_batches(encoder):
  long_text = "the dog " * 1250   # 10,000 characters
  assert len(long_text) == 10_000
  features = encoder.encode(tf.constant([long_text, "x" * 10_000]))
  np.testing.assert_array_equal(features["input_word_ids"], [
      [CLS, THE, DOG, THE, DOG, THE, DOG, SEP], [CLS, UNK, SEP, PAD, PAD, PAD, PAD, PAD]])
  assert encoder.encode(tf.constant(["dog"]))["input_word_ids"].numpy().tolist() == [
      [CLS, DOG, SEP, PAD, PAD, PAD, PAD, PAD]]
  empty = encoder.encode(tf.constant([], tf.string), tf.constant([], tf.string))
  assert all(value.shape == (0, 8) and value.dtype == tf.int32 for value in empty.values())
  assert encoder.tokenize(tf.constant([], tf.string)).shape[0] == 0


def test_tf_function_with_a_signature_and_tf_data(encoder):
  serve = tf.function(encoder.encode, input_signature=[tf.TensorSpec([None], tf.string)])
  outputs = serve.get_concrete_function().structured_outputs
  assert {key: value.shape.as_list() for key, value in outputs.items()} == {
      "input_word_ids": [None, 8], "input_mask": [None, 8], "input_type_ids": [None, 8]}
  texts = ["The dogs run.", "", "\xff", "中文"]
  eager = encoder.encode(tf.constant(texts))
  for key, value in serve(tf.constant(texts)).items():
    np.testing.assert_array_equal(value, eager[key])

  dataset = tf.data.Dataset.from_tensor_slices((texts, texts[::-1])).batch(2, drop_remainder=True)
  dataset = dataset.map(encoder.encode)
  assert dataset.element_spec["input_word_ids"].shape.as_list() == [2, 8]
  batches = list(dataset)
  pairs = encoder.encode(tf.constant(texts), tf.constant(texts[::-1]))
  for key in ("input_word_ids", "input_type_ids"):
    np.testing.assert_array_equal(np.concatenate([batch[key] for batch in batches]), pairs[key])


def test_vocabulary_file_and_special_ids(tmp_path):
  path = tmp_path / "vocab.txt"
  # [PAD] need not be 0: ids come from the file.
  reordered = ["the", "[UNK]", "[PAD]", "[SEP]", "[CLS]", "[MASK]", "dog"]
  path.write_text("".join(token + "\n" for token in reordered), encoding="utf-8")
  encoder = TextEncoder(str(path), seq_length=5)
  assert encoder.special_ids == {"[PAD]": 2, "[UNK]": 1, "[CLS]": 4, "[SEP]": 3, "[MASK]": 5}
  assert encoder.vocab == reordered and encoder.vocab_size == 7
  assert encoder.encode(tf.constant(["dog"]))["input_word_ids"].numpy().tolist() == [[4, 6, 3, 2, 2]]
  np.testing.assert_array_equal(TextEncoder(VOCAB).is_continuation, [t.startswith("##") for t in VOCAB])


def test_a_checkpoints_own_special_tokens_and_cls_type():
  """Funnel's tokenizer: `<cls>`-style names, [cls] token type 2; the settings rebuild the encoder."""
  vocab = ["<pad>", "<unk>", "<cls>", "<sep>", "<mask>", "<s>", "</s>", "the", "dog", "##s", "."]
  names = dict(pad="<pad>", unk="<unk>", cls="<cls>", sep="<sep>", mask="<mask>")
  encoder = TextEncoder(vocab, seq_length=9, special_tokens=names, cls_type_id=2, max_chars_per_word=100)
  features = encoder.encode(tf.constant(["The dogs."]), tf.constant(["zebra"]))
  assert features["input_word_ids"].numpy().tolist() == [[2, 7, 8, 9, 10, 3, 1, 3, 0]]
  assert features["input_type_ids"].numpy().tolist() == [[2, 0, 0, 0, 0, 0, 1, 1, 0]]
  assert encoder.special_ids == {"<pad>": 0, "<unk>": 1, "<cls>": 2, "<sep>": 3, "<mask>": 4}
  settings = encoder.settings()
  assert settings == dict(lower_case=True, truncator="longest_first", max_chars_per_word=100,
                          special_tokens=names, cls_type_id=2)
  again = TextEncoder(vocab, seq_length=9, **json.loads(json.dumps(settings)))
  assert again.encode(tf.constant(["The dogs."]))["input_type_ids"].numpy().tolist()[0][0] == 2
  with pytest.raises(ValueError, match=r"lacks the special tokens \['\[PAD\]'"):
    TextEncoder(vocab)
  with pytest.raises(ValueError, match="unknown role"):
    TextEncoder(vocab, special_tokens=dict(names, bos="<s>"))
  with pytest.raises(ValueError, match="five different tokens"):
    TextEncoder(vocab, special_tokens=dict(names, mask="<pad>"))


@pytest.mark.parametrize("kwargs, message", [
    (dict(vocab=["[PAD]", "[UNK]", "[CLS]", "the"]), r"\['\[SEP\]', '\[MASK\]'\]"),
    (dict(vocab=VOCAB + ["the"]), "repeats tokens \\['the'\\]"),
    (dict(vocab=VOCAB + [""]), r"empty or blank tokens at ids \[20\]"),
    (dict(vocab=VOCAB, seq_length=2), "seq_length must be at least 3"),
    (dict(vocab=VOCAB, truncator="longest"), "truncator must be one of"),
    (dict(vocab=VOCAB, max_chars_per_word=0), "max_chars_per_word must be positive"),
])
def test_errors_name_the_problem(kwargs, message):
  with pytest.raises(ValueError, match=message):
    TextEncoder(**kwargs)


def test_rank_other_than_one_is_refused(encoder):
  with pytest.raises(ValueError, match=r"shape \[B\]"):
    encoder.tokenize(tf.constant("the dog"))


_LOAD_AND_ENCODE = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # registers the tensorflow-text ops
    model = tf.saved_model.load(sys.argv[1])
    texts = tf.constant(json.loads(sys.argv[2]))
    single = model.encode(texts)
    pairs = model.signatures["encode_pairs"](text_a=texts, text_b=texts[::-1])
    print(json.dumps({"single": {k: v.numpy().tolist() for k, v in single.items()},
                      "pairs": {k: v.numpy().tolist() for k, v in pairs.items()}}))
""")


class _Export(tf.Module):
  def __init__(self, encoder):
    super().__init__()
    self.encoder = encoder

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def encode(self, texts):
    return self.encoder.encode(texts)

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text_a"),
                                tf.TensorSpec([None], tf.string, name="text_b")])
  def encode_pairs(self, text_a, text_b):
    return self.encoder.encode(text_a, text_b)


@pytest.mark.slow
def test_saved_model_loads_in_a_fresh_process_with_tensorflow_text_only(tmp_path, encoder):
  export = _Export(encoder)
  tf.saved_model.save(export, str(tmp_path / "model"), signatures={"encode_pairs": export.encode_pairs})
  assert not list((tmp_path / "model" / "assets").glob("*")), "the vocabulary must live in the graph"
  texts = ["The dogs run.", "", "unbelievable 中文!", "café " * 10]
  # A clean environment and working directory: the zoo package is not importable there.
  env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
  command = [sys.executable, "-c", _LOAD_AND_ENCODE, str(tmp_path / "model"), json.dumps(texts)]
  result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
                          env=env)
  assert result.returncode == 0, result.stderr[-3000:]
  loaded = json.loads(result.stdout.strip().splitlines()[-1])
  assert loaded["single"]["input_word_ids"] == [
      [CLS, THE, DOG, S, RUN, DOT, SEP, PAD],
      [CLS, SEP, PAD, PAD, PAD, PAD, PAD, PAD],
      [CLS, UN, BELIEV, ABLE, ZHONG, WEN, BANG, SEP],
      [CLS, CAFE, CAFE, CAFE, CAFE, CAFE, CAFE, SEP]]
  eager = encoder.encode(tf.constant(texts), tf.constant(texts[::-1]))
  for key, value in eager.items():
    assert loaded["pairs"][key] == value.numpy().tolist(), key

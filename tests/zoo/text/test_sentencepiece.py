"""`zoo.text.SentencePieceEncoder` against Hugging Face's AlbertTokenizer and the sentencepiece library.

The model is a unigram `spiece.model` trained on the standard library's docstrings with ALBERT's
special pieces and normalization (`sentencepiece_files`). References: transformers' AlbertTokenizer
built from that model's pieces and normalization map (the `tokenizers` library), and the
`sentencepiece` library itself on the text as ALBERT's original Python tokenizer prepares it.
"""

import unicodedata

import numpy as np
import pytest
import sentencepiece
import tensorflow as tf

from tests.zoo.text import sentencepiece_files
from zoo.text import SentencePieceEncoder
from zoo.text import TextEncoder
from zoo.text import text_encoder

HOSTILE = ["Ünïcödé wörds, 漢字 and CJK: 東京!", "A  B\tc\nd\r\ne", "``quoted'' text ''here``", "", "   \t ",
           "x\u00a0y\u3000z\u2028w", "ﬁne ½ ① ＡＢＣ", "9,000 and 1,234,567.", "İstanbul ΣΊΣΥΦΟΣ straße",
           "emoji 🙂 and a zero\u200bwidth", "Ça va? À bientôt, naïve café."]


@pytest.fixture(scope="module")
def model():
  return sentencepiece_files.train_model()


@pytest.fixture(scope="module")
def texts():
  documents = sentencepiece_files.prose("validation")
  return documents[:40] + HOSTILE


def _python_reference(model, text, lower_case=True, keep_accents=False):
  """ALBERT's original tokenizer (`preprocess_text`, then the SentencePiece model), in Python, on each
  word as Hugging Face's tokenizer hands them to the model. (On a whole long document at once,
  SentencePiece's float32 path scores can round to another segmentation of a word: one word in a
  22 KB docstring here.)"""
  processor = sentencepiece.SentencePieceProcessor(model_proto=model)
  text = " ".join(text.strip().split()).replace("``", '"').replace("''", '"')
  if not keep_accents:
    text = "".join(c for c in unicodedata.normalize("NFKD", text) if unicodedata.category(c) != "Mn")
  if lower_case:
    text = text.lower()
  return [piece for word in text.split(" ") for piece in processor.encode(word)]


# ALBERT's settings in `make test-fast`; cased and accented in the full suite.
@pytest.mark.parametrize("lower_case, keep_accents", [
    (True, False), pytest.param(False, False, marks=pytest.mark.slow),
    pytest.param(True, True, marks=pytest.mark.slow)])
def test_ids_equal_hugging_faces_albert_tokenizer_and_sentencepiece(model, texts, lower_case, keep_accents):
  encoder = SentencePieceEncoder(model, seq_length=8, lower_case=lower_case, keep_accents=keep_accents)
  ours = encoder.tokenize(tf.constant(texts)).to_list()
  hf = sentencepiece_files.hf_tokenizer(model, do_lower_case=lower_case, keep_accents=keep_accents)
  theirs = [hf(text, add_special_tokens=False)["input_ids"] for text in texts]
  differing = [(text[:60], a[:12], b[:12]) for text, a, b in zip(texts, ours, theirs, strict=True) if a != b]
  assert not differing, differing
  # The sentencepiece library on ALBERT's own Python preparation of the text.
  prose = texts[:40]
  python = [_python_reference(model, text, lower_case, keep_accents) for text in prose]
  assert ours[:40] == python
  assert sum(map(len, ours)) > 5000   # real prose, many pieces


def test_encode_packs_as_hugging_face_pads_and_truncates_single_texts_and_pairs(model, texts):
  # 22 positions for a pair's tokens: with an odd number, two long segments split it differently (BERT's
  # reference trimming, which TextEncoder follows, gives the first the extra token; `tokenizers` the
  # longer one).
  length = 25
  encoder = SentencePieceEncoder(model, seq_length=length)
  hf = sentencepiece_files.hf_tokenizer(model)
  # 600 characters each: far beyond the length, and short enough for `tokenizers`' pair truncation, whose
  # memory grows with the texts (whole docstrings of pairs take it 4 GB; 2,000 characters 0.8 GB).
  firsts, seconds = [text[:600] for text in texts[:20]], [text[:600] for text in texts[20:40]]
  for pair in (False, True):
    features = encoder.encode(tf.constant(firsts), tf.constant(seconds) if pair else None)
    expected = hf(firsts, seconds if pair else None, padding="max_length", truncation=True, max_length=length,
                  return_token_type_ids=True, return_tensors="np")
    np.testing.assert_array_equal(features["input_word_ids"].numpy(), expected["input_ids"])
    np.testing.assert_array_equal(features["input_mask"].numpy(), expected["attention_mask"])
    np.testing.assert_array_equal(features["input_type_ids"].numpy(), expected["token_type_ids"])
  assert (encoder.cls_id, encoder.sep_id, encoder.pad_id, encoder.mask_id, encoder.unk_id) == (2, 3, 0, 4, 1)


def test_words_start_at_pieces_with_the_word_marker(model):
  encoder = SentencePieceEncoder(model, seq_length=8)
  ids = encoder.tokenize(tf.constant(["The quick brownish foxes", ""]))
  pieces = [[encoder.vocab[i] for i in row] for row in ids.to_list()]
  words = encoder.word_ids(ids).to_list()
  expected = [np.cumsum([piece.startswith("▁") for piece in row]).tolist() for row in pieces]
  assert words == [[index - 1 for index in row] for row in expected]
  assert words[0][-1] == 3 and words[1] == []
  assert not encoder.is_continuation[encoder.cls_id]


def test_runs_in_tf_function_and_a_saved_model(model, tmp_path):
  encoder = SentencePieceEncoder(model, seq_length=16)
  module = tf.Module()
  module.encoder = encoder
  module.encode = tf.function(lambda text: encoder.encode(text),
                              input_signature=[tf.TensorSpec([None], tf.string)])
  tf.saved_model.save(module, str(tmp_path / "saved"))
  loaded = tf.saved_model.load(str(tmp_path / "saved"))
  texts = tf.constant(["Return the sum of the values.", "", "A\xe9 \xff invalid bytes".encode("latin-1")])
  for key, value in encoder.encode(texts).items():
    np.testing.assert_array_equal(loaded.encode(texts)[key].numpy(), value.numpy())


def test_bad_models_and_settings_are_refused_with_the_reason(model, tmp_path):
  with pytest.raises(ValueError, match="is not a SentencePiece model"):
    SentencePieceEncoder(b"not a model", seq_length=8)
  with pytest.raises(ValueError, match=r"lacks the special tokens \['<s>'\]"):
    SentencePieceEncoder(model, seq_length=8, special_tokens=dict(cls="<s>"))
  with pytest.raises(ValueError, match="no offsets"):
    SentencePieceEncoder(model, seq_length=8).tokenize_with_offsets(tf.constant(["a"]))
  path = tmp_path / "spiece.model"
  path.write_bytes(model)
  encoder = text_encoder(None, seq_length=8, sentencepiece_model=str(path), kind="sentencepiece",
                         lower_case=True)
  assert encoder.settings()["kind"] == "sentencepiece" and encoder.vocab_size == 400
  assert text_encoder(encoder.vocab, seq_length=8, sentencepiece_model=model,
                      **encoder.settings()).vocab == encoder.vocab
  with pytest.raises(ValueError, match=r"model \(spiece.model\) was not found"):
    text_encoder(encoder.vocab, seq_length=8, kind="sentencepiece")
  with pytest.raises(ValueError, match="is not the pieces of the SentencePiece model"):
    text_encoder(encoder.vocab[:-1] + ["other"], seq_length=8, sentencepiece_model=model,
                 kind="sentencepiece")
  with pytest.raises(ValueError, match="unknown tokenizer kind 'bpe'"):
    text_encoder(encoder.vocab, seq_length=8, kind="bpe")
  with pytest.raises(ValueError, match="WordPiece, but no vocabulary"):
    text_encoder(None, seq_length=8, sentencepiece_model=model)
  wordpiece = text_encoder(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"], seq_length=8)
  assert isinstance(wordpiece, TextEncoder)

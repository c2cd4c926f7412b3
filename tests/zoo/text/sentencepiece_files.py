"""SentencePiece tokenizer files as ALBERT's releases ship them, made from real prose for the tests.

`train_model` trains a unigram `spiece.model` on the standard library's docstrings with ALBERT's
special pieces (`<pad>` 0, `<unk>` 1, `[CLS]` 2, `[SEP]` 3, `[MASK]` 4) and its normalization
(`nmt_nfkc`), with the `sentencepiece` library. `save_hf_tokenizer` writes what Hugging Face's
`AlbertTokenizer.save_pretrained` writes for it (`tokenizer.json`, `tokenizer_config.json`),
built from the model's pieces, scores and precompiled normalization map; transformers cannot
convert a `spiece.model` itself in this stack (its protobuf module is too old for
sentencepiece's generated code), so the map is read from the model's protobuf fields.
"""

import io

import sentencepiece
import transformers

from tpu.data import pydocs

SPECIAL = ["[CLS]", "[SEP]", "[MASK]"]


def prose(split="train"):
  """The standard library's docstrings (`tpu.data.pydocs`), one document each."""
  return [text for _, text in pydocs.documents(split)]


def train_model(vocab_size=400, texts=None):
  """The serialized unigram SentencePiece model of `vocab_size` pieces."""
  model = io.BytesIO()
  sentencepiece.SentencePieceTrainer.train(
      sentence_iterator=iter(texts if texts is not None else prose()[:2000]), model_writer=model,
      vocab_size=vocab_size, model_type="unigram", pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
      control_symbols=SPECIAL, character_coverage=0.9995, normalization_rule_name="nmt_nfkc",
      minloglevel=2, num_threads=1)
  return model.getvalue()


def precompiled_charsmap(model):
  """`ModelProto.normalizer_spec.precompiled_charsmap`: the normalization `tokenizers`' `Precompiled`
  applies (read by the zoo's reader of the model's fields; the tokenizer built from it is checked
  against the SentencePiece op, which reads the model itself)."""
  from zoo.text.sentencepiece import describe_model
  return describe_model(model)["precompiled_charsmap"]


def hf_tokenizer(model, **options):
  """transformers' `AlbertTokenizer` of the model (`options`: `do_lower_case`, `keep_accents`)."""
  processor = sentencepiece.SentencePieceProcessor(model_proto=model)
  vocab = [(processor.id_to_piece(i), processor.get_score(i)) for i in range(processor.get_piece_size())]
  charsmap = list(precompiled_charsmap(model))
  return transformers.AlbertTokenizer(vocab=vocab, _spm_precompiled_charsmap=charsmap, **options)


def save_hf_tokenizer(model, directory, **options):
  """Writes `spiece.model` and the tokenizer files `save_pretrained` writes; returns the tokenizer as
  `AutoTokenizer` loads it back from them."""
  import os
  os.makedirs(directory, exist_ok=True)
  with open(os.path.join(directory, "spiece.model"), "wb") as file:
    file.write(model)
  hf_tokenizer(model, **options).save_pretrained(directory)
  return transformers.AutoTokenizer.from_pretrained(directory)

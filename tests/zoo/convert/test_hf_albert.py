"""zoo.convert hf-albert against Hugging Face's PyTorch ALBERT with random weights.

Each case saves a tiny random `AlbertModel` / `AlbertForMaskedLM` / `AlbertForPreTraining` the way
releases ship them: `save_pretrained` (safetensors), or `pytorch_model.bin` written with
`torch.save` as transformers before 5.0 wrote it, beside a SentencePiece `spiece.model` trained on
the standard library's docstrings and the tokenizer files of `AlbertTokenizer`. Nothing is
downloaded. The end-to-end case fine-tunes the converted directory with `tpu.train`, exports it
and compares the export's `encode` on raw text of every length with Hugging Face's tokenizer and
model.
"""

import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf
import torch
import transformers

from tests.zoo.text import sentencepiece_files
from tpu.config import TrainConfig
from zoo import presets
from zoo.convert import ConversionError
from zoo.convert.__main__ import main
from zoo.convert.albert import convert_hf_albert
from zoo.convert.formats.hf_albert import read
from zoo.convert.tokenizer_files import TokenizerFilesError
from zoo.model_dir import ModelDir
from zoo.text.sentencepiece import describe_model

LENGTH = 16
TOLERANCE = 1e-4
TINY = dict(embedding_size=16, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
            intermediate_size=64, max_position_embeddings=64, hidden_act="gelu_new", hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0)


@pytest.fixture(scope="module")
def spiece():
  return sentencepiece_files.train_model()


@pytest.fixture
def hf_albert(tmp_path, spiece):
  """Factory: `make(model_class, pickle=False, **config) -> (directory, eval-mode model, tokenizer)`."""
  def make(model_class=transformers.AlbertModel, pickle=False, seed=0, **overrides):
    config = transformers.AlbertConfig(**{**TINY, "vocab_size": 400, **overrides})
    torch.manual_seed(seed)
    model = model_class(config).eval()
    path = tmp_path / f"{model_class.__name__}{'_bin' if pickle else ''}"
    if pickle:   # the layout of releases before transformers 5: config.json and pytorch_model.bin
      os.makedirs(path)
      config.save_pretrained(path)
      torch.save(model.state_dict(), path / "pytorch_model.bin")
    else:
      model.save_pretrained(path, safe_serialization=True)
    tokenizer = sentencepiece_files.save_hf_tokenizer(spiece, str(path))
    return str(path), model, tokenizer
  return make


def _inputs(seed=0, vocab=400):
  """One row per real length 1 .. LENGTH (padded positions hold real ids: only the mask hides them)."""
  rng = np.random.default_rng(seed)
  lengths = np.arange(1, LENGTH + 1)
  mask = (np.arange(LENGTH)[None, :] < lengths[:, None]).astype(np.int32)
  types = np.zeros([LENGTH, LENGTH], np.int32)
  types[:, 7:] = 1
  return dict(input_word_ids=rng.integers(5, vocab, size=[LENGTH, LENGTH]).astype(np.int32), input_mask=mask,
              input_type_ids=types)


def _torch(inputs):
  return dict(input_ids=torch.from_numpy(inputs["input_word_ids"]).long(),
              attention_mask=torch.from_numpy(inputs["input_mask"]).long(),
              token_type_ids=torch.from_numpy(inputs["input_type_ids"]).long())


@pytest.mark.parametrize("pickle", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_albert_model_converts_to_a_shared_factorized_encoder_equal_to_hugging_face(hf_albert, pickle):
  path, model, _ = hf_albert(pickle=pickle)
  converted = convert_hf_albert(path, seq_length=LENGTH)
  encoder = converted.encoder
  config = encoder.get_config()
  assert (config["embedding_width"], config["hidden_size"], config["layer_sharing"]) == (16, 32, "all")
  assert config["activation"] == "gelu_approximate" and converted.has_pooler
  # One layer's weights for three layers, as ALBERT: the parameter count transformers gives.
  assert encoder.count_params() == sum(p.numel() for p in model.parameters())
  inputs = _inputs()
  outputs = encoder(inputs)
  with torch.no_grad():
    expected = model(**_torch(inputs))
  real = inputs["input_mask"] > 0
  sequence = np.abs(outputs["sequence_output"].numpy() - expected.last_hidden_state.numpy())[real].max()
  pooled = np.abs(outputs["pooled_output"].numpy() - expected.pooler_output.numpy()).max()
  print(f"ALBERT ({'pytorch_model.bin' if pickle else 'safetensors'}): sequence_output max |diff| "
        f"{sequence:.2e}, pooled_output {pooled:.2e}")
  assert sequence < 1e-5 and pooled < 1e-5


@pytest.mark.parametrize("model_class", [transformers.AlbertForMaskedLM, transformers.AlbertForPreTraining])
def test_masked_lm_head_converts_and_the_sentence_order_head_is_dropped(hf_albert, model_class):
  path, model, _ = hf_albert(model_class)
  converted = convert_hf_albert(path, seq_length=LENGTH)
  assert not converted.has_pooler or model_class is transformers.AlbertForPreTraining
  assert converted.dropped == ([] if model_class is transformers.AlbertForMaskedLM
                               else ["sop_classifier.classifier.bias", "sop_classifier.classifier.weight"])
  inputs = _inputs(1)
  positions = np.tile(np.arange(0, LENGTH, 3, dtype=np.int32), (LENGTH, 1))
  logits = converted.heads["masked_lm"](converted.encoder(inputs)["sequence_output"],
                                        masked_positions=positions).numpy()
  with torch.no_grad():
    out = model(**_torch(inputs))
  expected = (out.logits if hasattr(out, "logits") else out.prediction_logits).numpy()
  expected = np.take_along_axis(expected, positions[..., None].astype(np.int64), axis=1)
  difference = np.abs(logits - expected).max()
  print(f"{model_class.__name__}: masked-LM logits max |diff| {difference:.2e}")
  assert difference < 1e-4


def test_the_command_writes_a_model_directory_with_its_sentencepiece_model(hf_albert, spiece, tmp_path):
  path, model, _ = hf_albert(transformers.AlbertForMaskedLM)
  out = str(tmp_path / "converted")
  assert main(["hf-albert", path, "--out", out, "--seq-length", str(LENGTH)]) == 0
  model_dir = ModelDir(out)
  assert model_dir.read_sentencepiece() == spiece
  settings = TrainConfig.from_model_dir(out)
  assert settings.tokenizer == dict(kind="sentencepiece", keep_accents=False, cls_type_id=0,
                                    special_tokens=dict(pad="<pad>", unk="<unk>", cls="[CLS]", sep="[SEP]",
                                                        mask="[MASK]"), truncator="longest_first")
  assert settings.lower_case is True and settings.vocab_size == 400
  assert model_dir.read_vocab()[:5] == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
  # The encoder the directory's config.json rebuilds is the converted one (a preset and overrides).
  assert settings.model == "albert_base"
  config = presets.encoder_config(model_dir.read_config())
  assert config.family == "transformer"
  from zoo.models import TransformerEncoder
  rebuilt = TransformerEncoder(config)
  pooler = 32 * 32 + 32   # AlbertForMaskedLM has none; the zoo's encoder always has one
  assert rebuilt.get_config()["layer_sharing"] == "all" and rebuilt.count_params() == sum(
      p.numel() for p in model.albert.parameters()) + pooler
  source = json.loads((tmp_path / "converted" / "source.json").read_text())
  assert source["format"] == "hf-albert" and source["hf_config"]["model_type"] == "albert"


def test_what_the_zoo_cannot_reproduce_is_refused_naming_it(hf_albert, tmp_path):
  path, _, _ = hf_albert(num_hidden_groups=2)
  with pytest.raises(ConversionError, match="num_hidden_groups=2 is not supported"):
    convert_hf_albert(path)
  path, _, _ = hf_albert(transformers.AlbertForSequenceClassification, num_labels=3)
  with pytest.raises(ConversionError, match=r"unexpected weight\(s\): classifier.bias, classifier.weight"):
    convert_hf_albert(path, seq_length=LENGTH)
  path, _, _ = hf_albert(transformers.AlbertForMaskedLM, seed=1)
  os.remove(os.path.join(path, "spiece.model"))
  os.remove(os.path.join(path, "tokenizer.json"))
  assert main(["hf-albert", path, "--out", str(tmp_path / "out")]) == 1
  with pytest.raises(TokenizerFilesError, match=r"no spiece.model, .* nor a tokenizer.json"):
    read(path)
  path, _, _ = hf_albert(transformers.AlbertModel, seed=2, vocab_size=399)
  with pytest.raises(ConversionError, match="has 400 pieces, but config.json says vocab_size=399"):
    read(path, seq_length=LENGTH)


@pytest.mark.slow
def test_a_converted_albert_fine_tunes_exports_and_serves_raw_text_as_hugging_face(hf_albert, tmp_path):
  from export.serving_ops import problems
  from tests.zoo.convert.test_end_to_end import fine_tune_and_export
  path, model, tokenizer = hf_albert(transformers.AlbertForMaskedLM, seed=3)
  out = str(tmp_path / "converted")
  assert main(["hf-albert", path, "--out", out, "--seq-length", str(LENGTH)]) == 0
  encode = fine_tune_and_export(tmp_path, out)
  run = ModelDir(str(tmp_path / "run"))
  assert run.read_sentencepiece() == ModelDir(out).read_sentencepiece()   # the run keeps its tokenizer
  version = run.join("export", sorted(os.listdir(run.export_dir))[-1])
  assert problems(version) == []   # every op served by TF Serving 2.12+
  # Raw text of every length: empty, short, exactly the length, far beyond it (truncated).
  prose = sentencepiece_files.prose("validation")
  words = " ".join(prose[3].split()[:60]).split(" ")
  texts = [" ".join(words[:count]) for count in range(0, 40, 3)] + prose[5:8] + [
      "Ünïcödé wörds, 漢字 and CJK: 東京!", "``Quoted''\tand\u00a0spaced  text"]
  actual = encode(text=tf.constant(texts))
  inputs = tokenizer(texts, padding="max_length", truncation=True, max_length=LENGTH, return_tensors="pt")
  with torch.no_grad():
    expected = model.albert(**inputs).last_hidden_state.numpy()
  real = inputs["attention_mask"].numpy().astype(bool)
  difference = float(np.abs(actual["sequence_output"].numpy() - expected)[real].max())
  print(f"exported encode vs Hugging Face AlbertModel on {len(texts)} raw texts: max |diff| {difference:.2e}")
  assert difference < TOLERANCE

  # The fine-tuned classifier goes out to transformers: AlbertForSequenceClassification with its tokenizer
  # computes the export's logits on the same raw texts.
  from zoo.convert.to_hf.export import to_hf
  plan = to_hf(run.path, str(tmp_path / "hf_classifier"))
  assert plan.architecture == "AlbertForSequenceClassification"
  hf_tokenizer = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf_classifier"))
  classifier = transformers.AutoModelForSequenceClassification.from_pretrained(
      str(tmp_path / "hf_classifier")).eval()
  served = tf.saved_model.load(version).signatures["serving_default"](text=tf.constant(texts))["logits"]
  inputs = hf_tokenizer(texts, padding="max_length", truncation=True, max_length=LENGTH, return_tensors="pt")
  with torch.no_grad():
    logits = classifier(**inputs).logits.numpy()
  difference = float(np.abs(served.numpy() - logits).max())
  print(f"to-hf AlbertForSequenceClassification vs the export: max |diff| {difference:.2e}")
  assert difference < TOLERANCE


HOSTILE = ["Ünïcödé wörds, 漢字 and CJK: 東京!", "``Quoted''\tand\u00a0spaced  text", "ﬁne ½ ① ＡＢＣ", "",
           "İstanbul ΣΊΣΥΦΟΣ straße"]


@pytest.mark.parametrize("groups", [1, pytest.param(3, marks=pytest.mark.slow)])
def test_a_converted_albert_goes_back_to_transformers_tensor_for_tensor(hf_albert, tmp_path, groups):
  """hf-albert, then to-hf: AutoModelForMaskedLM and AutoTokenizer load the export with no code of ours, its
  tensors are the original's, name for name, and so are its logits and ids. One group: every layer shared;
  three: a group per layer (factorized embeddings only)."""
  from safetensors.numpy import load_file

  from zoo.convert.to_hf.export import to_hf
  path, model, tokenizer = hf_albert(transformers.AlbertForMaskedLM, seed=4, num_hidden_groups=groups)
  converted, out = str(tmp_path / "converted"), str(tmp_path / "hf")
  assert main(["hf-albert", path, "--out", converted, "--seq-length", str(LENGTH)]) == 0
  assert TrainConfig.from_model_dir(converted).model_overrides.get("layer_sharing", "all") == (
      "all" if groups == 1 else "none")
  plan = to_hf(converted, out)
  assert plan.architecture == "AlbertForMaskedLM" and plan.hf_config["num_hidden_groups"] == groups
  original = {name: tensor.numpy() for name, tensor in model.state_dict().items()}
  exported = load_file(os.path.join(out, "model.safetensors"))
  tied = {"predictions.decoder.weight", "predictions.decoder.bias"}   # tied: transformers restores them
  assert sorted(exported) == sorted(set(original) - tied)
  assert all(np.array_equal(exported[name], original[name]) for name in exported)
  reloaded = transformers.AutoModelForMaskedLM.from_pretrained(out).eval()
  assert type(reloaded).__name__ == "AlbertForMaskedLM"
  inputs = _torch(_inputs(5))
  with torch.no_grad():
    difference = (reloaded(**inputs).logits - model(**inputs).logits).abs().max().item()
  assert difference < 1e-6
  ours = transformers.AutoTokenizer.from_pretrained(out)
  texts = sentencepiece_files.prose("validation")[:10] + HOSTILE
  assert [ours(text)["input_ids"] for text in texts] == [tokenizer(text)["input_ids"] for text in texts]
  assert open(os.path.join(out, "spiece.model"), "rb").read() == open(os.path.join(path, "spiece.model"),
                                                                      "rb").read()


@pytest.mark.slow
def test_masked_lm_pre_training_continues_from_albert_with_whole_word_masking(hf_albert, tmp_path):
  """`tpu.train --task mlm --init-checkpoint` on a converted AlbertForMaskedLM: raw prose tokenized by its
  SentencePiece model (words: pieces from one "▁" to the next), its head restored."""
  from tpu import train
  from zoo.model_dir import MASKED_LM_ROOT
  path, model, _ = hf_albert(transformers.AlbertForMaskedLM, seed=5)
  with torch.no_grad():
    model.predictions.bias.normal_()
  model.save_pretrained(path, safe_serialization=True)
  out = str(tmp_path / "converted")
  assert main(["hf-albert", path, "--out", out, "--seq-length", str(LENGTH)]) == 0
  corpus = tmp_path / "corpus.txt"
  corpus.write_text("".join(f"{line}\n" for line in sentencepiece_files.prose("validation")[:40]))
  run = TrainConfig(model_dir=str(tmp_path / "run"), task="mlm", data=f"text:{corpus}", steps=1, batch_size=4,
                    seq_length=LENGTH, init_checkpoint=out, checkpoint_every=1, learning_rate=1e-12,
                    export=False, whole_word_masking=True)
  train.run(run)
  prefix = ModelDir(str(tmp_path / "run")).latest_checkpoint()
  bias = [name for name, _ in tf.train.list_variables(prefix)
          if name.startswith(f"{MASKED_LM_ROOT}/output_bias")]
  assert bias, "the run saved no masked-LM head"
  np.testing.assert_allclose(tf.train.load_checkpoint(prefix).get_tensor(bias[0]),
                             model.predictions.bias.detach().numpy(), atol=1e-6)
  assert ModelDir(str(tmp_path / "run")).read_sentencepiece() == ModelDir(out).read_sentencepiece()


def test_the_casing_comes_from_tokenizer_json_when_tokenizer_config_names_none(spiece, tmp_path):
  """A directory whose tokenizer_config.json leaves out do_lower_case and keep_accents: the normalizers of its
  tokenizer.json say them; with neither file, ALBERT's defaults."""
  from zoo.convert.tokenizer_files import sentencepiece_settings
  for lower_case, keep_accents in ((False, True), (True, False)):
    directory = tmp_path / f"{lower_case}-{keep_accents}"
    sentencepiece_files.save_hf_tokenizer(spiece, str(directory), do_lower_case=lower_case,
                                          keep_accents=keep_accents)
    config = json.loads((directory / "tokenizer_config.json").read_text())
    for key in ("do_lower_case", "keep_accents"):
      config.pop(key)
    (directory / "tokenizer_config.json").write_text(json.dumps(config))
    found_lower_case, tokenizer, model = sentencepiece_settings(str(directory))
    assert (found_lower_case, tokenizer["keep_accents"]) == (lower_case, keep_accents)
    assert model == spiece
  bare = tmp_path / "bare"
  bare.mkdir()
  (bare / "spiece.model").write_bytes(spiece)
  found_lower_case, tokenizer, _ = sentencepiece_settings(str(bare))
  assert (found_lower_case, tokenizer["keep_accents"]) == (True, False)


@pytest.mark.slow
def test_a_hub_id_converts_with_its_sentencepiece_model_from_the_cache_offline(hf_albert, spiece, tmp_path):
  """`hf-albert someone/tiny-albert` from huggingface_hub's cache, offline: `spiece.model` is fetched with
  the weights and the config, and the directory tokenizes with it."""
  from tests.zoo.convert.test_end_to_end import convert_from_hub_cache
  path, _, _ = hf_albert(transformers.AlbertForMaskedLM, seed=6)
  result, out, commit = convert_from_hub_cache(tmp_path, "hf-albert", "someone/tiny-albert", path)
  assert result.returncode == 0, result.stderr
  source = ModelDir(out).read_source()
  assert (source["format"], source["hub_id"], source["revision"]) == ("hf-albert", "someone/tiny-albert",
                                                                      commit)
  assert ModelDir(out).read_sentencepiece() == spiece


# Without spiece.model: transformers 5 saves tokenizer.json alone, and the SentencePiece model is built from
# it (`zoo.convert.sentencepiece_model`).

# Odd text beyond the standard library's prose: full-width forms, ligatures, symbols, non-breaking, narrow,
# zero-width and other spaces, CJK, Hangul, right-to-left scripts, emoji sequences, ALBERT's quotes, control
# characters, combining marks, long words, empty and blank text. Not U+000B and U+0000, where the zoo's
# SentencePieceEncoder differs from AlbertTokenizer with any spiece.model, shipped or built (a word boundary
# the model's map deletes; the text cut at NUL): `test_..._tokenizes_as_transformers` checks the built model
# does there what the shipped one does.
ODD_TEXTS = HOSTILE + [
    "Ｆｕｌｌ－ｗｉｄｔｈ ＡＢＣ １２３！", "ﬁne ﬂow ﬀ ﬃ ligatures", "wait… ™ ® © ½ ① № ℃ ㎏",
    "non\u00a0breaking\u202fnarrow\u2009thin\u3000ideographic",
    "zero\u200bwidth\u200cnon\u200djoiner\ufeffbom",
    "東京で日本語を話す。中文，標點！한국어 텍스트", "עברית والعربية", "emoji 😀👍🏽 ☃ ❤️ 🏳️‍🌈 👨‍👩‍👧",
    "``like this'' and ''that``", "e\u0301 combining a\u0308 marks", "control\x07\x1b chars \ufffd",
    "x\u2028y\u0085z\u000cw", "Pneumonoultramicroscopicsilicovolcanoconiosis " + "supercalifragilistic" * 12,
    "a" * 300, "", "   \t\n "]


def _without_spiece(directory):
  """`directory` as transformers 5 saves an ALBERT tokenizer: tokenizer.json, no spiece.model."""
  os.remove(os.path.join(directory, "spiece.model"))
  return directory


@pytest.mark.slow
def test_without_spiece_model_it_is_built_from_tokenizer_json_and_tokenizes_as_transformers(hf_albert, spiece,
                                                                                            tmp_path):
  """hf-albert of a directory without spiece.model: the directory gets the SentencePiece model built from
  tokenizer.json (the original's pieces, scores, types and normalization map), source.json says so, and the
  directory's text encoder gives AutoTokenizer's ids on every docstring line of the standard library and odd
  Unicode, packed and not."""
  from tests.zoo.text.test_reference import stdlib_prose
  from zoo.text import text_encoder
  path, _, _ = hf_albert(transformers.AlbertForMaskedLM, seed=7)
  _without_spiece(path)
  out = str(tmp_path / "converted")
  assert main(["hf-albert", path, "--out", out, "--seq-length", str(LENGTH)]) == 0
  model_dir = ModelDir(out)
  built = model_dir.read_sentencepiece()
  assert describe_model(built) == describe_model(spiece)
  assert model_dir.read_source()["spiece_model"] == "built from tokenizer.json"
  config = TrainConfig.from_model_dir(out)
  encoder = text_encoder(model_dir.read_vocab(), seq_length=LENGTH, sentencepiece_model=built,
                         **config.text_encoder_args())
  reference = transformers.AutoTokenizer.from_pretrained(path)
  texts = stdlib_prose() + ODD_TEXTS
  ours = encoder.tokenize(tf.constant(texts)).to_list()
  theirs = reference(texts, add_special_tokens=False)["input_ids"]
  differing = [(text[:60], a[:12], b[:12]) for text, a, b in zip(texts, ours, theirs, strict=True) if a != b]
  print(f"built spiece.model vs AutoTokenizer: {len(texts)} texts, {sum(map(len, ours))} pieces, "
        f"{len(differing)} differing")
  assert not differing, differing
  packed = encoder.encode(tf.constant(texts))["input_word_ids"].numpy()
  expected = reference(texts, padding="max_length", truncation=True, max_length=LENGTH)["input_ids"]
  assert packed.tolist() == expected
  # Where the zoo's tokenizer differs from transformers' (see ODD_TEXTS), the built model does what the
  # shipped one does.
  shipped = text_encoder(None, seq_length=LENGTH, sentencepiece_model=spiece, **config.text_encoder_args())
  known = tf.constant(ODD_TEXTS + ["vertical\u000btab", "nul\u0000cut"])
  assert encoder.tokenize(known).to_list() == shipped.tokenize(known).to_list()


@pytest.mark.parametrize("options", [dict(do_lower_case=False, keep_accents=True),
                                     dict(do_lower_case=False, keep_accents=False),
                                     dict(do_lower_case=True, keep_accents=True)],
                         ids=["cased-accents", "cased", "uncased-accents"])
def test_the_built_model_follows_the_casing_and_accents_of_the_tokenizer(spiece, tmp_path, options):
  """Cased, accents kept: the SentencePiece model built from tokenizer.json and the zoo's preprocessing give
  AutoTokenizer's ids on every twentieth docstring line and the odd texts."""
  from tests.zoo.text.test_reference import stdlib_prose
  from zoo.convert.tokenizer_files import sentencepiece_settings
  from zoo.text import SentencePieceEncoder
  directory = str(tmp_path / "tokenizer")
  sentencepiece_files.save_hf_tokenizer(spiece, directory, **options)
  reference = transformers.AutoTokenizer.from_pretrained(_without_spiece(directory))
  lower_case, tokenizer, model = sentencepiece_settings(directory)
  encoder = SentencePieceEncoder(model, seq_length=8, lower_case=lower_case,
                                 **{key: value for key, value in tokenizer.items() if key != "kind"})
  texts = stdlib_prose()[::20] + ODD_TEXTS
  ours = encoder.tokenize(tf.constant(texts)).to_list()
  theirs = reference(texts, add_special_tokens=False)["input_ids"]
  assert [(text, a) for text, a, b in zip(texts, ours, theirs, strict=True) if a != b] == []


def test_user_defined_and_special_pieces_come_back_as_the_original_models():
  """A model trained with user-defined symbols, saved with them as transformers' converter makes them (added
  tokens that are not special): the built model is the original one piece for piece, type for type, and the
  zoo tokenizes with it as with the original; AutoTokenizer gives the same ids on text without the symbols
  (with them it splits the added tokens out of the text before its pre-tokenizer, as README's notes say)."""
  import io
  import tempfile

  import sentencepiece

  from zoo.convert.tokenizer_files import sentencepiece_settings
  from zoo.text import SentencePieceEncoder
  stream = io.BytesIO()
  sentencepiece.SentencePieceTrainer.train(
      sentence_iterator=iter(sentencepiece_files.prose()[:300]), model_writer=stream, vocab_size=300,
      model_type="unigram", pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
      control_symbols=sentencepiece_files.SPECIAL, user_defined_symbols=["<url>", "▁zoo"],
      normalization_rule_name="nmt_nfkc", minloglevel=2, num_threads=1)
  original = stream.getvalue()
  tokenizer = sentencepiece_files.hf_tokenizer(original)
  tokenizer.add_tokens([transformers.AddedToken(symbol, normalized=False, special=False)
                        for symbol in ("<url>", "▁zoo")])
  with tempfile.TemporaryDirectory() as directory:
    tokenizer.save_pretrained(directory)
    reference = transformers.AutoTokenizer.from_pretrained(directory)
    _, _, built = sentencepiece_settings(directory)
  assert describe_model(built) == describe_model(original)
  # The fields as protobuf's generated code for sentencepiece_model.proto reads them (transformers' copy).
  from transformers.utils import sentencepiece_model_pb2_new as generated
  proto = generated.ModelProto.FromString(built)
  normalizer, trainer = proto.normalizer_spec, proto.trainer_spec
  assert normalizer.add_dummy_prefix and normalizer.escape_whitespaces and normalizer.remove_extra_whitespaces
  assert (trainer.model_type, trainer.vocab_size, trainer.unk_id, trainer.pad_id, trainer.bos_id,
          trainer.eos_id, trainer.unk_piece, trainer.pad_piece) == (1, 300, 1, 0, -1, -1, "<unk>", "<pad>")
  kinds = {piece: kind for piece, _, kind in describe_model(built)["pieces"][:7]}
  assert kinds == {"<pad>": 3, "<unk>": 2, "[CLS]": 3, "[SEP]": 3, "[MASK]": 3, "<url>": 4, "▁zoo": 4}
  with_symbols = ["see <url> here", "see<url>here", "a ▁zoo b", "the zoo is open"]
  plain = sentencepiece_files.prose("validation")[:5] + ["the zoo is open"]
  texts = tf.constant(with_symbols + plain)
  ours, shipped = (SentencePieceEncoder(model, seq_length=8).tokenize(texts).to_list()
                   for model in (built, original))
  assert ours == shipped
  assert ours[len(with_symbols):] == reference(plain, add_special_tokens=False)["input_ids"]


@pytest.fixture(scope="module")
def tokenizer_json(spiece, tmp_path_factory):
  """The tokenizer files transformers 5 saves for the model: tokenizer.json, tokenizer_config.json."""
  directory = tmp_path_factory.mktemp("tokenizer_json")
  sentencepiece_files.save_hf_tokenizer(spiece, str(directory))
  return _without_spiece(directory)


def _normalizers(files, edit):
  normalizer = files["tokenizer.json"]["normalizer"]
  normalizer["normalizers"] = edit(normalizer["normalizers"])


def _metaspace(files, **settings):
  files["tokenizer.json"]["pre_tokenizer"]["pretokenizers"][1].update(settings)


TOKENIZER_JSON_REFUSALS = [
    (lambda f: f["tokenizer.json"].update(model=dict(type="BPE", vocab={"a": 0}, merges=[])),
     "a BPE model; a SentencePiece model is built from a Unigram model"),
    (lambda f: _normalizers(f, lambda steps: steps + [dict(type="NFC")]),
     "normalizer step NFC is neither SentencePiece's nor one of the zoo's own preprocessing steps"),
    (lambda f: _normalizers(f, lambda steps: [dict(type="Strip", strip_left=True, strip_right=True)] + steps),
     r"normalizer step Strip\(strip_left=True, strip_right=True\)"),
    (lambda f: _normalizers(f, lambda steps: steps + [dict(type="Replace", pattern=dict(String="-"),
                                                           content=" ")]),
     r"normalizer step Replace\(pattern=\{'String': '-'\}, content=' '\) is neither"),
    (lambda f: _normalizers(f, lambda steps: steps[:4] + steps[5:] + [steps[4]]),
     "normalizer step Lowercase comes after a step it must precede"),
    (lambda f: _normalizers(f, lambda steps: steps[:3] + steps[4:]),
     "normalizer step NFKD without StripAccents"),
    (lambda f: _normalizers(f, lambda steps: steps[:4] + steps[5:]),
     "the normalizer has no Lowercase, where the tokenizer files say do_lower_case=True"),
    (lambda f: f["tokenizer.json"].update(pre_tokenizer=dict(type="ByteLevel", add_prefix_space=False)),
     r"pre_tokenizer ByteLevel\(add_prefix_space=False\); supported: ALBERT's: WhitespaceSplit then "
     "Metaspace"),
    (lambda f: _metaspace(f, prepend_scheme="first"), "Metaspace prepend_scheme 'first'"),
    (lambda f: _metaspace(f, prepend_scheme="never"),
     "Metaspace prepend_scheme 'never' .*: the zoo runs the SentencePiece model on each word with '▁'"),
    (lambda f: _metaspace(f, replacement="_"), "Metaspace replacement '_': SentencePiece marks whitespace"),
    (lambda f: f["tokenizer_config.json"].update(add_prefix_space=False),
     "Metaspace prepend_scheme 'always', but tokenizer_config.json says add_prefix_space=False"),
    (lambda f: f["tokenizer.json"]["model"].update(byte_fallback=True),
     "the Unigram model has byte_fallback"),
    (lambda f: f["tokenizer.json"]["model"].update(unk_id=None), "the Unigram model's unk_id is None"),
    (lambda f: f["tokenizer.json"]["model"].update(unk_id=5),
     "the Unigram model's unknown piece \\(unk_id 5\\) is '▁', but the tokenizer files name '<unk>'"),
    (lambda f: f["tokenizer.json"]["model"].update(unk_id=0) or f["tokenizer_config.json"].update(
        unk_token="<pad>"), "unk_id is 0, but transformers' AlbertTokenizer maps unknown text to id 1"),
    (lambda f: f["tokenizer.json"]["added_tokens"].append(dict(id=400, content="<new>", special=False)),
     r"added token '<new>' \(id 400\) is not a piece of the Unigram model \(its id holds no piece"),
]


@pytest.mark.parametrize("edit, message", TOKENIZER_JSON_REFUSALS,
                         ids=[message.split(":")[0][:28] for _, message in TOKENIZER_JSON_REFUSALS])
def test_what_the_built_model_cannot_represent_is_refused_naming_the_file_and_the_step(
    tokenizer_json, tmp_path, edit, message):
  import shutil

  from zoo.convert.tokenizer_files import sentencepiece_settings
  directory = shutil.copytree(tokenizer_json, tmp_path / "tokenizer")
  files = {name: json.loads((directory / name).read_text())
           for name in ("tokenizer.json", "tokenizer_config.json")}
  edit(files)
  for name, value in files.items():
    (directory / name).write_text(json.dumps(value))
  with pytest.raises(ConversionError) as error:
    sentencepiece_settings(str(directory))
  assert str(error.value).startswith(f"{directory / 'tokenizer.json'}: "), error.value
  assert re.search(message, str(error.value)), error.value


def test_the_command_refuses_a_tokenizer_json_it_cannot_represent(hf_albert, tmp_path, capsys):
  path, _, _ = hf_albert(seed=8)
  fast = json.loads(open(os.path.join(_without_spiece(path), "tokenizer.json")).read())
  fast["normalizer"]["normalizers"].append(dict(type="NFC"))
  with open(os.path.join(path, "tokenizer.json"), "w") as file:
    json.dump(fast, file)
  capsys.readouterr()   # saving the model wrote progress bars
  assert main(["hf-albert", path, "--out", str(tmp_path / "out")]) == 1
  error = capsys.readouterr().err
  assert error.startswith(f"zoo.convert: error: {os.path.join(path, 'tokenizer.json')}: normalizer step NFC")
  assert not os.path.exists(tmp_path / "out")

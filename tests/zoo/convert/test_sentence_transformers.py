"""zoo.convert and sentence-transformers, both ways, against sentence-transformers itself.

- Out: an embed run (BERT, ALBERT-shaped, a Funnel with its decoder; cls, mean and max pooling,
  normalised or not) as `tpu.train` writes it, exported by `to-hf`, holds the files sentence-transformers
  saves for the same modules, and `SentenceTransformer(DIR).encode` equals the run's vectors (and its
  SavedModel's `embed` signature) on standard-library prose of every length, texts longer than the
  sequence length and odd Unicode.
- In: folders saved by sentence-transformers around random transformers models (BERT; ALBERT, whose
  tokenizer transformers 5 saves as tokenizer.json alone, without spiece.model; a Funnel with its
  decoder; the layout of sentence-transformers 6 and the older one, `0_Transformer` and
  `pooling_mode_..._tokens` keys) convert into embed model directories whose model (and SavedModel's
  `embed` signature) equals `encode`, which `to-hf` writes back tensor for tensor and which
  `tpu.train --init-checkpoint` fine-tunes with the folder's pooling and normalisation.
- Refusals: modules, pooling modes and transformers the zoo does not compute are named, with what is
  supported, before anything is written; a hub id fetches the files of the folder modules.json names.
"""

import json
import os
import re
import shutil
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops of the exported SavedModel)
import torch
import transformers
from safetensors import numpy as safetensors_numpy
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Normalize
from sentence_transformers.sentence_transformer.modules import Pooling
from sentence_transformers.sentence_transformer.modules import Transformer

from tests.model_dirs import write_run
from tests.zoo.text import sentencepiece_files
from tests.zoo.text.test_reference import stdlib_prose
from tpu.config import TrainConfig
from tpu.prepare import resolve_config
from tpu.serving import restore_model
from zoo.convert import ConversionError
from zoo.convert import hf_hub
from zoo.convert import sentence_transformers as layout
from zoo.convert.__main__ import main
from zoo.convert.to_hf.export import to_hf
from zoo.convert.to_hf.plan import plan
from zoo.model_dir import ModelDir
from zoo.text import load_vocab
from zoo.text import text_encoder

LENGTH = 24
TOLERANCE = 1e-4
RUNS = dict(
    bert=("bert_small", dict(hidden_size=32, num_heads=2, intermediate_size=64, num_layers=2)),
    albert=("bert_small", dict(hidden_size=32, num_heads=2, intermediate_size=64, num_layers=2,
                               embedding_width=16, layer_sharing="all")),
    funnel=("funnel_b4_4_4_decoder", dict(hidden_size=32, num_heads=2, intermediate_size=64,
                                          block_sizes=[1, 2], block_repeats=[1, 1], num_decoder_layers=1)))
HF_TINY = dict(bert=dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                         max_position_embeddings=64),
               albert=dict(embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=64, max_position_embeddings=64, hidden_act="gelu_new"),
               funnel=dict(d_model=32, n_head=4, d_head=8, d_inner=64, block_sizes=[1, 2],
                           block_repeats=[1, 1], num_decoder_layers=1, hidden_act="gelu_new"))
# Text the tokenizers and the models must agree on beyond the standard library's prose: accents, CJK,
# combining marks, ligatures, zero-width and non-breaking spaces, emoji, control characters.
ODD_TEXTS = ["Café naïve RÉSUMÉ — Ångström's façade, Zürich & São Paulo.",
             "東京で日本語を話す。中文，標點！",
             "e\u0301 combining, \ufb01ligature, zero\u200bwidth, non\u00a0breaking, emoji \U0001F600 \u2603",
             "tab\tand\nnewline, control\x07 chars \ufffd, MixedCase WORDS (parenthesised) [bracketed]", "",
             "a"]


@pytest.fixture(scope="module")
def texts():
  """Docstring lines of 0 to 19 words, two far longer than LENGTH tokens, and ODD_TEXTS."""
  lines = stdlib_prose()
  by_words = {}
  for line in lines:
    by_words.setdefault(len(line.split()), line)
  return [by_words[n] for n in sorted(by_words)[:20]] + [" ".join(lines[100:160]), " ".join(lines[900:940])] \
      + ODD_TEXTS


def st_vectors(folder, texts):
  """`SentenceTransformer(folder).encode(texts)`, float32 [texts, D]."""
  return SentenceTransformer(str(folder), device="cpu").encode(texts, batch_size=8)


def zoo_vectors(model_dir, texts, model=None):
  """The embed model of `model_dir` (restored from its checkpoint unless given) on raw text, tokenized as
  the directory's export tokenizes it."""
  directory = ModelDir(str(model_dir))
  config = TrainConfig.from_model_dir(directory)
  model = model or restore_model(config, directory.latest_checkpoint())
  encoder = text_encoder(directory.read_vocab(), seq_length=config.seq_length,
                         sentencepiece_model=directory.read_sentencepiece(), **config.text_encoder_args())
  features = {name: value[:, tf.newaxis] for name, value in encoder.encode(tf.constant(texts)).items()}
  return model(features, training=False).numpy()[:, 0]


def embed_signature(model_dir, tmp_path, texts):
  """The `embed` signature of the directory's SavedModel (`python -m export.saved_model`) on `texts`."""
  from export.saved_model import main as export_main
  base = str(tmp_path / f"{os.path.basename(str(model_dir))}-export")
  assert export_main(["--model-dir", str(model_dir), "--out", base]) == 0
  return tf.saved_model.load(os.path.join(base, "1")).signatures["embed"](text=tf.constant(texts))[
      "embeddings"].numpy()


def max_difference(actual, expected):
  assert actual.shape == expected.shape, (actual.shape, expected.shape)
  return float(np.abs(np.asarray(actual, np.float64) - expected).max())


def embed_run(path, family, pooling, normalize, vocab_path, seed=0):
  """An embed run of `family` as `tpu.train` writes it (`tests.model_dirs.write_run`); returns its model."""
  model, overrides = RUNS[family]
  vocab = load_vocab(vocab_path)
  config = TrainConfig(model=model, model_overrides=dict(overrides), task="embed", data="demo",
                       model_dir=str(path), seq_length=LENGTH, vocab_size=len(vocab), lower_case=True,
                       pooling=pooling, normalize=normalize).validate()
  return write_run(path, config, vocab, seed)


# Out: to-hf of embed runs.

OUT_CASES = [("bert", "cls", True), ("bert", "mean", False), ("bert", "max", True), ("albert", "mean", True),
             ("funnel", "max", False)]


@pytest.mark.slow
@pytest.mark.parametrize("family, pooling, normalize", OUT_CASES,
                         ids=["-".join(map(str, case)) for case in OUT_CASES])
def test_an_embed_run_exports_as_a_sentence_transformers_folder_that_computes_its_vectors(
    family, pooling, normalize, prose_vocab, tmp_path, texts):
  model = embed_run(tmp_path / "run", family, pooling, normalize, prose_vocab(True))
  written = to_hf(str(tmp_path / "run"), str(tmp_path / "st"))
  assert written.architecture == dict(bert="BertModel", albert="AlbertModel", funnel="FunnelModel")[family]
  assert written.embedding == dict(pooling=pooling, normalize=normalize)
  loaded = SentenceTransformer(str(tmp_path / "st"), device="cpu")
  kinds = [type(module).__name__ for module in loaded]
  assert kinds == ["Transformer", "Pooling"] + (["Normalize"] if normalize else [])
  assert loaded[1].pooling_mode == pooling and loaded.max_seq_length == LENGTH
  expected = zoo_vectors(tmp_path / "run", texts, model)
  actual = loaded.encode(texts, batch_size=8)
  difference = max_difference(actual, expected)
  print(f"{family} {pooling} normalize={normalize}: encode vs the run's vectors max |diff| {difference:.2e}")
  assert difference < TOLERANCE
  norms = np.linalg.norm(actual, axis=-1)
  assert np.allclose(norms, 1, atol=1e-5) == normalize
  # Texts longer than LENGTH tokens are truncated alike; the vectors differ from text to text.
  assert np.std(actual, axis=0).min() > 1e-3
  card = (tmp_path / "st" / "README.md").read_text()
  for fact in ("library_name: sentence-transformers", "SentenceTransformer(PATH)", f"`{pooling}`"):
    assert fact in card, fact


@pytest.mark.slow
def test_the_files_are_those_sentence_transformers_saves_and_the_export_signature_agrees(
    prose_vocab, tmp_path, texts):
  embed_run(tmp_path / "run", "bert", "mean", True, prose_vocab(True))
  assert main(["to-hf", str(tmp_path / "run"), "--out", str(tmp_path / "st")]) == 0
  transformer = Transformer(str(tmp_path / "st"))
  pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode="mean")
  SentenceTransformer(modules=[transformer, pooling, Normalize()]).save(str(tmp_path / "saved"))

  def read(folder, name):
    return json.loads((tmp_path / folder / name).read_text())
  for name in ("modules.json", "1_Pooling/config.json", "2_Normalize/config.json"):
    assert read("st", name) == read("saved", name), name
  ours = read("st", "sentence_bert_config.json")
  assert {key: ours.pop(key) for key in ("max_seq_length", "do_lower_case")} == dict(max_seq_length=LENGTH,
                                                                                       do_lower_case=False)
  assert ours == read("saved", "sentence_bert_config.json")
  ours, saved = (read(folder, "config_sentence_transformers.json") for folder in ("st", "saved"))
  assert sorted(ours) == sorted(saved)
  assert {key: ours[key] for key in ours if key != "__version__"} == \
      {key: saved[key] for key in saved if key != "__version__"}
  # The SavedModel the run exports (`python -m export.saved_model`): its embed signature is encode's.
  difference = max_difference(st_vectors(tmp_path / "st", texts), embed_signature(tmp_path / "run", tmp_path,
                                                                                   texts))
  print(f"BERT mean, normalised: encode vs the SavedModel's embed signature max |diff| {difference:.2e}")
  assert difference < TOLERANCE


def test_an_embed_run_on_a_funnel_without_decoder_is_refused_before_anything_is_written(tmp_path):
  settings = dict(model="funnel_b4_4_4", model_overrides=dict(pooling_semantics="huggingface"), task="embed",
                  pooling="mean", normalize=True, seq_length=16, vocab_size=50)
  with pytest.raises(ConversionError, match="an embed run on an encoder-only Funnel") as error:
    plan(settings)
  assert "FunnelModel" in str(error.value) and "num_decoder_layers" in str(error.value)
  ModelDir(str(tmp_path / "run")).write_config(settings)
  assert main(["to-hf", str(tmp_path / "run"), "--out", str(tmp_path / "st")]) == 1
  assert not os.path.exists(tmp_path / "st")


# In: sentence-transformers folders.

def _hf_model(path, family, seed, vocab_path=None, spiece=None):
  """A random transformers base model of `family` saved in `path` with its tokenizer files."""
  torch.manual_seed(seed)
  if family == "albert":
    config = transformers.AlbertConfig(**HF_TINY["albert"], vocab_size=400)
    transformers.AlbertModel(config).eval().save_pretrained(path)
    sentencepiece_files.save_hf_tokenizer(spiece, str(path))
    return
  vocab = load_vocab(vocab_path)
  config_class, model_class, tokenizer_class = dict(
      bert=(transformers.BertConfig, transformers.BertModel, transformers.BertTokenizer),
      funnel=(transformers.FunnelConfig, transformers.FunnelModel, transformers.FunnelTokenizer))[family]
  model_class(config_class(**HF_TINY[family], vocab_size=len(vocab))).eval().save_pretrained(path)
  shutil.copy(vocab_path, os.path.join(path, "vocab.txt"))
  names = dict(cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]", unk_token="[UNK]",
               mask_token="[MASK]")
  tokenizer_class(vocab=os.path.join(path, "vocab.txt"), **names).save_pretrained(path)


def _st_folder(hf_path, out, pooling, normalize, **transformer_options):
  transformer = Transformer(str(hf_path), max_seq_length=LENGTH, **transformer_options)
  modules = [transformer, Pooling(transformer.get_embedding_dimension(), pooling_mode=pooling)]
  SentenceTransformer(modules=modules + ([Normalize()] if normalize else [])).save(str(out))
  return str(out)


def _old_layout(folder, out, pooling):
  """`folder` as sentence-transformers 2 to 5 saved it: the transformer in `0_Transformer`, modules.json's
  `sentence_transformers.models` types, Pooling's boolean mode keys, sentence_bert_config.json's
  `max_seq_length` and `do_lower_case` alone."""
  os.makedirs(os.path.join(out, "0_Transformer"))
  for name in os.listdir(folder):
    if os.path.isfile(os.path.join(folder, name)) and name not in ("modules.json", "README.md",
                                                                   "config_sentence_transformers.json"):
      shutil.copy(os.path.join(folder, name), os.path.join(out, "0_Transformer", name))
  kinds = [("Transformer", "0_Transformer"), ("Pooling", "1_Pooling"), ("Normalize", "2_Normalize")]
  modules = [dict(idx=i, name=str(i), path=path, type=f"sentence_transformers.models.{kind}")
             for i, (kind, path) in enumerate(kinds)]
  with open(os.path.join(out, "modules.json"), "w") as file:
    json.dump(modules, file)
  with open(os.path.join(out, "0_Transformer", "sentence_bert_config.json"), "w") as file:
    json.dump(dict(max_seq_length=LENGTH, do_lower_case=False), file)
  os.makedirs(os.path.join(out, "1_Pooling"))
  with open(os.path.join(out, "1_Pooling", "config.json"), "w") as file:
    json.dump(dict(word_embedding_dimension=32, **{key: mode == pooling for key, mode in
                                                   layout.LEGACY_POOLING_KEYS.items()}), file)
  os.makedirs(os.path.join(out, "2_Normalize"))
  return out


@pytest.fixture(scope="module")
def st_folders(tmp_path_factory, prose_vocab):
  """`{name: (folder, pooling, normalize)}` saved by sentence-transformers (and one in the old layout)."""
  root = tmp_path_factory.mktemp("st")
  spiece = sentencepiece_files.train_model(texts=sentencepiece_files.prose()[:400])
  _hf_model(root / "bert", "bert", 1, prose_vocab(True))
  _hf_model(root / "albert", "albert", 2, spiece=spiece)
  _hf_model(root / "funnel", "funnel", 3, prose_vocab(True))
  folders = dict(
      bert=(_st_folder(root / "bert", root / "st-bert", "cls", True), "cls", True),
      albert=(_st_folder(root / "albert", root / "st-albert", "mean", False), "mean", False),
      funnel=(_st_folder(root / "funnel", root / "st-funnel", "mean", True,
                         processing_kwargs=layout.PAD_TO_MAX_LENGTH), "mean", True))
  folders["old"] = (_old_layout(folders["bert"][0], str(root / "st-old"), "max"), "max", True)
  return folders


@pytest.fixture(scope="module")
def converted(st_folders, tmp_path_factory):
  """`{name: model directory}` of each folder, converted by `python -m zoo.convert sentence-transformers`."""
  root = tmp_path_factory.mktemp("converted")
  out = {}
  for name, (folder, _, _) in st_folders.items():
    out[name] = str(root / name)
    assert main(["sentence-transformers", folder, "--out", out[name]]) == 0
  return out


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bert", "albert", "funnel", "old"])
def test_a_sentence_transformers_folder_converts_to_an_embed_model_directory(name, st_folders, converted,
                                                                             texts):
  folder, pooling, normalize = st_folders[name]
  config = TrainConfig.from_model_dir(converted[name])
  assert (config.task, config.pooling, config.normalize, config.seq_length) == ("embed", pooling, normalize,
                                                                                LENGTH)
  if name == "albert":   # the tokenizer is the SentencePiece model built from tokenizer.json
    assert not os.path.exists(os.path.join(folder, "spiece.model"))
    assert config.tokenizer["kind"] == "sentencepiece" and ModelDir(converted[name]).has_sentencepiece()
    assert ModelDir(converted[name]).read_source()["spiece_model"] == "built from tokenizer.json"
  difference = max_difference(zoo_vectors(converted[name], texts), st_vectors(folder, texts))
  print(f"{name} ({pooling}, normalize={normalize}): converted model vs encode max |diff| {difference:.2e}")
  assert difference < TOLERANCE


@pytest.mark.slow
def test_the_converted_directory_exports_its_embed_signature_and_goes_back_to_the_same_folder(
    st_folders, converted, tmp_path, texts):
  folder = st_folders["bert"][0]
  difference = max_difference(embed_signature(converted["bert"], tmp_path, texts), st_vectors(folder, texts))
  print(f"BERT cls, normalised: the converted directory's embed signature vs encode max |diff| "
        f"{difference:.2e}")
  assert difference < TOLERANCE
  # to-hf writes the folder back: every tensor, and the modules' files.
  assert to_hf(converted["bert"], str(tmp_path / "back")).architecture == "BertModel"
  before = safetensors_numpy.load_file(os.path.join(folder, "model.safetensors"))
  after = safetensors_numpy.load_file(str(tmp_path / "back" / "model.safetensors"))
  assert sorted(after) == sorted(before) and all(np.array_equal(after[key], before[key]) for key in before)
  for name in ("modules.json", "1_Pooling/config.json", "2_Normalize/config.json"):
    assert (tmp_path / "back" / name).read_text() == open(os.path.join(folder, name)).read(), name
  card = (tmp_path / "back" / "README.md").read_text()   # a conversion: no training steps, no evaluation
  assert f"| converted from | sentence-transformers `{folder}` |" in card
  assert "training steps" not in card and "## Evaluation" not in card


@pytest.mark.slow
def test_an_albert_folder_without_spiece_model_exports_the_vectors_of_encode(st_folders, converted, tmp_path,
                                                                              texts):
  """The ALBERT folder as sentence-transformers 6.2 saves it (tokenizer.json, no spiece.model): the
  converted directory's SavedModel (`python -m export.saved_model`), tokenizing in the graph with the
  SentencePiece model built from tokenizer.json, computes `encode`'s vectors."""
  folder = st_folders["albert"][0]
  assert sorted(name for name in os.listdir(folder) if name.startswith(("tokenizer", "spiece"))) == [
      "tokenizer.json", "tokenizer_config.json"]
  difference = max_difference(embed_signature(converted["albert"], tmp_path, texts),
                              st_vectors(folder, texts))
  print(f"ALBERT mean (spiece.model built from tokenizer.json): the embed signature vs encode max |diff| "
        f"{difference:.2e}")
  assert difference < TOLERANCE


@pytest.mark.slow
def test_init_checkpoint_fine_tunes_with_the_folders_pooling_unless_flags_set_it(converted, tmp_path):
  run = dict(task="embed", data="jsonl:pairs.jsonl", model_dir=str(tmp_path / "run"), seq_length=LENGTH,
             init_checkpoint=converted["old"])
  config, _ = resolve_config(TrainConfig(**run))
  assert (config.pooling, config.normalize) == ("max", True)
  assert config.model_overrides == TrainConfig.from_model_dir(converted["old"]).model_overrides
  config, _ = resolve_config(TrainConfig(**run, pooling="cls", normalize=False))
  assert (config.pooling, config.normalize) == ("cls", False)


@pytest.mark.slow
def test_a_converted_folder_fine_tunes_and_serves_what_sentence_transformers_computes(
    st_folders, converted, tmp_path, texts):
  from tpu import train
  lines = stdlib_prose()[::7][:64]
  with open(tmp_path / "pairs.jsonl", "w") as file:
    for query, positive in zip(lines[::2], lines[1::2], strict=True):
      file.write(json.dumps(dict(query=query, positive=positive)) + "\n")
  results = train.run(TrainConfig(task="embed", data=f"jsonl:{tmp_path / 'pairs.jsonl'}",
                                  model_dir=str(tmp_path / "run"), init_checkpoint=converted["funnel"],
                                  steps=1, batch_size=4, seq_length=LENGTH, learning_rate=1e-12,
                                  checkpoint_every=1, dropout=0.0, retrieval_index="off"))
  saved = TrainConfig.from_model_dir(str(tmp_path / "run"))
  assert (saved.pooling, saved.normalize) == ("mean", True)
  embed = tf.saved_model.load(results["export"]).signatures["embed"]
  difference = max_difference(embed(text=tf.constant(texts))["embeddings"].numpy(),
                              st_vectors(st_folders["funnel"][0], texts))
  print(f"Funnel fine-tuned at a negligible rate: embed vs encode max |diff| {difference:.2e}")
  assert difference < TOLERANCE


# Refusals and the hub.

def _json_folder(root, modules, pooling=None, transformer=None, settings=None, config=None):
  """A folder of the files the refusals read: modules.json, the Pooling's and the transformer's configs."""
  os.makedirs(root, exist_ok=True)
  entries = [dict(idx=i, name=str(i), path=path,
                  type=kind if "." in kind else f"sentence_transformers.models.{kind}")
             for i, (kind, path) in enumerate(modules)]
  files = {"modules.json": entries, "1_Pooling/config.json": pooling or dict(embedding_dimension=32),
           "sentence_bert_config.json": transformer or {},
           "config_sentence_transformers.json": settings or {},
           "config.json": config or dict(model_type="bert")}
  for name, value in files.items():
    os.makedirs(os.path.dirname(os.path.join(root, name)), exist_ok=True)
    with open(os.path.join(root, name), "w") as file:
      json.dump(value, file)
  return str(root)


STANDARD = [("Transformer", ""), ("Pooling", "1_Pooling"), ("Normalize", "2_Normalize")]
REFUSALS = [
    (dict(modules=STANDARD[:2] + [("Dense", "2_Dense")] + STANDARD[2:]), "modules.json",
     r"Dense.*supported: a Transformer, then a Pooling \(pooling_mode cls, mean or max"),
    (dict(modules=STANDARD[1:]), "modules.json", r"modules \['Pooling', 'Normalize'\]; supported"),
    (dict(modules=[("custom_st.Transformer", "")] + STANDARD[1:]), "modules.json",
     r"module '0' \(custom_st.Transformer, path ''\) is not one the zoo computes"),
    (dict(pooling=dict(embedding_dimension=32, pooling_mode="mean_sqrt_len_tokens")), "1_Pooling/config.json",
     "pooling_mode 'mean_sqrt_len_tokens': .* cls, mean or max"),
    (dict(pooling=dict(word_embedding_dimension=32, pooling_mode_weightedmean_tokens=True)),
     "1_Pooling/config.json", "pooling_mode 'weightedmean': .* cls, mean or max"),
    (dict(pooling=dict(embedding_dimension=32, pooling_mode="lasttoken")), "1_Pooling/config.json",
     "pooling_mode 'lasttoken'"),
    (dict(pooling=dict(embedding_dimension=32, pooling_mode=["cls", "mean"])), "1_Pooling/config.json",
     r"\['cls', 'mean'\] concatenated.*one of cls, mean, max"),
    (dict(pooling=dict(embedding_dimension=32, include_prompt=False)), "1_Pooling/config.json",
     "include_prompt false.*supported: include_prompt true"),
    (dict(settings=dict(prompts=dict(query="query: "), default_prompt_name="query")),
     "config_sentence_transformers.json", "default_prompt_name 'query'"),
    (dict(transformer=dict(processing_kwargs=dict(text=dict(max_length=8)))), "sentence_bert_config.json",
     "processing_kwargs"),
    (dict(config=dict(model_type="mpnet")), "config.json", "model_type 'mpnet': .* bert, albert, funnel"),
    (dict(config=dict(model_type="funnel", num_decoder_layers=0)), "config.json",
     "a Funnel without decoder layers.*FunnelModel"),
]


@pytest.mark.parametrize("files, where, message", REFUSALS, ids=[r[2].split(":")[0][:24] for r in REFUSALS])
def test_what_the_zoo_does_not_compute_is_refused_by_name(files, where, message, tmp_path, capsys):
  folder = _json_folder(tmp_path / "folder", **{"modules": STANDARD, **files})
  assert main(["sentence-transformers", folder, "--out", str(tmp_path / "out")]) == 1
  error = capsys.readouterr().err
  assert error.startswith(f"zoo.convert: error: {os.path.join(folder, where)}: "), error
  assert re.search(message, error), error
  assert not os.path.exists(tmp_path / "out")


class FakeHub:
  """`huggingface_hub.snapshot_download` over one local folder: copies the files (at any depth) the
  patterns allow into the snapshot `commit`, and records the calls."""

  def __init__(self, folder, root):
    self.folder, self.root, self.calls = folder, root, []

  def snapshot_download(self, repo_id, revision=None, allow_patterns=None):
    import fnmatch
    self.calls.append((revision, tuple(allow_patterns)))
    snapshot = os.path.join(self.root, "commit")
    for directory, _, names in os.walk(self.folder):
      for name in names:
        relative = os.path.relpath(os.path.join(directory, name), self.folder)
        if any(fnmatch.fnmatch(relative, pattern) for pattern in allow_patterns):
          os.makedirs(os.path.dirname(os.path.join(snapshot, relative)), exist_ok=True)
          shutil.copy(os.path.join(directory, name), os.path.join(snapshot, relative))
    return snapshot


def test_a_hub_id_fetches_the_modules_and_the_transformer_folder_modules_json_names(tmp_path, monkeypatch):
  folder = _json_folder(tmp_path / "repo", [("Transformer", "0_Transformer"), *STANDARD[1:]])
  os.makedirs(os.path.join(folder, "0_Transformer"))
  for name in ("config.json", "vocab.txt", "model.safetensors", "tokenizer_config.json"):
    with open(os.path.join(folder, "0_Transformer", name), "w") as file:
      file.write("{}")
  with open(os.path.join(folder, "onnx.bin"), "w") as file:   # not read: not fetched
    file.write("")
  fake = FakeHub(folder, str(tmp_path / "cache"))
  monkeypatch.setitem(sys.modules, "huggingface_hub", fake)
  path, source = hf_hub.download_sentence_transformers("someone/model")
  assert source == dict(hub_id="someone/model", revision="commit")
  assert [call[0] for call in fake.calls] == [None, "commit"]   # the second pinned to the first's commit
  fetched = sorted(os.path.relpath(os.path.join(d, n), path) for d, _, ns in os.walk(path) for n in ns)
  assert fetched == ["0_Transformer/config.json", "0_Transformer/model.safetensors",
                     "0_Transformer/tokenizer_config.json", "0_Transformer/vocab.txt",
                     "1_Pooling/config.json", "config_sentence_transformers.json", "modules.json",
                     "sentence_bert_config.json"]
  assert layout.transformer_folder(path) == "0_Transformer"

"""zoo.convert to-hf against transformers' PyTorch classes, loaded where nothing of the project is.

- Every task of both families: a model directory as `tpu.train` writes it (config.json,
  the prose vocabulary, a checkpoint with the trainer's roots, weights perturbed so that
  outputs differ from token to token), exported and loaded by `hf_outputs.py` in a
  process without the project on its path: the Auto class gives the expected class with
  no missing or unexpected weight, `AutoTokenizer`'s ids equal the zoo tokenizer's on
  standard-library prose (accents, CJK, punctuation, casing, every length up to past
  the sequence length), and hidden states and logits equal the zoo model's at real tokens.
- Round trips: Hugging Face checkpoints converted in (`hf-funnel`, `hf-bert`) and
  exported again give back every tensor (name and value) and every config value.
- Refusals: what transformers cannot express is named, and nothing is written.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import torch
import transformers
from safetensors import numpy as safetensors_numpy

from tests.model_dirs import write_run
from tests.zoo.text.test_reference import stdlib_prose
from tpu.config import TrainConfig
from zoo import presets
from zoo.convert import ConversionError
from zoo.convert import convert_to_model_dir
from zoo.convert.__main__ import main
from zoo.convert.to_hf.configs import BOOKKEEPING_FIELDS
from zoo.convert.to_hf.export import to_hf
from zoo.convert.to_hf.plan import plan
from zoo.model_dir import ModelDir
from zoo.text import TextEncoder

HERE = os.path.dirname(os.path.abspath(__file__))
LENGTH = 24
TOLERANCE = 1e-4
TINY = dict(
    funnel=("funnel_b4_4_4_decoder",
            dict(hidden_size=32, num_heads=2, intermediate_size=64, block_sizes=[1, 2], block_repeats=[1, 1],
                 num_decoder_layers=1)),
    transformer=("bert_small", dict(hidden_size=32, num_heads=2, intermediate_size=64, num_layers=2)))
TAGS = ["O", "B-NAME", "I-NAME", "B-TERM", "I-TERM"]
CLASSES = ["negative", "neutral", "positive"]
TASKS = ("classify", "regress", "tag", "squad", "mlm", "electra")
AUTO = dict(classify="AutoModelForSequenceClassification", regress="AutoModelForSequenceClassification",
            tag="AutoModelForTokenClassification", squad="AutoModelForQuestionAnswering",
            mlm="AutoModelForMaskedLM", electra="AutoModelForPreTraining")
EXPECTED_CLASS = dict(
    funnel=dict(classify="FunnelForSequenceClassification", regress="FunnelForSequenceClassification",
                tag="FunnelForTokenClassification", squad="FunnelForQuestionAnswering",
                mlm="FunnelForMaskedLM", electra="FunnelForPreTraining"),
    transformer=dict(classify="BertForSequenceClassification", regress="BertForSequenceClassification",
                     tag="BertForTokenClassification", squad="BertForQuestionAnswering",
                     mlm="BertForMaskedLM", electra="ElectraForPreTraining"))
# Prose the tokenizers must agree on, beyond the standard library's: accents, CJK, punctuation, casing.
EXTRA_TEXTS = ["Café naïve RÉSUMÉ — Ångström's façade, Zürich & São Paulo.",
               "東京で日本語を話す。中文，標點！",
               "MixedCase WORDS: e.g. \"quoted\" (parenthesised) [bracketed] {braced} ...", "", "a"]


def texts_of_every_length():
  """Standard-library docstring lines from 0 words to far past LENGTH tokens, and EXTRA_TEXTS."""
  lines = stdlib_prose()
  by_words = {}
  for line in lines:
    by_words.setdefault(len(line.split()), line)
  long_line = " ".join(lines[100:160])
  return [by_words[n] for n in sorted(by_words)[:20]] + [long_line] + EXTRA_TEXTS


def make_run(path, family, task, vocab_path, lower_case, seed=0):
  """A model directory of `task` as `tpu.train` writes it (`tests.model_dirs.write_run`), with the
  vocabulary of `vocab_path`."""
  model, overrides = TINY[family]
  labels = dict(classify=CLASSES, tag=TAGS).get(task)
  num_classes = dict(classify=len(CLASSES), regress=1, tag=len(TAGS)).get(task)
  with open(vocab_path, encoding="utf-8") as file:
    vocab = [line.rstrip("\n") for line in file]
  config = TrainConfig(model=model, model_overrides=dict(overrides), task=task, data="demo",
                       model_dir=str(path), seq_length=LENGTH, vocab_size=len(vocab), num_classes=num_classes,
                       label_names=labels, lower_case=lower_case,
                       **(dict(max_query_length=8, doc_stride=8) if task == "squad" else {})).validate()
  return config, write_run(path, config, vocab, seed, eval_results=dict(loss=0.5, accuracy=0.75)), vocab


def zoo_outputs(task, model, features):
  """The zoo model's (logits, full-length hidden state or None) for int32 features `[B, T]`."""
  if task in ("classify", "regress", "tag"):
    return {"logits": model(features, training=False).numpy()}, model.encoder(features)["sequence_output"]
  if task == "squad":
    outputs = model(features, training=False)
    return ({name: outputs[name].numpy() for name in ("start_logits", "end_logits")},
            model.encoder(features)["sequence_output"])
  if task == "mlm":
    positions = np.tile(np.arange(LENGTH, dtype=np.int32), [len(features["input_word_ids"]), 1])
    outputs = model(dict(features, masked_lm_positions=positions), training=False)
    return {"logits": outputs["mlm_logits"].numpy()}, outputs["sequence_output"]
  sequence = model.discriminator(features, training=False)["sequence_output"]
  logits = model.disc_scores(model.disc_transform(sequence))[..., 0]
  return {"logits": logits.numpy()}, sequence


def hf_outputs(tmp_path, exports, texts):
  """`hf_outputs.py`'s arrays for `{key: (directory, auto class)}`, from a process without the project."""
  request = tmp_path / "request.json"
  request.write_text(json.dumps(dict(length=LENGTH, texts=texts, exports=exports)))
  out = tmp_path / "outputs.npz"
  env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "TF_USE_LEGACY_KERAS")}
  result = subprocess.run([sys.executable, os.path.join(HERE, "hf_outputs.py"), str(request), str(out)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  with np.load(out) as arrays:
    return {name: arrays[name] for name in arrays.files}


def masked_max(actual, expected, mask):
  """max |actual - expected| over the real positions (`mask` `[B, T]`; per-example outputs: all)."""
  actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
  assert actual.shape == expected.shape, (actual.shape, expected.shape)
  if actual.ndim >= 2 and actual.shape[:2] == mask.shape:
    actual, expected = actual[mask.astype(bool)], expected[mask.astype(bool)]
  return float(np.max(np.abs(actual - expected))) if actual.size else 0.0


@pytest.mark.slow
@pytest.mark.parametrize("family", ["funnel", "transformer"])
def test_every_task_loads_in_transformers_and_computes_what_the_zoo_does(family, prose_vocab, tmp_path):
  lower_case = family == "funnel"   # an uncased Funnel and a cased BERT
  texts = texts_of_every_length()
  runs, exports = {}, {}
  for task in TASKS:
    config, model, vocab = make_run(tmp_path / task, family, task, prose_vocab(lower_case), lower_case)
    written = to_hf(str(tmp_path / task), str(tmp_path / f"{task}-hf"))
    assert written.architecture == EXPECTED_CLASS[family][task]
    runs[task] = (config, model, vocab)
    exports[task] = (str(tmp_path / f"{task}-hf"), AUTO[task])
  hf = hf_outputs(tmp_path, exports, texts)

  config, _, vocab = runs["classify"]   # every run has the same vocabulary and tokenizer settings
  encoder = TextEncoder(vocab, seq_length=LENGTH, **config.text_encoder_args())
  features = {name: value.numpy() for name, value in encoder.encode(tf.constant(texts)).items()}
  differences = {}
  for task, (_, model, vocab) in runs.items():
    info = json.loads(str(hf[f"{task}/info"]))
    assert info["model_class"] == EXPECTED_CLASS[family][task]
    assert info["missing"] == [] and info["unexpected"] == [], info
    assert info["vocab"] == len(vocab)   # no token added beyond the model's vocabulary
    np.testing.assert_array_equal(hf[f"{task}/input_ids"], features["input_word_ids"], err_msg=task)
    np.testing.assert_array_equal(hf[f"{task}/attention_mask"], features["input_mask"], err_msg=task)
    types = features["input_type_ids"].copy()
    if family == "funnel":   # Funnel's tokenizer gives [CLS] type 2; the zoo's Funnel reads position 0 as 2
      types[:, 0] = 2
    np.testing.assert_array_equal(hf[f"{task}/token_type_ids"], types, err_msg=task)
    expected, hidden = zoo_outputs(task, model, features)
    mask = features["input_mask"]
    for name, value in expected.items():
      differences[f"{task} {name}"] = masked_max(hf[f"{task}/{name}"], value, mask)
    if task not in ("classify", "regress"):   # the sequence classifier's hidden state is the pooled encoder's
      differences[f"{task} hidden"] = masked_max(hf[f"{task}/hidden"], hidden.numpy(), mask)
  print(family, json.dumps(differences, indent=1))
  assert max(differences.values()) < TOLERANCE, differences
  # The logits differ from example to example and class to class: the comparison is not vacuous.
  assert np.std(hf["classify/logits"]) > 0.1 and np.std(hf["tag/logits"]) > 0.1


def _hf_checkpoint(path, model_class, config, tokenizer_class, vocab):
  torch.manual_seed(0)
  model = model_class(config).eval()
  model.save_pretrained(path)
  (path / "vocab.txt").write_text("".join(token + "\n" for token in vocab))
  tokenizer_class(vocab=str(path / "vocab.txt")).save_pretrained(path)
  return model


FUNNEL_VOCAB = ["<pad>", "<unk>", "<cls>", "<sep>", "<mask>", "<s>", "</s>"] + [f"w{i}" for i in range(43)]
BERT_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(45)]
FUNNEL_CONFIG = dict(vocab_size=50, d_model=32, n_head=4, d_head=8, d_inner=64, block_sizes=[1, 2, 1],
                     block_repeats=[1, 1, 2], num_decoder_layers=2, hidden_act="gelu_new")
BERT_CONFIG = dict(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                   intermediate_size=64, hidden_act="gelu", max_position_embeddings=64)
ROUND_TRIPS = [
    ("hf-funnel", "FunnelModel", FUNNEL_CONFIG), ("hf-funnel", "FunnelBaseModel", FUNNEL_CONFIG),
    ("hf-funnel", "FunnelForMaskedLM", FUNNEL_CONFIG), ("hf-funnel", "FunnelForPreTraining", FUNNEL_CONFIG),
    ("hf-funnel", "FunnelModel", dict(FUNNEL_CONFIG, attention_type="relative_shift", separate_cls=False,
                                      truncate_seq=False, pool_q_only=False, pooling_type="max")),
    ("hf-bert", "BertModel", BERT_CONFIG), ("hf-bert", "BertForMaskedLM", BERT_CONFIG),
    ("hf-bert", "BertModel", dict(BERT_CONFIG, hidden_act="relu", layer_norm_eps=1e-6, type_vocab_size=3)),
]


# `make test-fast` round-trips a FunnelModel and a BertForMaskedLM; the others run in the full suite.
FAST_ROUND_TRIPS = (0, 6)


@pytest.mark.parametrize("source_format, model_class, config", [
    pytest.param(*case, id=f"{case[1]}-{i}", marks=() if i in FAST_ROUND_TRIPS else (pytest.mark.slow,))
    for i, case in enumerate(ROUND_TRIPS)])
def test_a_hugging_face_checkpoint_round_trips(source_format, model_class, config, tmp_path):
  funnel = source_format == "hf-funnel"
  hf_config = (transformers.FunnelConfig if funnel else transformers.BertConfig)(**config)
  source = tmp_path / "source"
  _hf_checkpoint(source, getattr(transformers, model_class), hf_config,
                 transformers.FunnelTokenizer if funnel else transformers.BertTokenizer,
                 FUNNEL_VOCAB if funnel else BERT_VOCAB)
  convert_to_model_dir(source_format, str(source), str(tmp_path / "zoo"), seq_length=16)
  written = to_hf(str(tmp_path / "zoo"), str(tmp_path / "back"))
  assert written.architecture == model_class
  before = safetensors_numpy.load_file(str(source / "model.safetensors"))
  after = safetensors_numpy.load_file(str(tmp_path / "back" / "model.safetensors"))
  assert sorted(after) == sorted(before)
  assert all(np.array_equal(after[name], before[name]) for name in before), \
      [name for name in before if not np.array_equal(after[name], before[name])]

  def config_values(path):
    values = json.loads((path / "config.json").read_text())
    return {key: value for key, value in values.items() if key not in BOOKKEEPING_FIELDS}
  assert config_values(tmp_path / "back") == config_values(source)
  # The tokenizer too: the same class and the same ids.
  texts = texts_of_every_length()[:8] + ["w1 w2 w17 w3w4 W5", "<mask> [MASK] w7"]
  tokenizers = [transformers.AutoTokenizer.from_pretrained(str(path)) for path in (source, tmp_path / "back")]
  assert type(tokenizers[0]) is type(tokenizers[1])
  assert tokenizers[0](texts)["input_ids"] == tokenizers[1](texts)["input_ids"]


@pytest.mark.slow
def test_bfloat16_weights_and_the_model_card(prose_vocab, tmp_path):
  make_run(tmp_path / "run", "funnel", "classify", prose_vocab(True), True)
  to_hf(str(tmp_path / "run"), str(tmp_path / "f32"))
  assert main(["to-hf", str(tmp_path / "run"), "--out", str(tmp_path / "bf16"), "--dtype", "bfloat16"]) == 0
  f32 = safetensors_numpy.load_file(str(tmp_path / "f32" / "model.safetensors"))
  bf16 = safetensors_numpy.load_file(str(tmp_path / "bf16" / "model.safetensors"))
  assert sorted(bf16) == sorted(f32) and {str(value.dtype) for value in bf16.values()} == {"bfloat16"}
  assert all(np.array_equal(bf16[name], f32[name].astype(bf16[name].dtype)) for name in f32)
  assert json.loads((tmp_path / "bf16" / "config.json").read_text())["dtype"] == "bfloat16"
  model = transformers.AutoModelForSequenceClassification.from_pretrained(str(tmp_path / "bf16"))
  assert next(model.parameters()).dtype == torch.bfloat16
  assert model.config.id2label == dict(enumerate(CLASSES))
  assert model.config.problem_type == "single_label_classification"
  card = (tmp_path / "bf16" / "README.md").read_text()
  for fact in ("library_name: transformers", "pipeline_tag: text-classification", "funnel_b4_4_4_decoder",
               "| task | classify |", "| training steps | 1 (checkpoint `ckpt-1`) |", "| accuracy | 0.75 |",
               "| weights | bfloat16 |", "--dtype bfloat16", "the 1-layer decoder", "Pipelines pad",
               f'classifier(["..."], padding="max_length", max_length={LENGTH}, truncation=True)'):
    assert fact in card, fact
  # The card's pipeline call computes what the model computes on inputs padded as the zoo's.
  texts = ["a", "the cast was charming and the story felt truly wonderful"]
  classifier = transformers.pipeline("text-classification", model=str(tmp_path / "f32"))
  scores = classifier(texts, padding="max_length", max_length=LENGTH, truncation=True, top_k=None)
  f32_model = transformers.AutoModelForSequenceClassification.from_pretrained(str(tmp_path / "f32"))
  tokenizer = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "f32"))
  with torch.no_grad():
    logits = f32_model(**tokenizer(texts, padding="max_length", max_length=LENGTH, truncation=True,
                                   return_tensors="pt")).logits
  for row, text_scores in zip(torch.softmax(logits, -1).numpy(), scores, strict=True):
    by_label = {item["label"]: item["score"] for item in text_scores}
    np.testing.assert_allclose([by_label[label] for label in CLASSES], row, atol=1e-5)
  # The classifier reads the encoder's output: its config asks AutoModel for no (untrained) decoder.
  assert json.loads((tmp_path / "f32" / "config.json").read_text())["num_decoder_layers"] == 0
  _, info = transformers.AutoModel.from_pretrained(str(tmp_path / "f32"), output_loading_info=True)
  assert info["missing_keys"] == [] or info["missing_keys"] == set(), info


def _settings(model, task=None, **overrides):
  """config.json of a new directory (with the recorded settings: the preset's pooling semantics)."""
  values = dict(model=model, model_overrides=presets.recorded(model, overrides), seq_length=16,
                vocab_size=100, task=task)
  if task == "classify":
    values.update(num_classes=2, label_names=["a", "b"])
  return values


REFUSALS = [
    (_settings("realformer_small"), "RealFormer residual attention"),
    (_settings("prenorm_small"), "Pre-LN"),
    (_settings("rel_transformer_base"), "the relative Transformer"),
    (_settings("bert_small", layer_sharing="attention"), "layer_sharing='attention': transformers' ALBERT"),
    (_settings("albert_base", "electra"), "no ALBERT pre-training class with a discriminator"),
    (_settings("albert_base", norm_first=True), "Pre-LN"),
    (_settings("funnel_b4_4_4", layer_sharing="all"), "cross-layer sharing (layer_sharing='all')"),
    (_settings("funnel_b4_4_4", pooling_semantics="zoo"), "the zoo's pooling semantics"),
    (dict(_settings("funnel_b4_4_4"), model_overrides={}), "the zoo's pooling semantics"),   # written before
    (_settings("funnel_b4_4_4", pooling_semantics="funnel_authors"), "the Funnel authors' pooling semantics"),
    (_settings("funnel_b4_4_4", position_rules="authors_tf", separate_cls=False),
     "the authors' TensorFlow position rules without separate_cls"),
    (_settings("funnel_b4_4_4", residual_attention=True), "RealFormer residual attention"),
    (_settings("funnel_b6_3x2_3x2_decoder", block_sizes=[1, 1, 1], block_repeats=[2, 1, 1]),
     "the decoder adds the output of layer application 1"),
    (dict(_settings("funnel_b4_4_4_decoder", "mlm"), mlm_transform=True), "mlm_transform=true"),
    (dict(_settings("funnel_b4_4_4_decoder", "electra"), head_activation="relu"),
     "activation 'relu' differs"),
    (dict(_settings("bert_small", "mlm"), head_activation="relu"),
     "masked-LM head's activation 'relu' differs"),
    (_settings("bert_small", activation="tanh"), "activation 'tanh'"),
    (_settings("bert_small", "contrastive"), "task 'contrastive' has no transformers class"),
    (_settings("bert_small", attention_window=64),
     "local attention (attention_window=64): transformers' BERT"),
    (_settings("funnel_b4_4_4_long"), "local attention (attention_window=128): transformers' Funnel"),
]


@pytest.mark.parametrize("settings, reason", REFUSALS, ids=[reason for _, reason in REFUSALS])
def test_what_transformers_cannot_express_is_refused_by_name(settings, reason):
  with pytest.raises(ConversionError, match="transformers|task") as error:
    plan(settings)
  assert reason in str(error.value)
  assert "; " not in str(error.value).partition("; to-hf exports")[0]   # for its own reason alone


def test_a_refusal_writes_nothing_and_names_every_reason(tmp_path, capsys):
  directory = ModelDir(str(tmp_path / "run"))
  directory.write_config(dict(_settings("realformer_small", norm_first=True), vocab_size=5))
  assert main(["to-hf", directory.path, "--out", str(tmp_path / "out")]) == 1
  error = capsys.readouterr().err
  assert "Pre-LN" in error and "RealFormer residual attention" in error, error
  assert not (tmp_path / "out").exists()
  assert main(["to-hf", str(tmp_path / "nothing"), "--out", str(tmp_path / "out")]) == 1
  assert "config.json: not found" in capsys.readouterr().err
  (tmp_path / "taken").mkdir()
  (tmp_path / "taken" / "keep.txt").write_text("mine")
  assert main(["to-hf", directory.path, "--out", str(tmp_path / "taken")]) == 1
  assert "exists and is not empty" in capsys.readouterr().err
  assert [path.name for path in (tmp_path / "taken").iterdir()] == ["keep.txt"]


def test_pooling_semantics_are_refused_by_name_unless_the_change_is_asked_for():
  for semantics, words in (("zoo", "the zoo's pooling semantics"), ("funnel_authors", "authors'")):
    settings = _settings("funnel_b4_4_4", pooling_semantics=semantics)
    with pytest.raises(ConversionError, match="last real token shares a pooling window") as error:
      plan(settings)
    assert words in str(error.value) and "--change-pooling" in str(error.value)
    changed = plan(settings, change_pooling=True).changed
    assert len(changed) == 1 and words in changed[0] and "--change-pooling" in changed[0]
  assert plan(_settings("funnel_b4_4_4")).changed == []


def test_funnel_presets_pool_as_hugging_face_and_old_directories_keep_what_they_recorded(tmp_path):
  assert presets.get("funnel_b4_4_4").config["pooling_semantics"] == "huggingface"
  small = presets.build("funnel_b4_4_4", hidden_size=16, num_heads=2, intermediate_size=16,
                        block_sizes=(1, 1), block_repeats=(1, 1))
  assert small.get_config()["pooling_semantics"] == "huggingface"
  # A directory that recorded "authors", the name Hugging Face's semantics had, reads as Hugging Face's.
  named = ModelDir(str(tmp_path / "named"))
  named.write_config(dict(model="funnel_b4_4_4", model_overrides={"pooling_semantics": "authors"},
                          task="classify", seq_length=16, vocab_size=10, num_classes=2))
  assert TrainConfig.from_model_dir(named).model_overrides == {"pooling_semantics": "huggingface"}
  assert presets.encoder_config(named.read_config()).pooling_semantics == "huggingface"
  # A directory written before the default changed records nothing and keeps the zoo's semantics; new
  # ones record the value, and a resume keeps whatever the directory says.
  old = ModelDir(str(tmp_path / "old"))
  old.write_config(dict(model="funnel_b4_4_4", model_overrides={}, task="classify", seq_length=16,
                        vocab_size=10, num_classes=2))
  saved = TrainConfig.from_model_dir(old)
  assert saved.model_overrides == {"pooling_semantics": "zoo"}
  resumed = TrainConfig(model="funnel_b4_4_4", task="classify").resumed_from(saved)
  assert resumed.model_overrides == {"pooling_semantics": "zoo"}
  required = dict(data="demo", model_dir=str(tmp_path / "new"), seq_length=16)
  fresh = TrainConfig(model="funnel_b4_4_4", task="mlm", **required).validate()
  assert fresh.recorded().model_overrides == {"pooling_semantics": "huggingface"}
  # The heads of a Funnel pre-training run default to what transformers' Funnel classes hold (ELECTRA's
  # generator is narrower than the embeddings: its head keeps the transform).
  assert (fresh.mlm_transform, fresh.head_activation) == (False, "gelu_approximate")
  electra = TrainConfig(model="funnel_b4_4_4", task="electra", **required).validate()
  assert (electra.mlm_transform, electra.head_activation) == (True, "gelu_approximate")
  bert = TrainConfig(model="bert_small", task="electra", **required).validate()
  assert (bert.mlm_transform, bert.head_activation, bert.recorded().model_overrides) == (True, "gelu", {})


@pytest.mark.slow
@pytest.mark.parametrize("embedding_width", [None, 16])
def test_a_zoo_albert_with_a_wordpiece_vocabulary_loads_as_albert_in_transformers(
    prose_vocab, tmp_path, embedding_width):
  """ALBERT's savings export as transformers' ALBERT: every layer shared at the model width (E = D: ALBERT's
  projection written as the identity), or factorized embeddings with a layer group per layer; the tokenizer
  is the run's WordPiece."""
  from zoo.convert.model_dir_writer import write_model_dir
  from zoo.models import TransformerEncoder
  from zoo.text import load_vocab
  tokens = load_vocab(prose_vocab(True))
  sharing = "all" if embedding_width is None else "none"
  encoder = TransformerEncoder(vocab_size=len(tokens), hidden_size=32, num_layers=3, num_heads=4,
                               intermediate_size=64, max_sequence_length=64, embedding_width=embedding_width,
                               layer_sharing=sharing, activation="gelu_approximate", dropout=0.0,
                               attention_dropout=0.0, seq_length=16)
  rng = np.random.default_rng(0)
  encoder.set_weights([rng.normal(0, 0.2, w.shape).astype(np.float32) for w in encoder.get_weights()])
  model_dir = str(tmp_path / "zoo_albert")
  write_model_dir(encoder, model_dir, seq_length=16, lower_case=True, source=dict(format="test"),
                  vocab=tokens)
  out = str(tmp_path / "hf")
  export = to_hf(model_dir, out)
  assert export.architecture == "AlbertModel"
  assert export.hf_config["num_hidden_groups"] == (1 if sharing == "all" else 3)
  model = transformers.AutoModel.from_pretrained(out).eval()
  tokenizer = transformers.AutoTokenizer.from_pretrained(out)
  texts = ["The quick brown fox jumps over the lazy dog.", "Return the sum of the values."]
  inputs = tokenizer(texts, padding="max_length", truncation=True, max_length=16, return_tensors="pt")
  features = TextEncoder(tokens, seq_length=16).encode(tf.constant(texts))
  np.testing.assert_array_equal(inputs["input_ids"].numpy(), features["input_word_ids"].numpy())
  with torch.no_grad():
    expected = model(**inputs).last_hidden_state.numpy()
  actual = encoder(features)["sequence_output"].numpy()
  real = features["input_mask"].numpy() > 0
  assert np.abs(actual - expected)[real].max() < 1e-5

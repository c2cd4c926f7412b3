"""A converted checkpoint fine-tunes by itself and serves raw text as its own tokenizer reads it.

For a Hugging Face Funnel checkpoint with FunnelTokenizer files (`<cls>`-style special
tokens), a Hugging Face BERT checkpoint and the same BERT written in Google's TF1
layout: `python -m zoo.convert`, then `tpu.train` with `--init-checkpoint DIR` alone
(a learning rate too small to move the weights), then the export's `encode` signature
on raw text against Hugging Face's tokenizer and PyTorch model (random weights, nothing
downloaded).
"""

import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops of the exported SavedModel)
import torch
import transformers

from tests.zoo.convert.test_bert import TINY as BERT_TINY
from tests.zoo.convert.test_bert import write_tf1
from tests.zoo.convert.test_hf_funnel import BLOCKS
from tests.zoo.convert.test_hf_funnel import TINY as FUNNEL_TINY
from tpu import train
from tpu.config import TrainConfig
from zoo.convert.__main__ import main
from zoo.model_dir import MASKED_LM_ROOT
from zoo.model_dir import ModelDir

LENGTH = 16
TOLERANCE = 1e-4
WORDS = ["the", "a", "dog", "cat", "run", "##s", "##ning", "film", "was", "is", "good", "bad", ".", ",", "!",
         "é", "##é"]
FUNNEL_SPECIAL = ["<pad>", "<unk>", "<cls>", "<sep>", "<mask>", "<s>", "</s>"]
BERT_SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# Long texts fill all LENGTH positions, so Funnel's pooling sees no padding.
LONG = ["The dogs run, the cat was running! A good film is bad. The dog runs, a cat runs.",
        "A CAT IS GOOD, the film was bad; the dogs run and run and run and run and run.",
        "Thé dög wås rünning, zebras are unknown words here, film film film film film film."]
SHORT = ["The dogs run.", "", "a Cat, is good!"]


def vocab_file(folder, special, size):
  tokens = special + WORDS
  tokens += [f"word{i}" for i in range(size - len(tokens))]
  path = os.path.join(folder, "vocab.txt")
  with open(path, "w") as file:
    file.write("".join(f"{token}\n" for token in tokens))
  return path


def fine_tune_and_export(tmp_path, converted):
  run = TrainConfig(model_dir=str(tmp_path / "run"), task="classify", data="demo", steps=2, batch_size=4,
                    seq_length=LENGTH, init_checkpoint=converted, checkpoint_every=2, learning_rate=1e-12,
                    eval_every=0)
  results = train.run(run)
  return tf.saved_model.load(results["export"]).signatures["encode"]


def reference(tokenizer, model, texts):
  """Hugging Face's `last_hidden_state` of the raw texts, and the mask of real tokens."""
  inputs = tokenizer(texts, padding="max_length", truncation=True, max_length=LENGTH, return_tensors="pt")
  with torch.no_grad():
    return model(**inputs).last_hidden_state.numpy(), inputs["attention_mask"].numpy().astype(bool)


def max_difference(encode, tokenizer, model, texts):
  actual = encode(text=tf.constant(texts))["sequence_output"].numpy()
  expected, real = reference(tokenizer, model, texts)
  return float(np.abs(actual - expected)[real].max())


@pytest.mark.slow
def test_hf_funnel_with_its_tokenizer_files(tmp_path):
  src = tmp_path / "funnel"
  config = transformers.FunnelConfig(**{**FUNNEL_TINY, **BLOCKS, "vocab_size": 60})
  torch.manual_seed(0)
  model = transformers.FunnelModel(config).eval()
  model.save_pretrained(src, safe_serialization=True)
  tokenizer = transformers.FunnelTokenizer(vocab_file(str(tmp_path), FUNNEL_SPECIAL, 60))
  tokenizer.save_pretrained(src)
  out = str(tmp_path / "converted")
  assert main(["hf-funnel", str(src), "--out", out, "--seq-length", str(LENGTH)]) == 0
  converted = TrainConfig.from_model_dir(out)
  assert converted.tokenizer["special_tokens"] == dict(pad="<pad>", unk="<unk>", cls="<cls>", sep="<sep>",
                                                       mask="<mask>")
  assert converted.tokenizer["cls_type_id"] == 2
  assert converted.model_overrides["pooling_semantics"] == "huggingface"
  encode = fine_tune_and_export(tmp_path, out)
  # Every number of real tokens, 2 ([CLS] [SEP]) to LENGTH: padding splits the pooling windows every way.
  texts = [" ".join(["dog", "film", "good"][i % 3] for i in range(words)) for words in range(LENGTH)]
  assert max_difference(encode, tokenizer, model, texts + SHORT + LONG) < TOLERANCE


@pytest.fixture
def hf_bert(tmp_path):
  """`(model, tokenizer, folder)`: a random BertModel and its tokenizer, saved to `folder` as transformers
  publishes them (safetensors, config, vocabulary)."""
  config = transformers.BertConfig(**{**BERT_TINY, "vocab_size": 40, "hidden_act": "gelu_new"})
  torch.manual_seed(1)
  model = transformers.BertModel(config).eval()
  tokenizer = transformers.BertTokenizer(vocab_file(str(tmp_path), BERT_SPECIAL, 40), do_lower_case=True)
  src = tmp_path / "bert"
  model.save_pretrained(src, safe_serialization=True)
  tokenizer.save_pretrained(src)
  return model, tokenizer, src


@pytest.mark.slow
def test_hf_bert(tmp_path, hf_bert):
  model, tokenizer, src = hf_bert
  out = str(tmp_path / "converted")
  assert main(["hf-bert", str(src), "--out", out, "--seq-length", str(LENGTH)]) == 0
  encode = fine_tune_and_export(tmp_path, out)
  assert max_difference(encode, tokenizer, model, LONG + SHORT) < TOLERANCE


@pytest.mark.slow
def test_tf1_bert(tmp_path, hf_bert):
  model, tokenizer, _ = hf_bert
  src = write_tf1(model, str(tmp_path / "uncased_L-2_H-32_A-4"))
  vocab_file(src, BERT_SPECIAL, 40)
  out = str(tmp_path / "converted")
  assert main(["tf1-bert", src, "--out", out, "--seq-length", str(LENGTH)]) == 0
  encode = fine_tune_and_export(tmp_path, out)
  assert max_difference(encode, tokenizer, model, LONG + SHORT) < TOLERANCE


def hub_cache(cache, repo_id, files, commit="0123456789abcdef0123456789abcdef01234567"):
  """A huggingface_hub cache holding `files` ({name: source path}) as the snapshot of `repo_id`'s main."""
  repo = os.path.join(cache, "models--" + repo_id.replace("/", "--"))
  snapshot = os.path.join(repo, "snapshots", commit)
  os.makedirs(snapshot)
  os.makedirs(os.path.join(repo, "refs"))
  with open(os.path.join(repo, "refs", "main"), "w") as file:
    file.write(commit)
  for name, path in files.items():
    with open(path, "rb") as source, open(os.path.join(snapshot, name), "wb") as target:
      target.write(source.read())
  return commit


def convert_from_hub_cache(tmp_path, source_format, repo_id, src, cached_id=None):
  """`python -m zoo.convert SOURCE_FORMAT REPO_ID` offline, in a process of its own, with a huggingface_hub
  cache holding the files of the folder `src` as `cached_id`'s (default `repo_id`) main revision.

  Returns `(completed process, the model directory, the cached commit)`."""
  import subprocess
  import sys
  cache = str(tmp_path / "hub")
  files = {name: os.path.join(src, name) for name in os.listdir(src)}
  commit = hub_cache(cache, cached_id or repo_id, files)
  env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HUB_CACHE=cache, HF_HOME=str(tmp_path / "home"),
             PYTHONPATH=os.getcwd())
  out = str(tmp_path / "converted")
  command = [sys.executable, "-m", "zoo.convert", source_format, repo_id, "--out", out, "--seq-length",
             str(LENGTH)]
  return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300), out, commit


@pytest.mark.slow
def test_a_hub_id_converts_from_the_cache_offline(tmp_path, hf_bert):
  _, _, src = hf_bert
  result, out, commit = convert_from_hub_cache(tmp_path, "hf-bert", "someone/tiny-bert", src)
  assert result.returncode == 0, result.stderr
  source = ModelDir(out).read_source()
  assert source.pop("hf_config")["model_type"] == "bert"
  assert source == dict(format="hf-bert", hub_id="someone/tiny-bert", revision=commit)
  assert TrainConfig.from_model_dir(out).tokenizer["special_tokens"]["cls"] == "[CLS]"

  (tmp_path / "again").mkdir()
  result, _, _ = convert_from_hub_cache(tmp_path / "again", "hf-bert", "someone/not-cached", src,
                                        cached_id="someone/tiny-bert")
  assert result.returncode == 1
  assert "zoo.convert: error: someone/not-cached: no local directory of that name" in result.stderr
  # One line, no traceback, saying how to get the checkpoint here without network access.
  assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
  assert "`hf download someone/not-cached --local-dir DIR`" in result.stderr


@pytest.mark.slow
def test_masked_lm_pre_training_starts_from_the_checkpoints_head(tmp_path):
  torch.manual_seed(3)
  model = transformers.BertForPreTraining(transformers.BertConfig(**{**BERT_TINY, "vocab_size": 40})).eval()
  with torch.no_grad():
    model.cls.predictions.bias.normal_()
  src = tmp_path / "bert"
  model.save_pretrained(src, safe_serialization=True)
  vocab_file(str(src), BERT_SPECIAL, 40)
  out = str(tmp_path / "converted")
  assert main(["hf-bert", str(src), "--out", out, "--seq-length", str(LENGTH)]) == 0
  corpus = tmp_path / "corpus.txt"
  corpus.write_text("".join(f"{line}\n" for line in LONG * 20))
  run = TrainConfig(model_dir=str(tmp_path / "run"), task="mlm", data=f"text:{corpus}", steps=1, batch_size=4,
                    seq_length=LENGTH, init_checkpoint=out, checkpoint_every=1, learning_rate=1e-12,
                    export=False)
  train.run(run)
  prefix = ModelDir(str(tmp_path / "run")).latest_checkpoint()
  bias = [name for name, _ in tf.train.list_variables(prefix)
          if name.startswith(f"{MASKED_LM_ROOT}/output_bias")]
  assert bias, "the run saved no masked-LM head"
  expected = model.cls.predictions.bias.detach().numpy()
  np.testing.assert_allclose(tf.train.load_checkpoint(prefix).get_tensor(bias[0]), expected, atol=1e-6)


def _hf_logits(model, inputs):
  with torch.no_grad():
    return model(input_ids=torch.from_numpy(inputs["input_word_ids"]).long(),
                 attention_mask=torch.from_numpy(inputs["input_mask"]).long(),
                 token_type_ids=torch.from_numpy(inputs["input_type_ids"]).long()).logits.numpy()


@pytest.mark.slow
def test_funnel_pre_training_continues_from_the_published_heads(tmp_path):
  """mlm from a converted FunnelForMaskedLM (its settings and head restored as a run does) and electra
  from a converted FunnelForPreTraining (its generator from the masked-LM model; after a step at a
  negligible learning rate): the heads give Hugging Face's logits on raw text of every length."""
  from tpu.serving import restore_model
  from zoo.model_dir import DISCRIMINATOR_HEAD_ROOT
  config = transformers.FunnelConfig(**{**FUNNEL_TINY, **BLOCKS, "vocab_size": 60, "hidden_act": "gelu_new"})
  tokenizer = transformers.FunnelTokenizer(vocab_file(str(tmp_path), FUNNEL_SPECIAL, 60))
  corpus = tmp_path / "corpus.txt"
  corpus.write_text("".join(f"{line}\n" for line in LONG * 20))
  texts = [" ".join(["dog", "film", "good"][i % 3] for i in range(words)) for words in range(LENGTH)] + LONG
  converted = {}
  classes = dict(mlm=transformers.FunnelForMaskedLM, electra=transformers.FunnelForPreTraining)
  for name, model_class in classes.items():
    torch.manual_seed(4)
    model = model_class(config).eval()
    src = tmp_path / name
    model.save_pretrained(src, safe_serialization=True)
    tokenizer.save_pretrained(src)
    out = str(tmp_path / f"converted-{name}")
    assert main(["hf-funnel", str(src), "--out", out, "--seq-length", str(LENGTH)]) == 0
    converted[name] = (out, model)
  width = dict(hidden_size=FUNNEL_TINY["d_model"], num_heads=FUNNEL_TINY["n_head"],
               head_size=FUNNEL_TINY["d_head"], intermediate_size=FUNNEL_TINY["d_inner"],
               embedding_width=FUNNEL_TINY["d_model"])
  runs = dict(mlm=dict(), electra=dict(generator_checkpoint=converted["mlm"][0], generator_overrides=width))
  # mlm: the directory's head settings reach the run's config, and its model starts from the head.
  from tpu import tasks
  from tpu.checkpointing import restore_heads
  from tpu.prepare import resolve_config
  mlm_config, _ = resolve_config(TrainConfig(model_dir=str(tmp_path / "run-mlm"), task="mlm", data="demo",
                                             seq_length=LENGTH, init_checkpoint=converted["mlm"][0],
                                             dropout=0.0, vocab_size=60))
  assert mlm_config.mlm_transform is False
  pretrainer = tasks.get_task(mlm_config).build()
  from tpu.checkpointing import restore_encoder
  restore_encoder(pretrainer.encoder, converted["mlm"][0])
  assert restore_heads(pretrainer, converted["mlm"][0]) == ["masked_lm"]
  # electra: a run (one step at a negligible learning rate) from the discriminator, its generator
  # from the masked-LM model.
  for name, extra in runs.items():
    out, model = converted[name]
    if name == "mlm":
      trained = pretrainer
      saved = mlm_config
    run_dir = str(tmp_path / f"run-{name}")
    run = TrainConfig(model_dir=run_dir, task=name, data=f"text:{corpus}", steps=1, batch_size=4,
                      seq_length=LENGTH, init_checkpoint=out, checkpoint_every=1, learning_rate=1e-12,
                      export=False, dropout=0.0, **extra)
    if name == "electra":
      train.run(run)
      saved = TrainConfig.from_model_dir(run_dir)
      trained = restore_model(saved, ModelDir(run_dir).latest_checkpoint())
    encoded = tokenizer(texts, padding="max_length", truncation=True, max_length=LENGTH, return_tensors="np")
    inputs = dict(input_word_ids=encoded["input_ids"].astype(np.int32),
                  input_mask=encoded["attention_mask"].astype(np.int32),
                  input_type_ids=np.where(np.arange(LENGTH) == 0, 2, 0).astype(np.int32)[None].repeat(
                      len(texts), 0))   # FunnelTokenizer's: [CLS] 2, one segment 0
    real = inputs["input_mask"] > 0
    expected = _hf_logits(model, inputs)
    if name == "mlm":
      assert saved.mlm_transform is False
      positions = np.tile(np.arange(LENGTH, dtype=np.int32), [len(texts), 1])
      actual = trained(dict(inputs, masked_lm_positions=positions), training=False)["mlm_logits"].numpy()
      # The generator of the electra run is this masked-LM model: its head gives the same logits.
    else:
      assert saved.head_activation == "gelu_approximate" and saved.mlm_transform is False
      head = trained.checkpoint_items[DISCRIMINATOR_HEAD_ROOT]
      sequence = trained.discriminator(inputs, training=False)["sequence_output"]
      actual = head.logits(head.transform(sequence))[:, :, 0].numpy()
      generator_logits = trained.masked_lm(trained.generator(inputs, training=False)["sequence_output"],
                                           masked_positions=np.tile(np.arange(LENGTH, dtype=np.int32),
                                                                    [len(texts), 1])).numpy()
      mlm_expected = _hf_logits(converted["mlm"][1], inputs)
      assert np.abs(generator_logits - mlm_expected)[real].max() < TOLERANCE
    assert np.abs(actual - expected)[real].max() < TOLERANCE, name

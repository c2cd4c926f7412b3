"""`to_hf(model_dir, out)`: the export to Hugging Face, step by step.

It checks the directories, decides what to write (`zoo.convert.to_hf.plan`: refusals before
anything else), restores the weights (`zoo.convert.to_hf.weights`), builds config.json
(`zoo.convert.to_hf.configs`), the tokenizer files (`zoo.convert.to_hf.tokenizer`) and the model
card (`zoo.convert.to_hf.card`), and writes them all at once; for an embed run also the
sentence-transformers modules around the transformer (`zoo.convert.sentence_transformers`).
"""

import os

from zoo.atomic_files import atomic_path
from zoo.choices import HF_POOLING
from zoo.convert.errors import ConversionError
from zoo.convert.sentence_transformers import module_files
from zoo.convert.to_hf.card import model_card
from zoo.convert.to_hf.configs import config_json
from zoo.convert.to_hf.plan import POOLED_HEADS
from zoo.convert.to_hf.plan import Plan
from zoo.convert.to_hf.plan import plan
from zoo.convert.to_hf.pooling_change import measure
from zoo.convert.to_hf.tokenizer import sentencepiece_tokenizer_files
from zoo.convert.to_hf.tokenizer import tokenizer_settings
from zoo.convert.to_hf.tokenizer import wordpiece_tokenizer_files
from zoo.convert.to_hf.weights import restore
from zoo.convert.to_hf.weights import tensors
from zoo.model_dir import ModelDir
from zoo.model_dir import checkpoint_roots

DTYPES = ("float32", "bfloat16")


def _check_paths(directory, out):
  """Raises unless `directory` (a `ModelDir`) has a config.json and `out` is new or empty."""
  if not os.path.isfile(directory.config_path):
    raise FileNotFoundError(f"{directory.config_path}: not found; expected a zoo model directory "
                            "(a tpu.train --model-dir or a zoo.convert output)")
  if os.path.isdir(out) and os.listdir(out):
    raise ValueError(f"{out} exists and is not empty: choose a new --out")


def _read_vocab(directory, plan_):
  """The directory's vocabulary, which must have the encoder's size."""
  vocab = directory.read_vocab()
  if len(vocab) != plan_.encoder["vocab_size"]:
    raise ConversionError(f"{directory.vocab_path} has {len(vocab)} tokens, but config.json says vocab_size="
                          f"{plan_.encoder['vocab_size']}")
  return vocab


def _weights(plan_, settings, prefix, dtype):
  """`({transformers name: array}, the pooling change or None)` of the checkpoint `prefix`, in `dtype`:
  a Funnel exported with other pooling semantics than it trained with (`plan_.changed`) is measured
  (`zoo.convert.to_hf.pooling_change`)."""
  encoder, layers = restore(plan_, settings, prefix)
  arrays = tensors(plan_, encoder, layers)
  change = None
  if plan_.family == "funnel" and encoder.get_config()["pooling_semantics"] != HF_POOLING:
    change = measure(encoder, pooled_head=plan_.head in POOLED_HEADS or not plan_.with_decoder)
  if dtype == "bfloat16":
    import ml_dtypes
    arrays = {name: value.astype(ml_dtypes.bfloat16) for name, value in arrays.items()}
  return arrays, change


def _write(out, arrays, files):
  """Writes `model.safetensors` and `files` (`{name: text or bytes}`) as the directory `out`, complete or
  not at all (written beside it under a temporary name, then renamed)."""
  from safetensors.numpy import save_file
  if os.path.isdir(out):
    os.rmdir(out)   # empty: replaced by the complete directory
  with atomic_path(os.path.abspath(out)) as temporary:
    os.makedirs(temporary)
    save_file(arrays, os.path.join(temporary, "model.safetensors"), metadata={"format": "pt"})
    for name, content in files.items():
      binary = isinstance(content, bytes)
      os.makedirs(os.path.dirname(os.path.join(temporary, name)), exist_ok=True)
      with open(os.path.join(temporary, name), "wb" if binary else "w",
                encoding=None if binary else "utf-8") as file:
        file.write(content)


def to_hf(model_dir: str | os.PathLike[str], out: str, dtype: str = "float32", command: str | None = None,
          change_pooling: bool = False) -> Plan:
  """Writes the model directory `model_dir` as a Hugging Face checkpoint directory `out`; returns the `Plan`.

  `out` must not exist or be empty; it appears complete or not at all (written beside it
  under a temporary name, then renamed).

  Raises:
    ConversionError: what transformers cannot express (nothing is written).
    FileNotFoundError: no config.json, vocabulary or checkpoint in `model_dir`.
    ValueError: an unknown dtype, or `out` is a non-empty directory.
  """
  if dtype not in DTYPES:
    raise ValueError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
  directory = ModelDir(model_dir)
  _check_paths(directory, out)
  settings = directory.read_config()
  prefix = directory.latest_checkpoint()
  plan_ = plan(settings, checkpoint_roots(prefix) if prefix else (), change_pooling)   # refusals first
  if prefix is None:
    raise FileNotFoundError(f"{directory.path} holds no checkpoint in {directory.checkpoint_dir}")
  vocab = _read_vocab(directory, plan_)
  sentencepiece = directory.read_sentencepiece()
  text = tokenizer_settings(settings, vocab, sentencepiece)
  arrays, change = _weights(plan_, settings, prefix, dtype)
  config = config_json(directory, plan_.hf_config, plan_.family, dtype, vocab, text["special_tokens"])
  seq_length = settings.get("seq_length") or 512
  if text.get("kind") == "sentencepiece":
    assert sentencepiece is not None   # tokenizer_settings refuses a SentencePiece kind without its model
    files = sentencepiece_tokenizer_files(sentencepiece, text, seq_length)
  else:
    files = wordpiece_tokenizer_files(vocab, text, plan_.family, seq_length)
  files["config.json"] = config
  if plan_.embedding:   # an embed run: a sentence-transformers folder around the transformer
    width = plan_.hf_config["d_model" if plan_.family == "funnel" else "hidden_size"]
    files.update(module_files(plan_.embedding["pooling"], plan_.embedding["normalize"], width, seq_length,
                              pad_to_max_length=plan_.family == "funnel"))
  command = command or f"python -m zoo.convert to-hf {model_dir} --out {out} --dtype {dtype}"
  files["README.md"] = model_card(directory, settings, plan_, dtype, command, arrays, change)
  _write(out, arrays, files)
  return plan_

"""Writes the fixtures of `tests/zoo/saved_before`: one of each artefact a release of the zoo saves, tiny,
with the outputs that release computes, so that later code can be checked to load them unchanged.

Run with a checkout of the release as the working directory: its `zoo`, `tpu` and `tests` are
imported from there (ahead of any installed copy), whichever checkout holds this script:

    cd RELEASE_CHECKOUT && python PATH/TO/make_fixtures.py OUT_DIR [--archive]

OUT_DIR (new or empty) receives a folder per fixture, each with the artefact and `outputs.npz`
(the inputs it was run on and the outputs the release computed), and `README.md` (the release's
commit, the command, what each folder holds); with `--archive` the folders are packed into one
file, `artefacts.tar.gz` (the h5 weight files and SavedModels are mostly headers: an eighth of
the size on disk):

- `run_funnel_classify/model_dir`, `run_transformer_mlm/model_dir`: model directories as
  `python -m tpu.train` writes them (`tests.model_dirs.write_run`: config.json, vocab.txt, a
  checkpoint of perturbed weights), a sentence-pair Funnel classifier with a decoder and a BERT
  masked-LM run; outputs of the task model and of its encoder.
- `tf_keras_funnel_encoder`: a `zoo.models.FunnelEncoder` saved as `encoder.keras` (tf_keras'
  format) and as a SavedModel (`saved_model`, save_format "tf", without traces: the Keras
  metadata's config is what loads it); `tf_keras_transformer_encoder`: a
  `zoo.models.TransformerEncoder` as a SavedModel.
- `keras3_funnel_encoder`, `keras3_transformer_encoder`: `zoo.keras3` encoders saved by Keras 3
  (JAX) as `encoder.keras`.
- `preset_funnel_backbone`, `preset_transformer_backbone`: keras-hub backbones of the zoo with
  their tokenizers, saved by `save_to_preset`; outputs of the backbone, and the tokenizer's ids of
  `TEXTS`.

The encoders take settings other than their defaults, so that a setting a later version no longer
reads from a saved config changes the outputs. The Keras 3 fixtures are written by this script
again in a process of its own (`--keras3`, `KERAS_BACKEND=jax`): Keras 3 and tf_keras never share
a process.
"""

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tarfile

# The release's packages, from the working directory, ahead of an installed (editable) copy and
# of this script's own folder.
RELEASE = os.getcwd()
sys.path[:] = [RELEASE] + [path for path in sys.path if path not in ("", RELEASE, os.path.dirname(
    os.path.abspath(__file__)))]
# As the test suite runs TensorFlow (tests/conftest.py): tf_keras for TensorFlow's Keras, no oneDNN.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "dog", "##s", "run", ",", "cat", "was",
         "running", "!", "good", "film", ".", "bad", "zebra", "plot", "is", "not", "very", "dull", "great",
         "and", "but", "actor", "##ly"]
TEXTS = ["The dogs run, a cat was running!", "Zebras: very dull films.", "a good [MASK] plot", ""]
SEED = 7
NOISE = 0.2   # the standard deviation of the normal noise added to every weight
# [CLS] the dog ##s [SEP] a cat [SEP]; [CLS] good film . [SEP] + padding; [CLS] [MASK] plot ! [SEP] bad +
# padding: a sentence pair, a single text, and a pair with padding.
WORDS = [[2, 5, 7, 8, 3, 6, 11, 3], [2, 15, 16, 17, 3, 0, 0, 0], [2, 4, 20, 14, 3, 18, 0, 0]]
TYPES = [[0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 1, 0, 0]]
ENCODER_OUTPUTS = ("sequence_output", "pooled_output", "encoder_sequence_output")
TINY = dict(vocab_size=len(VOCAB), hidden_size=8, num_heads=2, intermediate_size=16)
TINY_FUNNEL = dict(TINY, block_sizes=(1, 1), num_decoder_layers=1, seq_length=8)
TINY_TRANSFORMER = dict(TINY, num_layers=1, max_sequence_length=8, seq_length=8)
# The encoders saved as files, each with settings of its own besides the tiny sizes.
ENCODERS = dict(
    tf_keras_funnel_encoder=dict(TINY_FUNNEL, pooling_type="max", residual_attention=True, activation="relu"),
    tf_keras_transformer_encoder=dict(TINY_TRANSFORMER, norm_first=True, residual_attention=True),
    keras3_funnel_encoder=dict(TINY_FUNNEL, pooling_semantics="huggingface", position_encoding="shift",
                               separate_cls=False),
    keras3_transformer_encoder=dict(TINY_TRANSFORMER, position_encoding="factorized", activation="relu"),
    preset_funnel_backbone=dict(TINY_FUNNEL, num_decoder_layers=0, block_repeats=(1, 2), pool_q_only=False),
    preset_transformer_backbone=dict(TINY_TRANSFORMER, num_layers=2, layer_sharing="all",
                                     activation="gelu_approximate"),
)
# The model directories: (zoo preset, overrides, task and its settings, seed).
RUNS = dict(
    run_funnel_classify=("funnel_b4_4_4_decoder",
                         dict(hidden_size=8, num_heads=2, intermediate_size=16, block_sizes=[1, 1],
                              block_repeats=[1, 1], num_decoder_layers=1),
                         dict(task="classify", num_classes=3, label_names=["no", "maybe", "yes"],
                              sentence_pair=True), 3),
    run_transformer_mlm=("bert_small",
                         dict(hidden_size=8, num_heads=2, intermediate_size=16, num_layers=1,
                              max_sequence_length=16),
                         dict(task="mlm"), 4),
)
RUN_LENGTH = 16
ARCHIVE = "artefacts.tar.gz"   # the fixtures' folders, with --archive
MASKED_POSITIONS = [[1, 2, 6], [2, 3, 4], [1, 5, 6]]


def inputs(length=8):
  """The encoder inputs of the fixtures: three examples padded to `length`."""
  words = np.zeros([len(WORDS), length], np.int32)
  types = np.zeros_like(words)
  words[:, :8], types[:, :8] = WORDS, TYPES
  return dict(input_word_ids=words, input_mask=(words > 0).astype(np.int32), input_type_ids=types)


def _save_outputs(folder, features, outputs, **extra):
  np.savez(os.path.join(folder, "outputs.npz"), **features, **extra,
           **{name: np.asarray(value) for name, value in outputs.items() if name in ENCODER_OUTPUTS
              or name in ("logits", "mlm_logits")})


def _token_ids(rows):
  """Ragged token ids as int32 `[N, longest]`, -1 after each row's end."""
  rows = [list(np.asarray(row).reshape(-1)) for row in rows]
  ids = np.full([len(rows), max(1, *map(len, rows))], -1, np.int32)
  for index, row in enumerate(rows):
    ids[index, :len(row)] = row
  return ids


def _perturb(weights, seed):
  rng = np.random.default_rng(seed)
  for weight in weights:
    value = np.asarray(weight.numpy())
    weight.assign(value + rng.normal(0.0, NOISE, value.shape).astype(value.dtype))


def write_tf_keras(out):
  """The model directories and the tf_keras encoders' files."""
  import tensorflow as tf
  import tf_keras as keras

  import zoo.models
  from tests.model_dirs import write_run
  from tpu.config import TrainConfig
  from tpu.tasks import get_task
  from zoo.text import TextEncoder
  for name, (preset, overrides, settings, seed) in RUNS.items():
    folder = os.path.join(out, name)
    path = os.path.join(folder, "model_dir")
    config = TrainConfig(model=preset, model_overrides=overrides, data="demo", model_dir=f"{name}/model_dir",
                         seq_length=RUN_LENGTH, vocab_size=len(VOCAB), **settings).validate()
    model = write_run(path, config, VOCAB, seed=seed)
    features = inputs(RUN_LENGTH)
    extra = dict(texts=np.array(TEXTS))
    extra["text_token_ids"] = _token_ids(TextEncoder(VOCAB, seq_length=RUN_LENGTH).tokenize(
        tf.constant(TEXTS)).to_list())
    given = dict(features)
    if settings["task"] == "mlm":
      given["masked_lm_positions"] = extra["masked_lm_positions"] = np.array(MASKED_POSITIONS, np.int32)
    outputs = model(given, training=False)
    outputs = outputs if isinstance(outputs, dict) else dict(logits=outputs)
    encoder = get_task(config).encoder(model)
    encoded = encoder(features, training=False)
    _save_outputs(folder, features, {**outputs, **{key: encoded[key] for key in ENCODER_OUTPUTS
                                                  if key in encoded}}, **extra)

  for name, cls in (("tf_keras_funnel_encoder", zoo.models.FunnelEncoder),
                    ("tf_keras_transformer_encoder", zoo.models.TransformerEncoder)):
    folder = os.path.join(out, name)
    os.makedirs(folder)
    keras.utils.set_random_seed(SEED)
    encoder = cls(**ENCODERS[name])
    features = inputs()
    encoder(features)
    _perturb(encoder.weights, SEED)
    outputs = encoder(features, training=False)
    if cls is zoo.models.FunnelEncoder:
      encoder.save(os.path.join(folder, "encoder.keras"))
    # Without traces the SavedModel is a fifth of the size (the Keras metadata's configs, the
    # variables) and loads faster: through the configs, as one with traces does when the classes
    # are registered (a config that no longer builds its class fails here, where traces would
    # revive a graph of another class).
    encoder.save(os.path.join(folder, "saved_model"), save_format="tf", save_traces=False)
    _save_outputs(folder, features, outputs)


def write_keras3(out):
  """The Keras 3 encoders' `.keras` files and the keras-hub presets (in a process without tf_keras)."""
  import keras

  import zoo.keras3
  from zoo.keras3.models.funnel.funnel_backbone import FunnelBackbone
  from zoo.keras3.models.funnel.funnel_tokenizer import FunnelTokenizer
  from zoo.keras3.models.transformer.transformer_backbone import TransformerBackbone
  from zoo.keras3.models.transformer.transformer_tokenizer import TransformerTokenizer
  assert keras.backend.backend() == "jax", keras.backend.backend()
  features = inputs()
  for name, cls in (("keras3_funnel_encoder", zoo.keras3.FunnelEncoder),
                    ("keras3_transformer_encoder", zoo.keras3.TransformerEncoder)):
    folder = os.path.join(out, name)
    os.makedirs(folder)
    keras.utils.set_random_seed(SEED)
    encoder = cls(**ENCODERS[name])
    _perturb(encoder.weights, SEED)
    outputs = encoder.predict_on_batch(features)
    encoder.save(os.path.join(folder, "encoder.keras"))
    _save_outputs(folder, features, {key: keras.ops.convert_to_numpy(value) for key, value in outputs.items()
                                     if key in ENCODER_OUTPUTS})

  backbone_inputs = dict(token_ids=features["input_word_ids"], segment_ids=features["input_type_ids"],
                         padding_mask=features["input_mask"])
  for name, backbone_class, tokenizer_class in (
      ("preset_funnel_backbone", FunnelBackbone, FunnelTokenizer),
      ("preset_transformer_backbone", TransformerBackbone, TransformerTokenizer)):
    folder = os.path.join(out, name)
    os.makedirs(folder)
    keras.utils.set_random_seed(SEED)
    backbone = backbone_class(encoder_config=ENCODERS[name])
    _perturb(backbone.weights, SEED)
    outputs = backbone.predict_on_batch(backbone_inputs)
    tokenizer = tokenizer_class(vocabulary=VOCAB)
    backbone.save_to_preset(os.path.join(folder, "preset"))
    tokenizer.save_to_preset(os.path.join(folder, "preset"))
    outputs = {key: keras.ops.convert_to_numpy(value) for key, value in outputs.items()}
    ids = _token_ids(tokenizer(TEXTS))
    _save_outputs(folder, features, outputs, texts=np.array(TEXTS), text_token_ids=ids)


README = """# Artefacts saved by a release

Written by the zoo at commit `{commit}` (`git rev-parse --short HEAD` of the release checkout),
by [`make_fixtures.py`](../make_fixtures.py) with the release checkout as the working directory:

    cd <release checkout> && <venv>/bin/python <this checkout>/tests/zoo/saved_before/make_fixtures.py \\
        {arguments}

[`test_saved_before.py`](../test_saved_before.py) loads each with the current code and compares the
outputs with the ones the release computed. The files are never rewritten by later code: they
stand for what users hold. {where}

| folder | artefact | settings besides the tiny sizes |
|---|---|---|
{rows}

Each folder's `outputs.npz` holds the inputs (`input_word_ids`, `input_mask`, `input_type_ids`,
and `masked_lm_positions` for the masked-LM run), the outputs the release computed
(`sequence_output`, `pooled_output`, `encoder_sequence_output` of the encoders and backbones,
`logits` or `mlm_logits` of the runs' task models) and, where there is a tokenizer, `texts` and
their `text_token_ids` (-1 after each text's end). The tiny sizes: a vocabulary of 30 tokens,
width 8, 2 heads, feed-forward width 16; Funnels of 2 blocks of 1 layer, the encoders' inputs
8 tokens long, the runs' 16.
"""
DESCRIPTIONS = dict(
    run_funnel_classify="`model_dir`: a model directory as `python -m tpu.train` writes it (config.json, "
                        "vocab.txt, checkpoints/), a sentence-pair Funnel classifier with a 1-layer "
                        "decoder; its logits and its encoder's outputs",
    run_transformer_mlm="`model_dir`: a BERT masked-LM run of 1 layer; masked-LM logits at "
                        "`masked_lm_positions` and the encoder's outputs",
    tf_keras_funnel_encoder="a tf_keras `zoo.models.FunnelEncoder` with a 1-layer decoder as `encoder.keras` "
                            "and as a SavedModel (`saved_model`, save_format \"tf\", without traces)",
    tf_keras_transformer_encoder="a tf_keras `zoo.models.TransformerEncoder` of 1 layer as a SavedModel "
                                 "(`saved_model`, without traces)",
    keras3_funnel_encoder="a Keras 3 `zoo.keras3.FunnelEncoder` with a 1-layer decoder as `encoder.keras` "
                          "(JAX)",
    keras3_transformer_encoder="a Keras 3 `zoo.keras3.TransformerEncoder` of 1 layer as `encoder.keras` "
                               "(JAX)",
    preset_funnel_backbone="`preset`: the zoo's keras-hub `FunnelBackbone` (no decoder) and "
                           "`FunnelTokenizer`, `save_to_preset`",
    preset_transformer_backbone="`preset`: the zoo's keras-hub `TransformerBackbone` and "
                                "`TransformerTokenizer`, `save_to_preset`",
)


def _settings(name):
  """The settings of a fixture besides the tiny sizes, as the README's table shows them."""
  if name in RUNS:
    preset, overrides, settings, _ = RUNS[name]
    shown = dict(model=preset, **{key: value for key, value in overrides.items() if key not in TINY})
    shown.update(settings)
  else:
    tiny = TINY_FUNNEL if "funnel" in name else TINY_TRANSFORMER
    shown = {key: value for key, value in ENCODERS[name].items() if tiny.get(key, None) != value}
  return ", ".join(f"`{key}={list(value) if isinstance(value, tuple) else value!r}`".replace("'", '"')
                   for key, value in shown.items())


def write_readme(out, archive):
  try:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=RELEASE, capture_output=True,
                            text=True, check=True).stdout.strip()
  except (OSError, subprocess.CalledProcessError):
    commit = "unknown"
  rows = "\n".join(f"| `{name}` | {text} | {_settings(name)} |" for name, text in DESCRIPTIONS.items())
  arguments = "<this checkout>/tests/zoo/saved_before/fixtures" + (" --archive" if archive else "")
  where = (f"The folders below are packed into `{ARCHIVE}` (`tar xzf {ARCHIVE}` unpacks them; the test "
           "unpacks them into a temporary folder)." if archive else "Each folder below is one fixture.")
  with open(os.path.join(out, "README.md"), "w") as file:
    file.write(README.format(commit=commit, arguments=arguments, where=where, rows=rows))


def pack(out):
  """Moves the fixtures' folders of `out` into one archive, `ARCHIVE`, with neutral owners and times."""
  def neutral(info):
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = 0
    return info

  with open(os.path.join(out, ARCHIVE), "wb") as raw:
    with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as zipped:
      with tarfile.open(fileobj=zipped, mode="w") as tar:
        for name in sorted(DESCRIPTIONS):
          tar.add(os.path.join(out, name), arcname=name, filter=neutral)
  for name in DESCRIPTIONS:
    shutil.rmtree(os.path.join(out, name))


def main(argv):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("out", help="a new or empty folder")
  parser.add_argument("--archive", action="store_true",
                      help=f"pack the fixtures' folders into {ARCHIVE} (an eighth of their size on disk)")
  parser.add_argument("--keras3", action="store_true", help=argparse.SUPPRESS)   # the Keras 3 process
  args = parser.parse_args(argv)
  if args.keras3:
    write_keras3(args.out)
    return
  out = os.path.abspath(args.out)
  if os.path.exists(out) and os.listdir(out):
    raise SystemExit(f"{out} is not empty")
  os.makedirs(out, exist_ok=True)
  env = dict(os.environ, KERAS_BACKEND="jax", CUDA_VISIBLE_DEVICES="",
             PYTHONPATH=os.pathsep.join(filter(None, [RELEASE, os.environ.get("PYTHONPATH")])))
  subprocess.run([sys.executable, os.path.abspath(__file__), out, "--keras3"], cwd=RELEASE, env=env,
                 check=True)
  write_tf_keras(out)
  if args.archive:
    pack(out)
  write_readme(out, args.archive)


if __name__ == "__main__":
  main(sys.argv[1:])

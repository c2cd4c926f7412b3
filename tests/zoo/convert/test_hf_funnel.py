"""zoo.convert against Hugging Face's PyTorch Funnel with random weights (never downloaded).

Each case builds a tiny random `FunnelModel` / `FunnelBaseModel`, saves it with
`save_pretrained`, converts the directory and compares the zoo model's
`sequence_output` with Hugging Face's `last_hidden_state` at real positions, for every
real length from 1 to T in one batch (the converted encoder keeps Hugging Face's
padding semantics).
"""

import itertools
import json
import os

import numpy as np
import pytest
import tensorflow as tf
import torch
import transformers
from safetensors import numpy as safetensors_numpy

from tpu import train
from tpu.config import TrainConfig
from zoo import presets
from zoo.convert import ConversionError
from zoo.convert import load_hf_funnel
from zoo.convert.__main__ import main
from zoo.model_dir import ENCODER_ROOT
from zoo.model_dir import ModelDir

VOCAB, LENGTH = 50, 16
TOLERANCE = 1e-4
TINY = dict(vocab_size=VOCAB, d_model=32, n_head=4, d_head=8, d_inner=64, hidden_dropout=0.0,
            attention_dropout=0.0, activation_dropout=0.0)
# A repeat in block 0 (so Hugging Face's decoder input, hidden_states[block_sizes[0]], is
# not the last application of block 0), a block of two layers, and a repeat in the last block.
BLOCKS = dict(block_sizes=[1, 2, 1], block_repeats=[2, 1, 2], num_decoder_layers=2)


@pytest.fixture
def hf_funnel(tmp_path):
  """Factory: `make(decoder=True, **config) -> (checkpoint directory, eval-mode HF model)`."""
  def make(decoder=True, seed=0, **overrides):
    config = transformers.FunnelConfig(**{**TINY, **BLOCKS, **overrides})
    torch.manual_seed(seed)
    model_class = transformers.FunnelModel if decoder else transformers.FunnelBaseModel
    model = model_class(config).eval()
    path = tmp_path / model_class.__name__
    model.save_pretrained(path, safe_serialization=True)
    return str(path), model
  return make


def hf_reference(model, inputs, output_hidden_states=False):
  """Hugging Face's outputs for the zoo's input dict (types: [cls] = 2)."""
  with torch.no_grad():
    return model(input_ids=torch.from_numpy(inputs["input_word_ids"]).long(),
                 attention_mask=torch.from_numpy(inputs["input_mask"]).long(),
                 token_type_ids=torch.from_numpy(inputs["input_type_ids"]).long(),
                 output_hidden_states=output_hidden_states)


def make_inputs(separate_cls, seed=0):
  """One row per real length 1 .. T: every way padding can split the pooling windows.

  Padded positions get real word ids, so only the mask hides them. `separate_cls` is
  unused: the lengths cover both window grids.
  """
  del separate_cls
  rng = np.random.default_rng(seed)
  lengths = np.arange(1, LENGTH + 1)
  mask = (np.arange(LENGTH)[None, :] < lengths[:, None]).astype(np.int32)
  types = np.zeros([LENGTH, LENGTH], np.int32)
  types[:, 6:] = 1
  types[:, 0] = 2
  return dict(input_word_ids=rng.integers(1, VOCAB, size=[LENGTH, LENGTH]).astype(np.int32),
              input_mask=mask, input_type_ids=types)


def hf_pooled_mask(mask, steps, separate_cls, truncate_seq):
  """The mask after `steps` poolings as Hugging Face pools it (`pool_tensor(mode="min")`)."""
  mask = mask.astype(np.float32)
  for _ in range(steps):
    if separate_cls:
      mask = np.concatenate([mask[:, :1], mask[:, :-1] if truncate_seq else mask], axis=1)
    if mask.shape[1] % 2:
      mask = np.concatenate([mask, mask[:, -1:]], axis=1)
    mask = mask.reshape(mask.shape[0], -1, 2).min(axis=-1)
  return mask


def max_difference(actual, expected, mask, config):
  """Largest |zoo - HF| over real positions of `[B, T or T', D]` outputs (shapes must agree).

  Pooled outputs (length below the input's) are compared at the positions Hugging
  Face's pooled mask keeps, which always include the first ([cls]) with `separate_cls`.
  Without `separate_cls`, a row with fewer real tokens than a window of the last block
  pools to all padding there (the mask's minimum): no key is real, and Hugging Face's
  softmax then runs on `scores - 1e6`, the scores rounded to 1/16 in float32, which no
  other arithmetic reproduces. Such rows (real length below `2^(blocks - 1)`) are left out.
  """
  actual, expected = np.asarray(actual), np.asarray(expected)
  assert actual.shape == expected.shape
  steps = 0 if actual.shape[1] == mask.shape[1] else len(config.block_sizes) - 1
  real = hf_pooled_mask(mask, steps, config.separate_cls, config.truncate_seq) > 0
  last = hf_pooled_mask(mask, len(config.block_sizes) - 1, config.separate_cls, config.truncate_seq)
  rows = last.max(axis=1) > 0
  assert rows.all() if config.separate_cls else rows.sum() == LENGTH - 2 ** (len(config.block_sizes) - 1) + 1
  assert real[rows, 0].all() and not real.all()   # the padded rows really are padded
  return np.abs(actual - expected)[rows][real[rows]].max()


def encoder_applications(config):
  return sum(size * repeat for size, repeat in zip(config.block_sizes, config.block_repeats, strict=True))


FLAGS = ("attention_type", "separate_cls", "truncate_seq", "pool_q_only", "pooling_type")
# Run by default: every value of every flag under both attention forms, including the
# shift form without separate_cls under pooled queries (where the authors' rel-shift
# code is off by one; Hugging Face's is not). The other combinations are marked slow.
FAST = {
    ("factorized", True, True, True, "mean"),
    ("factorized", True, False, False, "max"),
    ("factorized", False, True, False, "mean"),
    ("factorized", False, False, True, "max"),
    ("relative_shift", True, True, False, "max"),
    ("relative_shift", True, False, True, "mean"),
    ("relative_shift", False, True, True, "max"),
    ("relative_shift", False, False, False, "mean"),
}


def _name(values):
  attention_type, separate_cls, truncate_seq, pool_q_only, pooling_type = values
  return "-".join([attention_type, "cls" if separate_cls else "nocls", "trunc" if truncate_seq else "notrunc",
                   "qonly" if pool_q_only else "qkv", pooling_type])


def _grid():
  for values in itertools.product(("factorized", "relative_shift"), (True, False), (True, False),
                                  (True, False), ("mean", "max")):
    marks = () if values in FAST else (pytest.mark.slow,)
    yield pytest.param(dict(zip(FLAGS, values, strict=True)), marks=marks, id=_name(values))


@pytest.mark.parametrize("flags", _grid())
def test_funnel_model_matches_hugging_face(hf_funnel, flags):
  """A FunnelModel checkpoint: the decoder output, and the encoder output below it.

  The encoder output is what the FunnelBaseModel of the same weights returns (Hugging
  Face runs the same code for both), so one zoo model checks with and without decoder.
  """
  path, hf_model = hf_funnel(decoder=True, **flags)
  zoo_model = load_hf_funnel(path, seq_length=LENGTH)
  assert zoo_model.get_config()["num_decoder_layers"] == BLOCKS["num_decoder_layers"]
  inputs = make_inputs(flags["separate_cls"])
  expected = hf_reference(hf_model, inputs, output_hidden_states=True)
  actual = zoo_model(inputs, training=False)
  config, mask = hf_model.config, inputs["input_mask"]
  assert max_difference(actual["sequence_output"], expected.last_hidden_state, mask, config) < TOLERANCE
  encoder_output = expected.hidden_states[encoder_applications(config)]
  assert max_difference(actual["encoder_sequence_output"], encoder_output, mask, config) < TOLERANCE


@pytest.mark.parametrize("flags", [
    pytest.param(dict(zip(FLAGS, values, strict=True)), id=_name(values)) for values in
    [("factorized", True, True, True, "mean"), ("relative_shift", False, False, False, "max")]
])
def test_funnel_base_model_matches_hugging_face(hf_funnel, flags):
  path, hf_model = hf_funnel(decoder=False, **flags)
  zoo_model = load_hf_funnel(path, seq_length=LENGTH)
  assert zoo_model.get_config()["num_decoder_layers"] == 0
  inputs = make_inputs(flags["separate_cls"])
  expected = hf_reference(hf_model, inputs).last_hidden_state
  actual = zoo_model(inputs, training=False)["sequence_output"]
  assert max_difference(actual, expected, inputs["input_mask"], hf_model.config) < TOLERANCE


@pytest.mark.parametrize("hidden_act", ["gelu", "relu", "gelu_pytorch_tanh", "silu"])
def test_activations_epsilon_and_head_width(hf_funnel, hidden_act):
  # gelu_new is the grid's. A large epsilon shows it is mapped; N·H = 24 != D = 32.
  path, hf_model = hf_funnel(hidden_act=hidden_act, layer_norm_eps=0.1, d_head=6, block_sizes=[2, 1],
                             block_repeats=[1, 3], num_decoder_layers=1)
  zoo_model = load_hf_funnel(path, seq_length=LENGTH)
  inputs = make_inputs(separate_cls=True)
  expected = hf_reference(hf_model, inputs).last_hidden_state
  actual = zoo_model(inputs, training=False)["sequence_output"]
  assert max_difference(actual, expected, inputs["input_mask"], hf_model.config) < TOLERANCE


def test_blocks_of_several_repeated_layers_run_each_layer_back_to_back(hf_funnel):
  # B2x2-2x2 with a decoder: each layer runs its repeats in a row (L0 L0 L1 L1).
  path, hf_model = hf_funnel(block_sizes=[2, 2], block_repeats=[2, 2], num_decoder_layers=1)
  zoo_model = load_hf_funnel(path, seq_length=LENGTH)
  inputs = make_inputs(separate_cls=True)
  expected = hf_reference(hf_model, inputs).last_hidden_state
  actual = zoo_model(inputs, training=False)["sequence_output"]
  assert max_difference(actual, expected, inputs["input_mask"], hf_model.config) < TOLERANCE


def test_without_decoder_keeps_the_encoder_of_a_funnel_model(hf_funnel):
  path, hf_model = hf_funnel(decoder=True)
  zoo_model = load_hf_funnel(path, seq_length=LENGTH, with_decoder=False)
  assert zoo_model.get_config()["num_decoder_layers"] == 0
  inputs = make_inputs(separate_cls=True)
  hidden_states = hf_reference(hf_model, inputs, output_hidden_states=True).hidden_states
  expected = hidden_states[encoder_applications(hf_model.config)]
  actual = zoo_model(inputs, training=False)["sequence_output"]
  assert max_difference(actual, expected, inputs["input_mask"], hf_model.config) < TOLERANCE


def _edit_config(path, **changes):
  config_path = os.path.join(path, "config.json")
  with open(config_path) as f:
    config = json.load(f)
  for key, value in changes.items():
    if value is None:
      del config[key]
    else:
      config[key] = value
  with open(config_path, "w") as f:
    json.dump(config, f)


def _edit_weights(path, edit):
  weights_path = os.path.join(path, "model.safetensors")
  weights = safetensors_numpy.load_file(weights_path)
  edit(weights)
  safetensors_numpy.save_file(weights, weights_path)


R_KERNEL = "encoder.blocks.1.0.attention.r_kernel"
SEG_EMBED = "decoder.layers.1.attention.seg_embed"


@pytest.mark.parametrize("config_changes, message", [
    (dict(attention_type="sliding"),
     "attention_type='sliding' must be one of ['factorized', 'relative_shift']"),
    (dict(pooling_type="min"), "pooling_type='min' must be one of ['mean', 'max']"),
    (dict(hidden_act="gelu_fast"), "hidden_act='gelu_fast' is not supported"),
    (dict(d_head=None), "missing config field(s) d_head"),
    (dict(model_type="bert"), "model_type must be 'funnel', got 'bert'"),
], ids=["attention_type", "pooling_type", "hidden_act", "missing_field", "model_type"])
def test_config_errors(hf_funnel, config_changes, message):
  path, _ = hf_funnel(decoder=False)
  _edit_config(path, **config_changes)
  with pytest.raises(ConversionError, match="config.json: ") as error:
    load_hf_funnel(path, seq_length=LENGTH)
  assert message in str(error.value)


@pytest.mark.parametrize("edit, message", [
    (lambda w: w.pop(R_KERNEL), f"missing weight(s): {R_KERNEL}"),
    (lambda w: w.update({"lm_head.weight": np.zeros([VOCAB, 32], np.float32)}),
     "unexpected weight(s): lm_head.weight"),
    (lambda w: w.update({SEG_EMBED: np.zeros([3, 4, 8], np.float32)}),
     f"{SEG_EMBED} has shape (3, 4, 8), expected (2, 4, 8)"),
], ids=["missing", "unexpected", "shape"])
def test_weight_errors(hf_funnel, edit, message):
  path, _ = hf_funnel(decoder=True)
  _edit_weights(path, edit)
  with pytest.raises(ConversionError, match="model.safetensors: ") as error:
    load_hf_funnel(path, seq_length=LENGTH)
  assert message in str(error.value)


def test_a_decoder_needs_decoder_weights(hf_funnel):
  path, _ = hf_funnel(decoder=False)
  with pytest.raises(ConversionError, match=r"missing weight\(s\): decoder\.layers\.0\.attention\.q_head"):
    load_hf_funnel(path, seq_length=LENGTH, with_decoder=True)


@pytest.mark.slow
def test_cli_writes_a_checkpoint_that_rebuilds(hf_funnel, tmp_path, capsys):
  path, hf_model = hf_funnel(decoder=True, attention_type="factorized")
  with open(os.path.join(path, "vocab.txt"), "w") as f:
    f.write("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n")
  out = str(tmp_path / "zoo")
  assert main(["hf-funnel", path, "--out", out, "--seq-length", str(LENGTH)]) == 0
  assert "wrote" in capsys.readouterr().out
  # The vocabulary travels with the weights.
  assert ModelDir(out).read_vocab() == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the"]

  # The output is a model directory: its config.json rebuilds the encoder through a preset.
  config = TrainConfig.from_model_dir(out)
  assert config.model.startswith("funnel_") and config.seq_length == LENGTH and config.vocab_size == VOCAB
  source = ModelDir(out).read_source()
  with open(os.path.join(path, "config.json")) as file:   # kept for to-hf to give back
    assert source.pop("hf_config") == json.load(file)
  assert source == dict(format="hf-funnel", path=os.path.abspath(path))
  rebuilt = presets.build(config.model, **config.model_overrides, seq_length=LENGTH, vocab_size=VOCAB)
  assert rebuilt.get_config() == dict(load_hf_funnel(path, seq_length=LENGTH).get_config(), name=rebuilt.name)
  tf.train.Checkpoint(**{ENCODER_ROOT: rebuilt}).restore(ModelDir(out).latest_checkpoint()).assert_consumed()
  inputs = make_inputs(separate_cls=True)
  actual = rebuilt(inputs, training=False)["sequence_output"]
  expected = hf_reference(hf_model, inputs).last_hidden_state
  assert max_difference(actual, expected, inputs["input_mask"], hf_model.config) < TOLERANCE
  direct = load_hf_funnel(path, seq_length=LENGTH)(inputs, training=False)
  np.testing.assert_array_equal(actual, direct["sequence_output"])


@pytest.mark.slow
def test_a_converted_directory_fine_tunes_without_model(hf_funnel, tmp_path):
  """`tpu.train --init-checkpoint DIR` takes the encoder, vocabulary and casing from a converted DIR."""
  path, _ = hf_funnel(decoder=False)
  words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "film", "was", "good", "bad"]
  with open(os.path.join(path, "vocab.txt"), "w") as f:
    f.write("".join(f"{token}\n" for token in words + [f"word{i}" for i in range(VOCAB - len(words))]))
  out = str(tmp_path / "converted")
  assert main(["hf-funnel", path, "--out", out, "--seq-length", str(LENGTH)]) == 0
  converted = TrainConfig.from_model_dir(out)
  run = dict(task="classify", data="demo", steps=2, batch_size=4, eval_batch_size=100, seq_length=LENGTH,
             export=False, init_checkpoint=out, checkpoint_every=2)
  results = train.run(TrainConfig(model_dir=str(tmp_path / "run"), **run))
  assert results["examples"] == 500
  trained = TrainConfig.from_model_dir(str(tmp_path / "run"))
  assert (trained.model, trained.model_overrides) == (converted.model, converted.model_overrides)
  assert trained.vocab_size == VOCAB and trained.lower_case is True
  with pytest.raises(ValueError, match=r"does not match: .*hidden_size: 32 in the checkpoint, 1024 here"):
    train.run(TrainConfig(model_dir=str(tmp_path / "other"), model=converted.model, **run))


def test_cli_reports_errors_on_stderr(hf_funnel, tmp_path, capsys):
  path, _ = hf_funnel(decoder=False)
  _edit_config(path, separate_cls="yes")
  out = tmp_path / "zoo"
  capsys.readouterr()   # drop what saving the HF model printed
  assert main(["hf-funnel", path, "--out", str(out), "--seq-length", str(LENGTH)]) == 1
  captured = capsys.readouterr()
  assert captured.out == ""
  assert captured.err.startswith("zoo.convert: error: ")
  assert "separate_cls='yes' must be true or false" in captured.err
  assert not out.exists()


def test_cli_help(capsys):
  with pytest.raises(SystemExit) as exit_info:
    main(["hf-funnel", "--help"])
  assert exit_info.value.code == 0
  assert "--seq-length" in capsys.readouterr().out


@pytest.mark.parametrize("model_class", [transformers.FunnelForMaskedLM, transformers.FunnelForPreTraining])
def test_pre_training_models_convert_their_encoder_and_their_head(tmp_path, model_class):
  """The masked-LM head's logits and the discriminator's logits equal Hugging Face's (real tokens, every
  real length), through the zoo's pre-training models built as a run builds them."""
  from zoo import models
  from zoo.convert.hf_funnel import convert_hf_funnel
  from zoo.model_dir import DISCRIMINATOR_HEAD_ROOT
  from zoo.model_dir import MASKED_LM_ROOT
  torch.manual_seed(0)
  model = model_class(transformers.FunnelConfig(**{**TINY, **BLOCKS, "hidden_act": "gelu_new"})).eval()
  model.save_pretrained(tmp_path / "hf", safe_serialization=True)
  converted = convert_hf_funnel(str(tmp_path / "hf"), seq_length=LENGTH)
  assert converted.dropped == []
  inputs = make_inputs(separate_cls=True)
  real = inputs["input_mask"] > 0
  actual = converted.encoder(inputs, training=False)["sequence_output"]
  expected = hf_reference(model.funnel, inputs).last_hidden_state
  assert max_difference(actual, expected, inputs["input_mask"], model.config) < TOLERANCE
  with torch.no_grad():
    hf_logits = model(input_ids=torch.from_numpy(inputs["input_word_ids"]).long(),
                      attention_mask=torch.from_numpy(inputs["input_mask"]).long(),
                      token_type_ids=torch.from_numpy(inputs["input_type_ids"]).long()).logits.numpy()
  if model_class is transformers.FunnelForMaskedLM:
    assert converted.settings == dict(mlm_transform=False) and list(converted.heads) == [MASKED_LM_ROOT]
    pretrainer = models.MaskedLMPretrainer(converted.encoder, mlm_transform=False)
    tf.train.Checkpoint(masked_lm=pretrainer.masked_lm).read(
        tf.train.Checkpoint(masked_lm=converted.heads[MASKED_LM_ROOT]).write(str(tmp_path / "head")))
    positions = np.tile(np.arange(LENGTH, dtype=np.int32), [LENGTH, 1])
    logits = pretrainer(dict(inputs, masked_lm_positions=positions), training=False)["mlm_logits"].numpy()
    assert logits.shape == hf_logits.shape == (LENGTH, LENGTH, VOCAB)
  else:
    assert converted.settings == dict(head_activation="gelu_approximate")
    assert list(converted.heads) == [DISCRIMINATOR_HEAD_ROOT]
    generator_config = dict(converted.encoder.get_config(), name="generator")
    generator = converted.encoder.__class__.from_config(generator_config)
    electra = models.ElectraPretrainer(generator, converted.encoder, activation="gelu_approximate")
    tf.train.Checkpoint(head=electra.checkpoint_items[DISCRIMINATOR_HEAD_ROOT]).read(
        tf.train.Checkpoint(head=converted.heads[DISCRIMINATOR_HEAD_ROOT]).write(str(tmp_path / "head")))
    disc_sequence = converted.encoder(inputs, training=False)["sequence_output"]
    logits = electra.disc_scores(electra.disc_transform(disc_sequence))[:, :, 0].numpy()
  assert np.abs(logits - hf_logits)[real].max() < TOLERANCE

  classifier = transformers.FunnelForSequenceClassification(transformers.FunnelConfig(**{**TINY, **BLOCKS}))
  classifier.save_pretrained(tmp_path / "classifier", safe_serialization=True)
  with pytest.raises(ConversionError, match=r"unexpected weight\(s\): classifier\..*a head of a FunnelFor"):
    convert_hf_funnel(str(tmp_path / "classifier"), seq_length=LENGTH)

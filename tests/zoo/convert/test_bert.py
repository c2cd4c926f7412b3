"""zoo.convert hf-bert and tf1-bert against Hugging Face's PyTorch BERT with random weights.

Nothing is downloaded.

Each case builds a tiny random `BertModel` / `BertForPreTraining`, saves it with
`save_pretrained` and, for the TF1 layout, writes the same weights under Google's
`bert/encoder/layer_N/...` names with a TF1 `Saver` (kernels `[in, out]`), then
compares the zoo's outputs with Hugging Face's.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
import torch
import transformers

from tpu.config import TrainConfig
from zoo import presets
from zoo.convert import ConversionError
from zoo.convert import load_hf_bert
from zoo.convert import load_tf1_bert
from zoo.convert.__main__ import main
from zoo.convert.bert import convert_hf_bert
from zoo.convert.bert import convert_tf1_bert
from zoo.model_dir import ENCODER_ROOT
from zoo.model_dir import MASKED_LM_ROOT
from zoo.model_dir import ModelDir
from zoo.model_dir import checkpoint_roots

VOCAB, LENGTH = 40, 16
TOLERANCE = 1e-4
TINY = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=64, max_position_embeddings=LENGTH * 2, type_vocab_size=2,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0)


@pytest.fixture
def hf_bert(tmp_path):
  """Factory: `make(pretraining=False, **config) -> (checkpoint directory, eval-mode BertModel)`."""
  def make(pretraining=False, seed=0, **overrides):
    config = transformers.BertConfig(**{**TINY, **overrides})
    torch.manual_seed(seed)
    model_class = transformers.BertForPreTraining if pretraining else transformers.BertModel
    model = model_class(config).eval()
    path = tmp_path / model_class.__name__
    model.save_pretrained(path, safe_serialization=True)
    return str(path), (model.bert if pretraining else model)
  return make


def tf1_name(hf_name):
  """Google's TF1 name of a Hugging Face BertModel weight, and whether its value is transposed."""
  name = hf_name.replace("encoder.layer.", "encoder.layer_").replace(".", "/")
  if name.endswith("LayerNorm/weight"):
    return "bert/" + name[:-len("weight")] + "gamma", False
  if name.endswith("LayerNorm/bias"):
    return "bert/" + name[:-len("bias")] + "beta", False
  if name.startswith("embeddings/"):
    return "bert/" + name[:-len("/weight")], False
  if name.endswith("/weight"):
    return "bert/" + name[:-len("weight")] + "kernel", True
  return "bert/" + name, False


def save_tf1_checkpoint(values, prefix):
  """Saves `{name: array}` as a TF1 checkpoint (a `tf.compat.v1.train.Saver`'s, as the TF1 releases are)."""
  with tf.Graph().as_default():
    variables = [tf.compat.v1.Variable(value, name=name) for name, value in values.items()]
    saver = tf.compat.v1.train.Saver(variables)
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      saver.save(session, prefix, write_meta_graph=False)


def write_tf1(model, directory, hidden_act="gelu", extra=None):
  """Writes `model`'s weights as Google's TF1 release: bert_config.json and bert_model.ckpt."""
  os.makedirs(directory, exist_ok=True)
  values = {}
  for name, value in model.state_dict().items():
    if name.endswith("position_ids"):
      continue
    tf1, transpose = tf1_name(name)
    values[tf1] = value.numpy().T if transpose else value.numpy()
  values.update(extra or {})
  save_tf1_checkpoint(values, os.path.join(directory, "bert_model.ckpt"))
  config = {key: getattr(model.config, key) for key in TINY}
  config.update(hidden_act=hidden_act, initializer_range=0.02)
  with open(os.path.join(directory, "bert_config.json"), "w") as file:
    json.dump(config, file)
  return directory


def make_inputs(seed=0):
  rng = np.random.default_rng(seed)
  mask = np.ones([3, LENGTH], np.int32)
  mask[1, 9:] = 0
  mask[2, 4:] = 0
  types = np.zeros([3, LENGTH], np.int32)
  types[:, 6:] = 1
  return dict(input_word_ids=rng.integers(1, VOCAB, size=[3, LENGTH]).astype(np.int32), input_mask=mask,
              input_type_ids=types * mask)


def reference(model, inputs):
  with torch.no_grad():
    return model(input_ids=torch.from_numpy(inputs["input_word_ids"]).long(),
                 attention_mask=torch.from_numpy(inputs["input_mask"]).long(),
                 token_type_ids=torch.from_numpy(inputs["input_type_ids"]).long())


def differences(encoder, hf_model, inputs):
  """Max |zoo - HF| of the sequence output at real tokens and of the pooled output."""
  outputs = encoder(inputs, training=False)
  expected = reference(hf_model, inputs)
  real = inputs["input_mask"].astype(bool)
  sequence = np.abs(outputs["sequence_output"].numpy() - expected.last_hidden_state.numpy())[real].max()
  pooled = np.abs(outputs["pooled_output"].numpy() - expected.pooler_output.numpy()).max()
  return sequence, pooled


@pytest.mark.parametrize("pretraining", [False, True], ids=["BertModel", "BertForPreTraining"])
@pytest.mark.parametrize("hidden_act", ["gelu", "gelu_new", "relu"])
def test_hf_bert_matches_hugging_face(hf_bert, pretraining, hidden_act):
  path, hf_model = hf_bert(pretraining=pretraining, hidden_act=hidden_act, layer_norm_eps=1e-7)
  encoder = load_hf_bert(path, seq_length=LENGTH)
  assert encoder.get_config()["layer_norm_epsilon"] == 1e-7
  sequence, pooled = differences(encoder, hf_model, make_inputs())
  assert sequence < TOLERANCE and pooled < TOLERANCE, (sequence, pooled)


def test_tf1_bert_matches_hugging_face(hf_bert, tmp_path):
  """Google's "gelu" is the tanh form: Hugging Face's "gelu_new" is the reference."""
  _, hf_model = hf_bert(hidden_act="gelu_new")
  extra = {"cls/seq_relationship/output_bias": np.zeros([2], np.float32), "global_step": np.int64(7),
           "bert/encoder/layer_0/output/dense/kernel/adam_m": np.zeros([64, 32], np.float32)}
  src = write_tf1(hf_model, str(tmp_path / "uncased_L-2_H-32_A-4"), extra=extra)
  encoder = load_tf1_bert(src, seq_length=LENGTH)
  assert encoder.get_config()["activation"] == "gelu_approximate"
  sequence, pooled = differences(encoder, hf_model, make_inputs())
  assert sequence < TOLERANCE and pooled < TOLERANCE, (sequence, pooled)
  # The checkpoint prefix works as well as the directory.
  same = load_tf1_bert(os.path.join(src, "bert_model.ckpt"), seq_length=LENGTH)
  np.testing.assert_array_equal(same.get_layer("pooler").kernel.numpy(),
                                encoder.get_layer("pooler").kernel.numpy())


def test_the_first_checkpoints_layer_norm_names(hf_bert):
  """`bert-base-uncased` names its layer norms `LayerNorm.gamma`/`beta`, as transformers still reads them."""
  path, hf_model = hf_bert(pretraining=True)
  _edit_safetensors(path, lambda w: w.update({
      name.replace(".weight", ".gamma").replace(".bias", ".beta"): w.pop(name)
      for name in [name for name in w if "LayerNorm" in name]}))
  assert max(differences(load_hf_bert(path, seq_length=LENGTH), hf_model, make_inputs())) < TOLERANCE


def test_realformer_checkpoints_load_with_residual_attention(hf_bert, tmp_path):
  _, hf_model = hf_bert()
  src = write_tf1(hf_model, str(tmp_path / "realformer"))
  encoder = load_tf1_bert(src, seq_length=LENGTH, residual_attention=True)
  name, overrides = presets.match("TransformerEncoder", encoder.get_config())
  assert name.startswith("realformer_") and "residual_attention" not in overrides
  running = load_tf1_bert(src, seq_length=LENGTH, residual_attention=True, running_mean=True)
  assert running.get_config()["running_mean"] is True
  with pytest.raises(ConversionError, match="running_mean needs residual_attention"):
    load_tf1_bert(src, seq_length=LENGTH, running_mean=True)


def _edit_safetensors(path, edit):
  from safetensors import numpy as safetensors_numpy
  file = os.path.join(path, "model.safetensors")
  weights = dict(safetensors_numpy.load_file(file))
  edit(weights)
  safetensors_numpy.save_file(weights, file, metadata={"format": "pt"})


QUERY = "encoder.layer.1.attention.self.query.weight"


@pytest.mark.parametrize("edit, message", [
    (lambda w: w.pop(QUERY), f"missing weight(s): {QUERY}"),
    (lambda w: w.update({"extra.weight": np.zeros([2], np.float32)}), "unexpected weight(s): extra.weight"),
    (lambda w: w.update({QUERY: np.zeros([32, 16], np.float32)}),
     f"{QUERY} has shape (32, 16), expected (32, 32)"),
], ids=["missing", "unexpected", "shape"])
def test_hf_weight_errors(hf_bert, edit, message):
  path, _ = hf_bert()
  _edit_safetensors(path, edit)
  with pytest.raises(ConversionError, match="model.safetensors: ") as error:
    load_hf_bert(path, seq_length=LENGTH)
  assert message in str(error.value)


def test_tf1_weight_errors(hf_bert, tmp_path):
  _, hf_model = hf_bert()
  extra = "bert/encoder/layer_9/output/dense/bias"
  src = write_tf1(hf_model, str(tmp_path / "tf1"), extra={extra: np.zeros([32], np.float32)})
  with pytest.raises(ConversionError, match=rf"unexpected weight\(s\): {extra}"):
    load_tf1_bert(src, seq_length=LENGTH)


@pytest.mark.parametrize("changes, message", [
    (dict(position_embedding_type="relative_key"), "position_embedding_type='relative_key' is not supported"),
    (dict(hidden_act="mish"), "hidden_act='mish' is not supported"),
    (dict(is_decoder=True), "is_decoder=True is not supported"),
    (dict(model_type="funnel"), "model_type must be 'bert'"),
], ids=["positions", "activation", "decoder", "model_type"])
def test_hf_config_errors(hf_bert, changes, message):
  path, _ = hf_bert()
  with open(os.path.join(path, "config.json")) as file:
    config = json.load(file)
  config.update(changes)
  with open(os.path.join(path, "config.json"), "w") as file:
    json.dump(config, file)
  with pytest.raises(ConversionError, match="config.json: ") as error:
    load_hf_bert(path, seq_length=LENGTH)
  assert message in str(error.value)


def write_vocab(path, tokens):
  with open(os.path.join(path, "vocab.txt"), "w") as file:
    file.write("".join(f"{token}\n" for token in tokens))


BERT_WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "dog", "cat", "run", "##s", "##ning",
              "film", "was", "is", "good", "bad", ".", ",", "!"]


def bert_vocab():
  return BERT_WORDS + [f"word{i}" for i in range(VOCAB - len(BERT_WORDS))]


def test_cli_hf_bert_writes_the_tokenizer_settings(hf_bert, tmp_path, capsys):
  path, hf_model = hf_bert(pretraining=True)
  write_vocab(str(tmp_path), bert_vocab())
  transformers.BertTokenizer(str(tmp_path / "vocab.txt"), do_lower_case=False).save_pretrained(path)
  out = str(tmp_path / "zoo")
  assert main(["hf-bert", path, "--out", out, "--seq-length", str(LENGTH)]) == 0
  config = TrainConfig.from_model_dir(out)
  assert config.model.startswith("bert_") and config.lower_case is False
  assert config.tokenizer == dict(special_tokens=dict(pad="[PAD]", unk="[UNK]", cls="[CLS]", sep="[SEP]",
                                                      mask="[MASK]"), cls_type_id=0, max_chars_per_word=100,
                                  truncator="longest_first")
  # From tokenizer.json: transformers 5 writes no vocab.txt.
  assert ModelDir(out).read_vocab() == bert_vocab()
  source = ModelDir(out).read_source()
  assert source["format"] == "hf-bert"
  assert source["dropped"] == ["cls.seq_relationship.bias", "cls.seq_relationship.weight"]
  assert MASKED_LM_ROOT in checkpoint_roots(ModelDir(out).latest_checkpoint())
  rebuilt = presets.build(config.model, **config.model_overrides, seq_length=LENGTH, vocab_size=VOCAB)
  checkpoint = tf.train.Checkpoint(**{ENCODER_ROOT: rebuilt}).restore(ModelDir(out).latest_checkpoint())
  checkpoint.assert_existing_objects_matched()   # and the masked-LM head beside it
  assert max(differences(rebuilt, hf_model, make_inputs())) < TOLERANCE


def test_cli_tf1_bert(hf_bert, tmp_path):
  _, hf_model = hf_bert()
  src = write_tf1(hf_model, str(tmp_path / "cased_L-2_H-32_A-4"))
  write_vocab(src, bert_vocab())
  out = str(tmp_path / "zoo")
  assert main(["tf1-bert", src, "--out", out, "--seq-length", str(LENGTH), "--residual-attention"]) == 0
  config = TrainConfig.from_model_dir(out)
  assert config.model.startswith("realformer_") and config.lower_case is False   # "cased_" directory
  assert config.tokenizer["max_chars_per_word"] == 200
  assert main(["tf1-bert", src, "--out", str(tmp_path / "uncased"), "--uncased", "--seq-length", "8"]) == 0
  assert TrainConfig.from_model_dir(str(tmp_path / "uncased")).lower_case is True


def test_cli_errors(hf_bert, tmp_path, capsys):
  path, _ = hf_bert()
  capsys.readouterr()
  assert main(["hf-bert", path, "--out", str(tmp_path / "zoo"), "--seq-length", str(LENGTH)]) == 1
  assert "no vocab.txt" in capsys.readouterr().err
  assert main(["tf1-bert", str(tmp_path / "nowhere"), "--out", str(tmp_path / "zoo")]) == 1
  err = capsys.readouterr().err
  assert f"{tmp_path / 'nowhere'}: no such directory or checkpoint prefix: tf1-bert converts" in err
  assert not (tmp_path / "zoo").exists()


def mlm_logits(converted, inputs, positions):
  sequence = converted.encoder(inputs, training=False)["sequence_output"]
  return converted.heads["masked_lm"](sequence, masked_positions=positions).numpy()


def hf_mlm_logits(model, inputs, positions):
  with torch.no_grad():
    logits = model(input_ids=torch.from_numpy(inputs["input_word_ids"]).long(),
                   attention_mask=torch.from_numpy(inputs["input_mask"]).long(),
                   token_type_ids=torch.from_numpy(inputs["input_type_ids"]).long()).prediction_logits.numpy()
  return np.take_along_axis(logits, positions[:, :, None], axis=1)


def test_the_masked_lm_head_matches_hugging_face(tmp_path):
  """BertForPreTraining's prediction head, from safetensors and from the TF1 layout."""
  torch.manual_seed(2)
  model = transformers.BertForPreTraining(transformers.BertConfig(**TINY, hidden_act="gelu_new")).eval()
  with torch.no_grad():   # a non-zero output bias
    model.cls.predictions.bias.normal_()
  model.save_pretrained(tmp_path / "hf", safe_serialization=True)
  inputs, positions = make_inputs(), np.array([[1, 2], [3, 8], [0, 3]], np.int32)
  expected = hf_mlm_logits(model, inputs, positions)
  converted = convert_hf_bert(str(tmp_path / "hf"), seq_length=LENGTH)
  assert np.abs(mlm_logits(converted, inputs, positions) - expected).max() < TOLERANCE

  head = {name: value.numpy() for name, value in model.cls.state_dict().items()}
  extra = {"cls/predictions/transform/dense/kernel": head["predictions.transform.dense.weight"].T,
           "cls/predictions/transform/dense/bias": head["predictions.transform.dense.bias"],
           "cls/predictions/transform/LayerNorm/gamma": head["predictions.transform.LayerNorm.weight"],
           "cls/predictions/transform/LayerNorm/beta": head["predictions.transform.LayerNorm.bias"],
           "cls/predictions/output_bias": head["predictions.bias"],
           "cls/seq_relationship/output_weights": head["seq_relationship.weight"],
           "cls/seq_relationship/output_bias": head["seq_relationship.bias"]}
  src = write_tf1(model.bert, str(tmp_path / "tf1"), extra=extra)
  converted = convert_tf1_bert(src, seq_length=LENGTH)
  assert np.abs(mlm_logits(converted, inputs, positions) - expected).max() < TOLERANCE
  assert converted.dropped == ["cls/seq_relationship/output_bias", "cls/seq_relationship/output_weights"]

  del extra["cls/predictions/transform/dense/bias"]
  src = write_tf1(model.bert, str(tmp_path / "partial"), extra=extra)
  with pytest.raises(ConversionError, match="missing weight.* of the masked-LM head: cls/predictions/"):
    convert_tf1_bert(src, seq_length=LENGTH)

"""zoo.keras3.load_model_dir on a converted Hugging Face Funnel checkpoint, against Hugging Face.

A random-weight `FunnelModel` with its FunnelTokenizer files is written here, converted by
`zoo.convert` into a model directory, loaded into a Keras 3 encoder under JAX in a process
of its own, and compared with Hugging Face's model at every real position of inputs padded
to every length (the converted directory keeps Hugging Face's pooling semantics).
"""

import numpy as np
import pytest
import torch
import transformers

from tests.zoo.convert.test_end_to_end import FUNNEL_SPECIAL
from tests.zoo.convert.test_end_to_end import vocab_file
from tests.zoo.convert.test_hf_funnel import BLOCKS
from tests.zoo.convert.test_hf_funnel import LENGTH
from tests.zoo.convert.test_hf_funnel import TINY
from tests.zoo.convert.test_hf_funnel import encoder_applications
from tests.zoo.convert.test_hf_funnel import hf_reference
from tests.zoo.convert.test_hf_funnel import make_inputs
from tests.zoo.convert.test_hf_funnel import max_difference
from tests.zoo.keras3.conftest import run_in_backend
from tests.zoo.keras3.hub_run import TEXTS as HUB_TEXTS
from zoo.convert import convert_to_model_dir

TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def converted_funnel(tmp_path_factory):
  """`(model directory, Hugging Face model)`: a random FunnelModel converted by zoo.convert."""
  root = tmp_path_factory.mktemp("hf_funnel")
  config = transformers.FunnelConfig(**{**TINY, **BLOCKS, "vocab_size": 60})
  torch.manual_seed(0)
  model = transformers.FunnelModel(config).eval()
  model.save_pretrained(root / "funnel", safe_serialization=True)
  transformers.FunnelTokenizer(vocab_file(str(root), FUNNEL_SPECIAL, 60)).save_pretrained(root / "funnel")
  out = str(root / "converted")
  convert_to_model_dir("hf-funnel", str(root / "funnel"), out, seq_length=LENGTH)
  return out, model


@pytest.mark.slow
def test_a_converted_funnel_loads_into_keras_3_and_equals_hugging_face(converted_funnel, tmp_path):
  model_dir, hf_model = converted_funnel
  inputs = make_inputs(separate_cls=True)
  np.savez(tmp_path / "inputs.npz", **inputs)
  run_in_backend("jax", "tests.zoo.keras3.load_dir", model_dir, str(tmp_path / "inputs.npz"),
                 str(tmp_path / "out.npz"))
  actual = np.load(tmp_path / "out.npz")
  assert str(actual["backend"]) == "jax" and str(actual["family"]) == "funnel"
  assert int(actual["cls_type_id"]) == 2 and "('cls', '<cls>')" in str(actual["special_tokens"])
  expected = hf_reference(hf_model, inputs, output_hidden_states=True)
  config, mask = hf_model.config, inputs["input_mask"]
  assert max_difference(actual["sequence_output"], expected.last_hidden_state, mask, config) < TOLERANCE
  encoder_output = expected.hidden_states[encoder_applications(config)]
  assert max_difference(actual["encoder_sequence_output"], encoder_output, mask, config) < TOLERANCE


RUN_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "dog", "##s", "run", ",", "cat", "was",
             "running", "!", "good", "film", ".", "bad", "zebra"]


def _classification_run(path):
  """A three-class sentence-pair Funnel classification run (`tests.model_dirs.write_run`), and a JSON
  file of its logits: its tf_keras model's on `hub_run.TEXTS` alone, and its SavedModel export's
  (`serving_default`, raw `text` and `text_b` tokenized in the graph) on the pairs of `hub_run.PAIRS`."""
  import json

  import tensorflow as tf
  import tensorflow_text  # noqa: F401  (the exported tokenizer's ops)

  from export.saved_model import export
  from tests.model_dirs import write_run
  from tests.zoo.keras3.hub_run import PAIRS
  from tests.zoo.keras3.hub_run import TEXTS
  from tpu.config import TrainConfig
  from zoo.text import TextEncoder
  tiny = dict(hidden_size=32, num_heads=2, intermediate_size=64, block_sizes=[1, 1, 1])
  config = TrainConfig(model="funnel_b4_4_4", model_overrides=tiny, task="classify", data="demo",
                       model_dir=str(path), seq_length=16, vocab_size=len(RUN_VOCAB), num_classes=3,
                       label_names=["no", "maybe", "yes"], sentence_pair=True).validate()
  model = write_run(path, config, RUN_VOCAB, seed=3)
  features = TextEncoder(RUN_VOCAB, seq_length=16).encode(tf.constant(TEXTS))
  served = tf.saved_model.load(export(str(path), str(path / "export"))).signatures["serving_default"]
  pairs = served(text=tf.constant([a for a, _ in PAIRS]), text_b=tf.constant([b for _, b in PAIRS]))
  logits = path / "logits.json"
  logits.write_text(json.dumps(dict(texts=model(features, training=False).numpy().tolist(),
                                    pairs=pairs["logits"].numpy().tolist(),
                                    mlm=_masked_lm_run(path.parent / "mlm", features))))
  return str(path), str(logits)


def _masked_lm_run(path, features):
  """An `mlm` run (Funnel with a decoder, its head without transform, as the task's default) and its
  tf_keras model's masked-LM logits at fixed positions of `features`: `{dir, positions, logits}`."""
  import numpy as np

  from tests.model_dirs import write_run
  from tpu.config import TrainConfig
  tiny = dict(hidden_size=32, num_heads=2, intermediate_size=64, block_sizes=[1, 1, 1], num_decoder_layers=1)
  config = TrainConfig(model="funnel_b4_4_4", model_overrides=tiny, task="mlm", data="demo",
                       model_dir=str(path), seq_length=16, vocab_size=len(RUN_VOCAB)).validate()
  model = write_run(path, config, RUN_VOCAB, seed=5)
  positions = np.tile(np.array([[1, 2, 5]], np.int32), [features["input_word_ids"].shape[0], 1])
  logits = model(dict(features, masked_lm_positions=positions), training=False)["mlm_logits"]
  return dict(dir=str(path), positions=positions.tolist(), logits=logits.numpy().tolist())


def _runs_of_other_tasks(path):
  """A tagging and a SQuAD run (Funnel with a decoder), whose heads keras-hub has no task class for."""
  from tests.model_dirs import write_run
  from tpu.config import TrainConfig
  tiny = dict(hidden_size=32, num_heads=2, intermediate_size=64, block_sizes=[1, 1, 1], num_decoder_layers=1)
  runs = []
  for task, settings in (("tag", dict(num_classes=3, label_names=["O", "B-PER", "I-PER"])),
                         ("squad", dict(max_query_length=6))):
    config = TrainConfig(model="funnel_b4_4_4", model_overrides=tiny, task=task, data="demo",
                         model_dir=str(path / task), seq_length=16, vocab_size=len(RUN_VOCAB),
                         **settings).validate()
    write_run(path / task, config, RUN_VOCAB, seed=4)
    runs.append(str(path / task))
  return runs


def _converted_albert(path):
  """A Hugging Face ALBERT converted by `zoo.convert hf-albert`: a SentencePiece model directory."""
  import torch
  import transformers

  from tests.zoo.text import sentencepiece_files
  from zoo.convert.model_dir_writer import convert_to_model_dir
  config = transformers.AlbertConfig(vocab_size=400, embedding_size=8, hidden_size=16, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=32)
  torch.manual_seed(0)
  transformers.AlbertModel(config).save_pretrained(path / "albert_hf")
  sentencepiece_files.save_hf_tokenizer(sentencepiece_files.train_model(), str(path / "albert_hf"))
  convert_to_model_dir("hf-albert", str(path / "albert_hf"), str(path / "albert"), seq_length=16)
  return str(path / "albert")


@pytest.mark.slow
def test_a_model_directory_is_a_keras_hub_classifier_that_trains_on_jax_and_round_trips_a_preset(
    converted_funnel, tmp_path):
  import json
  model_dir, _ = converted_funnel
  run_dir, logits = _classification_run(tmp_path / "run")
  out = tmp_path / "hub.json"
  run_in_backend("jax", "tests.zoo.keras3.hub_run", model_dir, str(tmp_path / "preset"), str(out), run_dir,
                 logits, *_runs_of_other_tasks(tmp_path), _converted_albert(tmp_path))
  report = json.loads(out.read_text())
  assert report["trained_head_vs_run"] < 1e-5   # the run's trained head, not a new one
  # keras-hub's own from_preset on the run directories: the backbone, the tokenizer (the export's
  # ids), the classifier with the run's classes and trained head, the masked LM with its head.
  entry = report["keras_hub_entry_points"]
  assert (entry["backbone"], entry["tokenizer"], entry["classifier"], entry["masked_lm"]) == (
      "FunnelBackbone", "FunnelTokenizer", "FunnelTextClassifier", "FunnelMaskedLM")
  assert entry["tokenizer_ids_equal"] and entry["classes"] == 3 and entry["sequence_length"] == 16
  print(f"keras-hub from_preset on runs: classifier vs the run {entry['classifier_vs_run']:.2e}, masked LM "
        f"vs the run {entry['masked_lm_vs_run']:.2e}")
  assert entry["classifier_vs_run"] < 1e-5 and entry["masked_lm_vs_run"] < 1e-5
  assert entry["short_length"] == 8 and entry["short_logits_shape"] == [len(HUB_TEXTS), 3]
  assert entry["mask_selection_length"] == 3   # the run's max_predictions_per_seq
  assert "no text classifier head" in entry["mlm_as_classifier"] and "MaskedLM.from_preset" in entry[
      "mlm_as_classifier"]
  assert "too few for 3 blocks" in entry["too_short"] and "5 tokens or more" in entry["too_short"]
  assert "special_tokens=" in entry["funnel_vocab_error"] and "<unk>" in entry["funnel_vocab_error"]
  # Sentence pairs through keras-hub's preprocessor: the ids and segment ids of the export's tokenizer
  # (the zoo's TextEncoder), and the export's logits.
  assert report["pair_features_equal"] == dict(token_ids=True, segment_ids=True, padding_mask=True)
  assert report["pair_truncated"]   # some pairs are longer than the sequence: both trim the same way
  difference = report["pairs_vs_export"]
  print(f"sentence pairs: keras-hub classifier vs the tf_keras export: max |diff| {difference:.2e}")
  assert report["pairs_vs_export"] < 1e-5
  # Tagging and SQuAD runs are refused, naming the head keras-hub has no task for and the way on.
  tag_error, squad_error, albert_error = report["refused"]
  # A SentencePiece directory (hf-albert): its tokenizer is not keras-hub's WordPiece, which it says.
  assert "tokenizer is a sentencepiece model" in albert_error and "backbone_from_model_dir" in albert_error
  assert "a 'tag' run has a token-classification head" in tag_error
  assert "keras-hub has no token-classification task" in tag_error
  assert "a 'squad' run has a question-answering head" in squad_error
  for error in (tag_error, squad_error):
    assert "backbone_from_model_dir gives its encoder" in error and "pass num_classes" in error
  assert report["tag_encoder_classifier_classes"] == 5   # its encoder under a new classifier, as asked
  assert report["backend"] == "jax"
  assert report["token_ids_equal"] and report["padding_mask_equal"]   # the zoo's TextEncoder's ids
  assert report["backbone_vs_encoder"] < 1e-6
  assert report["from_preset_vs_encoder"] < 1e-6   # keras_hub.models.Backbone.from_preset(converted dir)
  assert report["weights_changed"] and all(np.isfinite(report["losses"]))
  assert report["losses"][-1] < report["losses"][0]
  assert report["logits_dtype"] == "float32"
  assert (report["restored_class"], report["restored_tokenizer"], report["restored_cls_token"]) == (
      "FunnelTextClassifier", "FunnelTokenizer", "<cls>")
  assert report["restored_vs_trained"] < 1e-5
  # Every backbone and classifier honours the dtype it is given (the global policy stays float32):
  # bfloat16 weights, or float32 weights with bfloat16 compute; float32 layer norms in both.
  dtypes = report.pop("dtypes")
  assert dtypes.pop("global_policy") == "float32"
  assert len(dtypes) == 11
  # A backbone saved in mixed_bfloat16 reloads in it without a dtype.
  assert dtypes.pop("mixed_bfloat16_preset_reloaded") == "mixed_bfloat16"
  for name, built in dtypes.items():
    policy = "mixed_bfloat16" if name.endswith("mixed_bfloat16") else "bfloat16"
    assert built["policy"] == policy, name
    assert built["weights"] == ["bfloat16" if policy == "bfloat16" else "float32"], name
    assert built["norms"] == ["float32"], name
    if "output" in built:
      assert built["output"] == "bfloat16" and 0 < built["vs_float32"] < 0.1, (name, built)
    if "logits" in built:
      assert built["logits"] == "float32", name
  assert (tmp_path / "preset" / "config.json").exists() and (tmp_path / "preset" / "task.json").exists()

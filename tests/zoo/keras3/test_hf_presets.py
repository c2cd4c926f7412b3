"""Hugging Face Funnel and BERT directories through keras-hub's own `from_preset` (zoo.keras3.hf_presets).

The directories are written here as transformers writes them (random weights, config.json,
safetensors, single and sharded, tokenizer files); a process per Keras backend (JAX and PyTorch)
loads each with `keras_hub.models.Backbone`, `Tokenizer` and `TextClassifier.from_preset` after
`import zoo.keras3`, one of them as an `hf://` handle from an offline Hugging Face cache. The
backbones' outputs must equal transformers' at every real position of inputs padded to every
length, and the tokenizers' ids transformers' tokenizers' ids.
"""

import json
import os

import numpy as np
import pytest
import torch
import transformers

from tests.zoo.convert.test_bert import TINY as BERT_TINY
from tests.zoo.convert.test_end_to_end import BERT_SPECIAL
from tests.zoo.convert.test_end_to_end import FUNNEL_SPECIAL
from tests.zoo.convert.test_end_to_end import LONG
from tests.zoo.convert.test_end_to_end import SHORT
from tests.zoo.convert.test_end_to_end import hub_cache
from tests.zoo.convert.test_end_to_end import vocab_file
from tests.zoo.convert.test_hf_funnel import BLOCKS
from tests.zoo.convert.test_hf_funnel import LENGTH
from tests.zoo.convert.test_hf_funnel import TINY
from tests.zoo.convert.test_hf_funnel import hf_reference
from tests.zoo.convert.test_hf_funnel import make_inputs
from tests.zoo.convert.test_hf_funnel import max_difference
from tests.zoo.keras3.conftest import BACKENDS
from tests.zoo.keras3.conftest import run_in_backend
from zoo import presets
from zoo.presets import cost

TOLERANCE = 1e-4
VOCAB = 60
HUB_ID = "someone/tiny-funnel"
# The authors' releases (the Funnel paper's Table 1 sizes; `-base`: without the decoder) and the
# zoo presets of their architectures.
RELEASES = {"small": "funnel_b4_4_4_decoder", "small-base": "funnel_b4_4_4",
            "medium": "funnel_b6_3x2_3x2_decoder", "medium-base": "funnel_b6_3x2_3x2",
            "intermediate": "funnel_b6_6_6_decoder", "intermediate-base": "funnel_b6_6_6",
            "large": "funnel_b8_8_8_decoder", "large-base": "funnel_b8_8_8",
            "xlarge": "funnel_b10_10_10_decoder", "xlarge-base": "funnel_b10_10_10"}
CLASSIFIERS = ("funnel_classifier", "bert")
TEXTS = LONG + SHORT + ["Ünïcödé wörds, 漢字 and CJK: 東京!", "A  B\tc\nd"]
LABELS = [0, 1, 2, 0, 1, 2, 0, 1]
# A length below the directories' (LENGTH) that the three blocks still pool: what a keras-hub user
# sets for short texts (`sequence_length=`), on the same backbone as the full length.
SHORT_LENGTH = 9


def _save(model, tokenizer, path, **kwargs):
  model.save_pretrained(path, safe_serialization=True, **kwargs)
  tokenizer.save_pretrained(path)
  return str(path)


@pytest.fixture(scope="module")
def directories(tmp_path_factory):
  """`{case: (preset, seq_length, reference model, HF tokenizer, kind)}` and the offline cache."""
  root = tmp_path_factory.mktemp("hf_presets")
  funnel_tokenizer = transformers.FunnelTokenizer(vocab_file(str(root), FUNNEL_SPECIAL, VOCAB))
  bert_tokenizer = transformers.BertTokenizer(vocab_file(str(root / ".."), BERT_SPECIAL, VOCAB),
                                              do_lower_case=False)
  funnel_config = dict(TINY, **BLOCKS, vocab_size=VOCAB)
  torch.manual_seed(0)
  funnel = transformers.FunnelModel(transformers.FunnelConfig(**funnel_config)).eval()
  base = transformers.FunnelBaseModel(transformers.FunnelConfig(
      **dict(funnel_config, attention_type="relative_shift", pooling_type="max"))).eval()
  classifier = transformers.FunnelForSequenceClassification(
      transformers.FunnelConfig(**funnel_config, num_labels=3)).eval()
  # 512 positions: keras-hub's text classifiers pad to 512 tokens by default.
  bert = transformers.BertModel(transformers.BertConfig(
      **{**BERT_TINY, "vocab_size": VOCAB, "max_position_embeddings": 512})).eval()
  cases = {
      # Sharded: an index and several safetensors files.
      "funnel": (_save(funnel, funnel_tokenizer, root / "funnel", max_shard_size="20KB"), LENGTH, funnel,
                 funnel_tokenizer),
      "funnel_base": (_save(base, funnel_tokenizer, root / "base"), LENGTH, base, funnel_tokenizer),
      "funnel_classifier": (_save(classifier, funnel_tokenizer, root / "classifier"), LENGTH,
                            classifier.funnel, funnel_tokenizer),
      "bert": (_save(bert, bert_tokenizer, root / "bert"), None, bert, bert_tokenizer),
  }
  # BERT as published before transformers 5: vocab.txt and do_lower_case, no tokenizer.json
  # (keras-hub's own tokenizer converter reads it).
  published_bert = root / "bert_published"
  published_bert.mkdir()
  for name in ("config.json", "model.safetensors"):
    (published_bert / name).write_bytes((root / "bert" / name).read_bytes())
  tokens = bert_tokenizer.convert_ids_to_tokens(list(range(VOCAB)))
  (published_bert / "vocab.txt").write_text("".join(f"{token}\n" for token in tokens))
  (published_bert / "tokenizer_config.json").write_text(json.dumps(dict(do_lower_case=False)))
  cases["bert_published"] = (str(published_bert), None, bert, bert_tokenizer)
  cache = str(root / "hub")
  for hub_id, case in ((HUB_ID, "funnel"), ("funnel-transformer/small-base", "funnel_base")):
    source = cases[case][0]
    hub_cache(cache, hub_id, {name: os.path.join(source, name) for name in os.listdir(source)})
  cases["funnel_hub"] = (f"hf://{HUB_ID}", LENGTH, funnel, funnel_tokenizer)
  # A registered preset by its name, its handle served by the cache (a stand-in of the release's files).
  cases["funnel_small_base_en"] = ("funnel_small_base_en", LENGTH, base, funnel_tokenizer)
  return cases, cache, classifier


def _load_in_every_backend(cases, cache, root):
  """`(inputs, {backend: the runner's outputs})`, one process per backend: JAX (the TPU path) and PyTorch,
  whose compiled steps differ most from tf_keras's (the encoders' numerics under TensorFlow's backend
  too are `test_twins.py`'s)."""
  inputs = make_inputs(separate_cls=True)
  np.savez(root / "inputs.npz", **inputs)
  spec = dict(inputs=str(root / "inputs.npz"), texts=TEXTS, labels=LABELS, short=SHORT_LENGTH,
              cases=[dict(name=name, preset=preset, seq_length=length, classifier=name in CLASSIFIERS)
                     for name, (preset, length, _, _) in cases.items()])
  (root / "spec.json").write_text(json.dumps(spec))
  offline = dict(HF_HUB_OFFLINE="1", HF_HUB_CACHE=cache, HF_HOME=str(root / "home"))
  results = {}
  with pytest.MonkeyPatch.context() as patch:
    for key, value in offline.items():
      patch.setenv(key, value)
    for backend in [backend for backend in BACKENDS if backend != "tensorflow"]:
      out = root / f"{backend}.npz"
      run_in_backend(backend, "tests.zoo.keras3.hf_preset_run", str(root / "spec.json"), str(out))
      results[backend] = dict(np.load(out))
  return inputs, results


# One test: the backends' processes are its cost, run once whichever worker takes it.
@pytest.mark.slow
def test_hugging_face_directories_load_through_keras_hub_entry_points(directories, tmp_path):
  cases, cache, hf_classifier = directories
  inputs, results = _load_in_every_backend(cases, cache, tmp_path)
  mask = inputs["input_mask"]
  short_inputs = {key: value[:, :SHORT_LENGTH] for key, value in inputs.items()}
  for backend, out in results.items():
    assert str(out["backend"]) == backend
    # The authors' ten releases are FunnelBackbone presets, with the parameters the zoo counts.
    registered = json.loads(str(out["presets"]))
    assert sorted(entry["handle"] for entry in registered.values()) == sorted(
        f"hf://funnel-transformer/{release}" for release in RELEASES)
    for name, entry in registered.items():
      preset = presets.get(RELEASES[entry["handle"].split("/")[-1]])
      assert entry["params"] == cost.parameter_count(preset.family, preset.config), name
    for name, (_, _, model, hf_tokenizer) in cases.items():
      funnel = name.startswith("funnel")
      # Backbone.from_preset: the zoo's FunnelBackbone, or keras-hub's own BertBackbone.
      assert str(out[f"{name}/backbone"]) == ("FunnelBackbone" if funnel else "BertBackbone")
      if funnel:
        expected = hf_reference(model, inputs).last_hidden_state.numpy()
        difference = max_difference(out[f"{name}/sequence_output"], expected, mask, model.config)
        # predict() at the full length, then at a short one, on the same backbone (one compiled step
        # per length under every backend): transformers' outputs at that length.
        predicted = max_difference(out[f"{name}/predicted"], expected, mask, model.config)
        short = max_difference(out[f"{name}/predicted_short"], hf_reference(model, short_inputs)
                               .last_hidden_state.numpy(), short_inputs["input_mask"], model.config)
        print(f"{backend} {name}: predict max |difference| {predicted:.2e} at {LENGTH} tokens, "
              f"{short:.2e} at {SHORT_LENGTH}")
        assert predicted < TOLERANCE and short < TOLERANCE, (backend, name, predicted, short)
      else:
        types = np.minimum(inputs["input_type_ids"], 1)
        expected = hf_reference(model, {**inputs, "input_type_ids": types}).last_hidden_state.numpy()
        difference = np.abs(out[f"{name}/sequence_output"] - expected)[mask > 0].max()
      print(f"{backend} {name}: max |difference| {difference:.2e}")
      assert difference < TOLERANCE, (backend, name, difference)
      if name == "funnel":
        # A new classifier on the directory with the decoder fits at the short length, and no backend
        # warns of variables without gradients (the decoder, which it does not read, is not trained).
        assert int(out[f"{name}/fit_length"]) == SHORT_LENGTH and np.isfinite(out[f"{name}/fit_loss"])
        assert json.loads(str(out[f"{name}/gradient_warnings"])) == [], backend
      # Tokenizer.from_preset: transformers' tokenizer's ids.
      assert str(out[f"{name}/tokenizer"]) == ("FunnelTokenizer" if funnel else "BertTokenizer")
      expected_ids = [hf_tokenizer(text, add_special_tokens=False)["input_ids"] for text in TEXTS]
      assert json.loads(str(out[f"{name}/ids"])) == expected_ids, (backend, name)
      # TextClassifier.from_preset: the family's classifier on raw strings (a classifier at 512
      # tokens per family: the other Funnel directories resolve to the same classes).
      if name not in CLASSIFIERS:
        continue
      assert str(out[f"{name}/classifier"]) == ("FunnelTextClassifier" if funnel else "BertTextClassifier")
      logits = out[f"{name}/logits"]
      assert logits.shape == (len(TEXTS), 3) and np.isfinite(logits).all()
      if not funnel:
        continue
      # Without num_classes: FunnelForSequenceClassification's own head and label count, at the
      # sequence_length asked for: transformers' logits on its tokenizer's ids at that length.
      assert (int(out[f"{name}/trained_classes"]), int(out[f"{name}/trained_length"])) == (3, SHORT_LENGTH)
      encoded = hf_tokenizer(TEXTS, padding="max_length", truncation=True, max_length=SHORT_LENGTH,
                             return_tensors="pt")
      with torch.no_grad():
        expected_logits = hf_classifier(**encoded).logits.numpy()
      difference = np.abs(out[f"{name}/trained_logits"] - expected_logits).max()
      print(f"{backend} {name}: classifier logits at {SHORT_LENGTH} tokens, "
            f"max |difference| {difference:.2e}")
      assert difference < TOLERANCE, (backend, difference)


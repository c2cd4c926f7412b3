"""zoo.convert funnel-tf against the Funnel-Transformer authors' own TensorFlow code.

Each folder of `funnel_authors/` is a small random release written by the authors' code
(`funnel_authors/make_fixtures.py`: their `modeling.py`, their `Saver`, their
`modify_ckpt.py`), laid out as their archives ship it (`model.ckpt.*`, `net_config.json`,
`vocab.uncased.txt`), with the outputs their code computes from it on one row per number
of real tokens (single texts and sentence pairs). The converted encoder must give those
outputs at every real position of every row: the encoder's at the pooled positions their
mask keeps (a window is real if any of its tokens is), the decoder's at the input's real
tokens.
"""

import json
import os
import pathlib
import shutil

import numpy as np
import pytest

from tests.conftest import fast_or_slow
from zoo.convert import ConversionError
from zoo.convert import funnel_tf
from zoo.convert.__main__ import main
from zoo.convert.model_dir_writer import read_checkpoint
from zoo.model_dir import ModelDir

FIXTURES = pathlib.Path(__file__).parent / "funnel_authors"
VARIANTS = sorted(path.name for path in FIXTURES.iterdir() if (path / "outputs.npz").exists())
TOLERANCE = 1e-4
# The cases make test-fast runs: the release-like default, and the TF code's rules without separate_cls.
FAST = ("factorized_mean_decoder", "rel_shift_nocls", "factorized_repeats_decoder")


def fixture(name):
  folder = FIXTURES / name
  with open(folder / "fixture.json") as file:
    flags = json.load(file)
  return str(folder), flags, dict(np.load(folder / "outputs.npz"))


def zoo_inputs(recorded):
  """Their inputs in the zoo's convention: mask 1 for real tokens, [cls]'s type its segment's (the zoo
  gives the first token segment 2 itself)."""
  return dict(input_word_ids=recorded["input_ids"], input_mask=1 - recorded["input_mask"],
              input_type_ids=np.where(recorded["seg_id"] == 2, 0, recorded["seg_id"]))


def pooled_real(real, steps, separate_cls, truncate_seq):
  """`real` [B, T] after `steps` poolings as the authors pool their padding mask: `pool_tensor(mode="min")`
  of a mask that is 1 for padding (TF's SAME padding leaves an odd tail a window of its own)."""
  padding = 1 - real
  for _ in range(steps):
    if separate_cls:
      padding = np.concatenate([padding[:, :1], padding[:, 1:-1] if truncate_seq else padding[:, 1:]], axis=1)
      cls, body = padding[:, :1], padding[:, 1:]
    else:
      cls, body = padding[:, :0], padding
    if body.shape[1] % 2:
      body = np.concatenate([body, body[:, -1:]], axis=1)
    padding = np.concatenate([cls, body.reshape(body.shape[0], -1, 2).min(axis=-1)], axis=1)
  return padding == 0


def differences(encoder, recorded, prefix=""):
  """Max |zoo - theirs| of the encoder's output and of the decoder's, at real positions, every row."""
  config = encoder.get_config()
  outputs = encoder(zoo_inputs(recorded), training=False)
  real = recorded["input_mask"] == 0
  kept = pooled_real(real.astype(np.int32), len(config["block_sizes"]) - 1, config["separate_cls"],
                     config["truncate_seq"])
  assert kept[:, 0].all() and not kept.all()   # every row has [cls]; some pooled positions are padding
  encoder_output = outputs["encoder_sequence_output"].numpy()
  result = dict(encoder=np.abs(encoder_output - recorded[prefix + "encoder"])[kept].max())
  if prefix + "decoder" in recorded:
    result["decoder"] = np.abs(outputs["sequence_output"].numpy() - recorded[prefix + "decoder"])[real].max()
  return result


@pytest.mark.parametrize("name", fast_or_slow(VARIANTS, FAST))
def test_a_release_computes_what_the_authors_code_computes(name):
  release, flags, recorded = fixture(name)
  converted = read_checkpoint("funnel-tf", release, seq_length=recorded["input_ids"].shape[1],
                              truncate_seq=flags["truncate_seq"])
  found = differences(converted.encoder, recorded)
  assert set(found) == {"encoder"} | ({"decoder"} if "decoder" in recorded else set())
  assert max(found.values()) < TOLERANCE, found
  source = converted.source
  assert source["vocab_file"] == "vocab.uncased.txt" and converted.lower_case
  assert "TensorFlow" in source["computes"]


@pytest.mark.parametrize("name", fast_or_slow(
    [name for name in VARIANTS if "rel_shift_encoder" in np.load(FIXTURES / name / "outputs.npz")],
    ("factorized_nocls",)))
def test_their_loader_off_tpu_is_the_rel_shift_form_of_the_same_release(name, tmp_path):
  # Their init_from_json switches "factorized" to "rel_shift" without --use_tpu: the release converted with
  # rel_attn_type "rel_shift" computes what their code computes off TPU (without separate_cls, otherwise).
  release, flags, recorded = fixture(name)
  with open(os.path.join(release, "net_config.json")) as file:
    net_config = dict(json.load(file), rel_attn_type="rel_shift")
  config = tmp_path / "net_config.json"
  config.write_text(json.dumps(net_config))
  converted = read_checkpoint("funnel-tf", release, seq_length=recorded["input_ids"].shape[1],
                              config=str(config), truncate_seq=flags["truncate_seq"])
  assert max(differences(converted.encoder, recorded, prefix="rel_shift_").values()) < TOLERANCE
  if not net_config["separate_cls"]:
    assert "off TPU" in read_checkpoint("funnel-tf", release, seq_length=16).source["computes"]


def test_the_command_converts_the_release_as_shipped_and_to_hf_refuses_their_semantics_by_name(tmp_path,
                                                                                            capsys):
  release, _, recorded = fixture("factorized_mean_decoder")
  assert sorted(name for name in os.listdir(release) if not name.startswith(("outputs", "fixture"))) == [
      "model.ckpt.data-00000-of-00001", "model.ckpt.index", "model.ckpt.meta", "net_config.json",
      "vocab.uncased.txt"]
  out = tmp_path / "converted"
  assert main(["funnel-tf", release, "--out", str(out), "--seq-length", "16"]) == 0
  directory = ModelDir(str(out))
  overrides = directory.read_config()["model_overrides"]
  assert (overrides["pooling_semantics"], overrides["position_rules"]) == ("funnel_authors", "authors_tf")
  assert "TensorFlow" in directory.read_source()["computes"]
  # Out to transformers: refused, saying what differs and on which inputs, unless asked for.
  with pytest.raises(ConversionError, match="Funnel authors' pooling semantics.*last real token shares a "
                                            "pooling window with padding.*--change-pooling"):
    from zoo.convert.to_hf.export import to_hf
    to_hf(str(out), str(tmp_path / "refused"))
  assert not (tmp_path / "refused").exists()
  assert main(["to-hf", str(out), "--out", str(tmp_path / "hf"), "--change-pooling"]) == 0
  card = (tmp_path / "hf" / "README.md").read_text()
  assert "Computed otherwise than the zoo model" in card and "--change-pooling" in card
  assert 'padding="max_length", max_length=16' in card
  # The release's own size (net_config.json: block_size 2_1_1, d_model 16, n_head 2, decoder_size 2), not
  # the preset's it was built from.
  assert "| size | Funnel-Transformer B2-1-1-H16/A2 with a 2-layer decoder, " in card, card
  _check_the_cards_measurement(card, str(tmp_path / "hf"), read_checkpoint(
      "funnel-tf", release, seq_length=16).encoder, recorded)


def _check_the_cards_measurement(card, exported, encoder, recorded):
  """The card's figures against transformers: the counts of real tokens it says compute otherwise are
  those on which transformers' model of the export and the authors' code (their recorded outputs, one row
  per count) differ, and its largest difference is that between transformers and the release on the
  inputs it describes (random tokens, one per count, padded to 16)."""
  import re

  import torch
  import transformers

  listed = re.search(r"(\d+) counts compute otherwise \(real tokens after \[cls\]: ([\d, .]+)\), the final "
                     r"states at the real positions moving by up to ([\d.e+-]+)", card)
  assert listed, card
  said = [int(count) for count in listed.group(2).replace(".", "").split(",") if count.strip()]
  model = transformers.AutoModel.from_pretrained(exported).eval()

  def theirs(ids, real, types):
    with torch.no_grad():
      return model(input_ids=torch.tensor(ids, dtype=torch.long), attention_mask=torch.tensor(real),
                   token_type_ids=torch.tensor(types, dtype=torch.long)).last_hidden_state.numpy()

  real = 1 - recorded["input_mask"]
  gaps = np.abs(theirs(recorded["input_ids"], real, recorded["seg_id"]) - recorded["decoder"])
  gaps = np.where(real[:, :, None] == 1, gaps, 0).max(axis=(1, 2))
  assert [int(count) - 1 for count, gap in zip(real.sum(1), gaps, strict=True) if gap > TOLERANCE] == said
  assert int(listed.group(1)) == len(said) > 0
  # The figure: transformers on the card's inputs against the release (the converted encoder, which
  # computes what their code does: test_a_release_computes_what_the_authors_code_computes).
  counts = np.arange(1, 17)
  vocab_size = encoder.get_config()["vocab_size"]
  ids = np.random.default_rng(0).integers(1, vocab_size, size=(16, 16), dtype=np.int32)
  mask = (np.arange(16)[None, :] < counts[:, None]).astype(np.int32)
  ids = ids * mask
  ours = encoder(dict(input_word_ids=ids, input_mask=mask, input_type_ids=np.zeros_like(ids)),
                 training=False)["sequence_output"].numpy()
  types = np.zeros_like(ids)
  types[:, 0] = 2   # transformers' Funnel knows [cls] by its token type
  gaps = np.where(mask[:, :, None] == 1, np.abs(theirs(ids, mask, types) - ours), 0).max(axis=(1, 2))
  np.testing.assert_allclose(gaps.max(), float(listed.group(3)), rtol=5e-3, atol=TOLERANCE)   # 3 digits


def test_a_release_without_its_vocabulary_names_the_files_it_looks_for(tmp_path):
  release = tmp_path / "release"
  shutil.copytree(fixture("factorized_encoder_only")[0], release)
  os.remove(release / "vocab.uncased.txt")
  with pytest.raises(FileNotFoundError, match="vocab.uncased.txt, vocab.cased.txt, vocab.txt"):
    read_checkpoint("funnel-tf", str(release), seq_length=16)
  assert funnel_tf.VOCAB_FILES[0] == "vocab.uncased.txt"


def test_a_step_numbered_checkpoint_without_a_state_file_is_found(tmp_path):
  release, flags, recorded = fixture("rel_shift_nocls")
  renamed = tmp_path / "release"
  renamed.mkdir()
  for name in os.listdir(release):
    shutil.copy(os.path.join(release, name), renamed / name.replace("model.ckpt.", "model.ckpt-1000000."))
  converted = read_checkpoint("funnel-tf", str(renamed), seq_length=16, truncate_seq=flags["truncate_seq"])
  assert max(differences(converted.encoder, recorded).values()) < TOLERANCE

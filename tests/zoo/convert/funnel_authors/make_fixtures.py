"""Writes the Funnel-Transformer authors' fixtures of tests/zoo/convert/funnel_authors/ with their own code.

Each variant is a small random model built by the authors' TensorFlow `modeling.py`
(github.com/laiguokun/Funnel-Transformer, `tensorflow/`), saved by their graph's
`tf.train.Saver` with what a pre-training checkpoint holds beside the model (the step, an
optimizer slot, a generator variable, the LM head), then reduced by their `modify_ckpt.py`
into a release laid out as their archives ship it: `model.ckpt.{data-00000-of-00001,
index,meta}`, `net_config.json` (written by their `ModelConfig.to_json`) and
`vocab.uncased.txt`. The script then builds the model again in a new graph from that
release, as their fine-tuning scripts do (`ModelConfig.init_from_json`, variables from
`init_checkpoint`), runs it on padded rows and sentence pairs, and records in
`outputs.npz` (and the `truncate_seq` flag and seed in `fixture.json`):

  input_ids, seg_id, input_mask   [B, T] int32, their convention (mask 1 = padding,
                                  [cls] segment 2, padding segment 0)
  encoder                         [B, T', D] the encoder's output (`extract_hiddens`)
  decoder                         [B, T, D] the decoder's output (variants with one)
  rel_shift_encoder, rel_shift_decoder
                                  factorized variants only: the same release run the
                                  way their loader runs it off TPU (`init_from_json`
                                  switches "factorized" to "rel_shift" unless --use_tpu)

Environment (what the fixtures were made with; `tensorflow.compat.v1` graph mode needs
the Keras 2 of TensorFlow <= 2.15, since their `ops.dropout_op` builds a Keras Dropout layer):

  python3.11 -m venv /tmp/tf212 && /tmp/tf212/bin/pip install tensorflow-cpu==2.12.1
  git clone https://github.com/laiguokun/Funnel-Transformer /tmp/funnel-authors   # 1085523
  /tmp/tf212/bin/python tests/zoo/convert/funnel_authors/make_fixtures.py \\
      --authors /tmp/funnel-authors/tensorflow --out tests/zoo/convert/funnel_authors

(tensorflow-cpu 2.12.1 with numpy 1.24.3 and absl-py 2.5.1 made the committed files.)
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

LENGTH = 16
D_MODEL, N_HEAD, D_HEAD, D_INNER = 16, 2, 8, 32
# Their special symbols (data_utils.special_symbols_mapping), then words.
SPECIAL = ["<pad>", "<unk>", "<s>", "</s>", "<cls>", "<sep>", "<mask>", "<eod>", "<eop>"]
VOCAB = SPECIAL + ["the", "a", "of", "and", "to", "in", "is", "it", "that", "was", "for", "on", "with", "as",
                   "he", "be", "at", "by", "this", "had", "not", "are", "but", "from", "or", "have", "an",
                   "they", "which", "one", "##s"]
CLS_ID, SEP_ID, PAD_ID = VOCAB.index("<cls>"), VOCAB.index("<sep>"), VOCAB.index("<pad>")

# name: their net_config fields and the truncate_seq flag of their scripts.
VARIANTS = {
    "factorized_mean_decoder": dict(block_size="2_1_1", decoder_size="2", rel_attn_type="factorized",
                                    pooling_type="mean", separate_cls=True, pool_q_only=True,
                                    truncate_seq=True),
    "rel_shift_max_decoder": dict(block_size="1_2_1", decoder_size="1", rel_attn_type="rel_shift",
                                  pooling_type="max", separate_cls=True, pool_q_only=True, truncate_seq=True),
    "factorized_nocls": dict(block_size="1_1_1", decoder_size="2", rel_attn_type="factorized",
                             pooling_type="mean", separate_cls=False, pool_q_only=True, truncate_seq=True),
    "rel_shift_nocls": dict(block_size="1_1_1", decoder_size="2", rel_attn_type="rel_shift",
                            pooling_type="mean", separate_cls=False, pool_q_only=True, truncate_seq=True),
    "rel_shift_nocls_max_all_pooled": dict(block_size="1_1", decoder_size="1", rel_attn_type="rel_shift",
                                           pooling_type="max", separate_cls=False, pool_q_only=False,
                                           truncate_seq=True),
    "factorized_no_truncation": dict(block_size="1_1_1", decoder_size="1", rel_attn_type="factorized",
                                     pooling_type="mean", separate_cls=True, pool_q_only=True,
                                     truncate_seq=False),
    "rel_shift_no_truncation_all_pooled": dict(block_size="1_1_1", decoder_size="0",
                                               rel_attn_type="rel_shift",
                                               pooling_type="max", separate_cls=True, pool_q_only=False,
                                               truncate_seq=False),
    "factorized_repeats_decoder": dict(block_size="1x2_1x2_1", decoder_size="2", rel_attn_type="factorized",
                                       pooling_type="mean", separate_cls=True, pool_q_only=True,
                                       truncate_seq=True),
    "rel_shift_repeats_all_pooled": dict(block_size="2x2_1", decoder_size="1", rel_attn_type="rel_shift",
                                         pooling_type="mean", separate_cls=True, pool_q_only=False,
                                         truncate_seq=True),
    "factorized_encoder_only": dict(block_size="1_1_1", decoder_size="0", rel_attn_type="factorized",
                                    pooling_type="max", separate_cls=True, pool_q_only=True,
                                    truncate_seq=True),
}

# The variant that keeps the archives' third file, the graph `model.ckpt.meta` (0.5 MB, which no
# reader of the weights opens; the others leave it out).
WITH_GRAPH = "factorized_mean_decoder"
MODIFY_CKPT = ("import runpy, sys; import tensorflow.compat.v1 as tf; tf.disable_v2_behavior(); "
               "sys.argv[0] = 'modify_ckpt.py'; runpy.run_path('modify_ckpt.py', run_name='__main__')")


def inputs(seed):
  """One row per number of real tokens 1..T ([cls] first, their layout): single texts below 6 tokens,
  pairs `[cls] a [sep] b [sep]` from 6, then padding (word <pad>, segment 0, mask 1)."""
  rng = np.random.default_rng(seed)
  ids = np.full([LENGTH, LENGTH], PAD_ID, np.int32)
  segments = np.zeros([LENGTH, LENGTH], np.int32)
  mask = np.ones([LENGTH, LENGTH], np.float32)
  for row, real in enumerate(range(1, LENGTH + 1)):
    ids[row, :real] = rng.integers(len(SPECIAL), len(VOCAB), size=real)
    ids[row, 0] = CLS_ID
    segments[row, 0] = 2
    mask[row, :real] = 0
    if real >= 6:
      split = real // 2
      ids[row, split], ids[row, real - 1] = SEP_ID, SEP_ID
      segments[row, split + 1:real] = 1
    elif real > 1:
      ids[row, real - 1] = SEP_ID
  return ids, segments, mask


def set_flags(flags, fields, use_tpu):
  flags.separate_cls = fields["separate_cls"]
  flags.truncate_seq = fields["truncate_seq"]
  flags.use_tpu = use_tpu
  flags.vocab_size = len(VOCAB)


def random_values(variables, rng):
  """Random values for every variable (layer norms near 1 and 0; everything else N(0, 0.3))."""
  values = []
  for variable in variables:
    shape = variable.shape.as_list()
    if variable.name.endswith("gamma:0"):
      values.append(1.0 + 0.1 * rng.standard_normal(shape))
    elif variable.name.endswith("beta:0"):
      values.append(0.1 * rng.standard_normal(shape))
    elif variable.dtype.base_dtype.is_integer:
      values.append(np.full(shape, 1000))
    else:
      values.append(0.3 * rng.standard_normal(shape))
  return values


def save_pretraining_checkpoint(tf, modeling, fields, folder, seed):
  """Their model with the LM head, a step, an Adam slot and a generator variable, saved by their Saver."""
  config = modeling.ModelConfig(
      block_size=fields["block_size"], vocab_size=len(VOCAB), d_embed=D_MODEL, d_model=D_MODEL, n_head=N_HEAD,
      d_head=D_HEAD, d_inner=D_INNER, dropout=0.1, dropatt=0.1, dropact=0.0, ff_activation="gelu",
      rel_attn_type=fields["rel_attn_type"], separate_cls=fields["separate_cls"],
      pooling_type=fields["pooling_type"], pooling_size=2, pool_q_only=fields["pool_q_only"],
      decoder_size=fields["decoder_size"])
  graph = tf.Graph()
  with graph.as_default():
    ids, segments, mask = (tf.constant(value) for value in inputs(seed))
    with tf.variable_scope("model", reuse=tf.AUTO_REUSE):
      modeling.FunnelTFM(config).get_mlm_loss(ids, ids, is_training=False, seg_id=segments, input_mask=mask)
    model_variables = tf.global_variables()
    tf.train.get_or_create_global_step()
    first = model_variables[0]
    tf.get_variable(first.op.name + "/adam_m", first.shape, tf.float32)
    tf.get_variable("generator/encoder/layer_0/rel_attn/q/kernel", [D_MODEL, N_HEAD, D_HEAD], tf.float32)
    rng = np.random.default_rng(seed)
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      for variable, value in zip(model_variables, random_values(model_variables, rng), strict=True):
        variable.load(value.astype(np.float32), session)
      tf.train.Saver().save(session, os.path.join(folder, "model.ckpt"))
  return config


def run_release(tf, modeling, flags, release, seed, use_tpu):
  """Their model built from the release as their fine-tuning scripts build it, on the fixture's rows."""
  graph = tf.Graph()
  with graph.as_default():
    flags.use_tpu = use_tpu
    config = modeling.ModelConfig.init_from_json(os.path.join(release, "net_config.json"))
    ids, segments, mask = (tf.constant(value) for value in inputs(seed))
    model = modeling.FunnelTFM(config)
    with tf.variable_scope("model", reuse=tf.AUTO_REUSE):
      encoder, hiddens, _ = model.extract_hiddens(ids, is_training=False, seg_id=segments, input_mask=mask)
      decoder = None
      if config.decoder_depth:
        decoder, _ = model.decoder(hiddens, input_mask=mask, seg_id=segments, is_training=False)
    names = {variable.op.name: variable.op.name for variable in tf.global_variables()}
    tf.train.init_from_checkpoint(os.path.join(release, "model.ckpt"), names)
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      fetched = session.run(dict(encoder=encoder, **({"decoder": decoder} if decoder is not None
                                                                       else {})))
  return config.rel_attn_type, fetched


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--authors", required=True, help="the tensorflow/ folder of the authors' repository")
  parser.add_argument("--out", required=True, help="where each variant's folder is written")
  parser.add_argument("--only", nargs="*", help="variants to write (default: all)")
  args = parser.parse_args()
  sys.path.insert(0, os.path.abspath(args.authors))
  import data_utils  # noqa: F401  (their flags: vocab_size, seg_id_cls)
  import modeling
  import tensorflow.compat.v1 as tf
  from absl import flags
  flags.DEFINE_bool("verbose", False, "")
  flags.DEFINE_bool("use_tpu", False, "")
  flags.FLAGS(sys.argv[:1])
  tf.disable_v2_behavior()
  for index, (name, fields) in enumerate(sorted(VARIANTS.items())):
    if args.only and name not in args.only:
      continue
    seed = 1000 + index
    release = os.path.join(os.path.abspath(args.out), name)
    shutil.rmtree(release, ignore_errors=True)
    os.makedirs(release)
    set_flags(flags.FLAGS, fields, use_tpu=True)
    with tempfile.TemporaryDirectory() as scratch:
      config = save_pretraining_checkpoint(tf, modeling, fields, scratch, seed)
      # Their script as TensorFlow 1 runs it: graph mode (TensorFlow 2 starts eager).
      reduced = subprocess.run([sys.executable, "-c", MODIFY_CKPT, f"--src_ckpt={scratch}/model.ckpt",
                                f"--tgt_ckpt={release}/model.ckpt"],
                               cwd=args.authors, capture_output=True, text=True)
      if reduced.returncode:
        sys.exit(f"modify_ckpt.py failed:\n{reduced.stderr[-3000:]}")
    os.remove(os.path.join(release, "checkpoint"))   # the archives ship model.ckpt's three files
    if name != WITH_GRAPH:
      os.remove(os.path.join(release, "model.ckpt.meta"))
    config.to_json(os.path.join(release, "net_config.json"))
    with open(os.path.join(release, "vocab.uncased.txt"), "w") as file:
      file.write("".join(token + "\n" for token in VOCAB))
    ids, segments, mask = inputs(seed)
    record = dict(input_ids=ids, seg_id=segments, input_mask=mask.astype(np.int32))
    form, outputs = run_release(tf, modeling, flags.FLAGS, release, seed, use_tpu=True)
    assert form == fields["rel_attn_type"], form
    record["encoder"] = outputs["encoder"]
    if "decoder" in outputs:
      record["decoder"] = outputs["decoder"]
    if form == "factorized":
      off_tpu_form, off_tpu = run_release(tf, modeling, flags.FLAGS, release, seed, use_tpu=False)
      assert off_tpu_form == "rel_shift", off_tpu_form
      record["rel_shift_encoder"] = off_tpu["encoder"]
      if "decoder" in off_tpu:
        record["rel_shift_decoder"] = off_tpu["decoder"]
    np.savez_compressed(os.path.join(release, "outputs.npz"), **record)
    with open(os.path.join(release, "fixture.json"), "w") as file:
      json.dump({"truncate_seq": fields["truncate_seq"], "seed": seed}, file, indent=2)
    print(name, {key: value.shape for key, value in record.items()}, file=sys.stderr)


if __name__ == "__main__":
  main()

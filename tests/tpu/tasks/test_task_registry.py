"""The task registry: a task declares its settings, and the flags, config.json and validation follow.

`ToyTask` below is the whole diff of adding a task with a setting of its own: one
class (in `tpu/tasks/<family>.py`, where `tpu.tasks` imports it by itself). Nothing in
the job, the config or the command line names it.
"""

import json

import pytest
import tensorflow as tf

from tpu import tasks
from tpu import train
from tpu.config import TrainConfig
from tpu.tasks.sequence import ClassifyTask


class ToyTask(ClassifyTask):
  """Classification whose labels are smoothed by a declared setting."""

  name = "toy_smoothed"
  description = "classification with label smoothing (a toy task)"
  settings = (tasks.Setting("smoothing", float, 0.0, "label smoothing of the toy task", minimum=0.0),)

  @classmethod
  def check_config(cls, config):
    if config.smoothing >= 1:
      raise ValueError(f"smoothing must be below 1, got {config.smoothing}")


@pytest.fixture
def toy():
  tasks.register(ToyTask)
  yield ToyTask
  tasks.task_registry.unregister(ToyTask.name)


def _config(**values):
  return TrainConfig(model="bert_small", data="demo", model_dir="/tmp/unused", **values)


def test_a_registered_task_gets_its_flag_its_config_field_and_its_validation(toy, tmp_path):
  args = train.parser().parse_args(["--task", "toy_smoothed", "--smoothing", "0.25", "--model", "bert_small",
                                    "--data", "demo", "--model-dir", str(tmp_path)])
  config = train.config_from_args(args).validate()
  assert (config.task, config.smoothing) == ("toy_smoothed", 0.25)
  assert "toy_smoothed: label smoothing of the toy task (default 0.0)" in " ".join(
      train.parser().format_help().split())
  # config.json holds the setting at the top level and reads back equal.
  values = json.loads(json.dumps(config.to_dict()))
  assert values["smoothing"] == 0.25
  assert TrainConfig.from_dict(values) == config
  # The declared minimum and the task's own check name the setting.
  with pytest.raises(ValueError, match="smoothing must be at least 0.0, got -1.0"):
    config.replace(smoothing=-1.0).validate()
  with pytest.raises(ValueError, match="smoothing must be below 1, got 1.5"):
    config.replace(smoothing=1.5).validate()
  with pytest.raises(ValueError, match="smoothing must be a float, got 'high'"):
    config.replace(smoothing="high").validate()


def test_a_setting_given_to_another_task_is_refused(toy):
  with pytest.raises(ValueError, match=r"smoothing is a setting of task toy_smoothed, not of 'classify'"):
    _config(task="classify", smoothing=0.5).validate()
  with pytest.raises(ValueError, match=r"doc_stride is a setting of task squad, not of 'toy_smoothed'"):
    _config(task="toy_smoothed", doc_stride=64).validate()


def test_unregistered_the_setting_is_gone(toy):
  tasks.task_registry.unregister(ToyTask.name)
  try:
    assert "--smoothing" not in train.parser().format_help()
    with pytest.raises(TypeError, match="no setting"):
      _config(task="classify", smoothing=0.5)
  finally:
    tasks.register(ToyTask)


def test_declarations_are_checked_at_registration():
  class Clash(ClassifyTask):
    name = "clash"
    settings = (tasks.Setting("doc_stride", int, 7, "another default"),)

  with pytest.raises(ValueError, match="declares setting 'doc_stride' differently from task"):
    tasks.register(Clash)
  with pytest.raises(ValueError, match="new, non-empty name"):
    tasks.register(type("Again", (ClassifyTask,), {}))
  with pytest.raises(ValueError, match="type must be one of"):
    tasks.Setting("ratio", complex, 0j, "a complex setting")


def test_every_setting_is_declared_once_with_a_flag_or_a_reason():
  declared = tasks.declared_settings()
  assert {"max_predictions_per_seq", "whole_word_masking", "discriminator_weight", "generator_overrides",
          "max_query_length", "doc_stride", "max_answer_length", "null_score_diff_threshold",
          "unanswerable"} <= set(declared)
  assert not set(declared) & set(TrainConfig.core_fields())
  flags = train.parser().format_help()
  for name, (setting, owners) in declared.items():
    assert (setting.flag_name in flags) == setting.flag, name
    assert owners and all(name in tasks.settings_of(owner) for owner in owners)


def test_old_config_files_with_every_tasks_settings_still_load(tmp_path):
  """Model directories written before settings belonged to tasks hold all of them."""
  old = dict(model="bert_small", task="classify", data="demo", model_dir=str(tmp_path), seq_length=16,
             max_predictions_per_seq=3, whole_word_masking=False, generator_overrides=None,
             discriminator_weight=50.0, max_query_length=64, doc_stride=128, max_answer_length=30,
             null_score_diff_threshold=0.0, unanswerable=False, num_classes=2)
  (tmp_path / "config.json").write_text(json.dumps(old))
  config = TrainConfig.from_model_dir(str(tmp_path))
  assert config.settings == {} and config.validate().task == "classify"
  with pytest.raises(ValueError, match="max_predictions_per_seq is a setting of task mlm or electra"):
    TrainConfig.from_dict(old).validate()


def test_derived_settings_are_filled_in():
  assert _config(task="mlm", seq_length=128).validate().max_predictions_per_seq == 20
  given = _config(task="mlm", seq_length=128, max_predictions_per_seq=5)
  assert given.validate().max_predictions_per_seq == 5
  assert _config(task="electra").validate().to_dict()["discriminator_weight"] == 50.0


def test_a_task_that_branches_on_a_tensor_is_told_to_use_graph_control_flow(tmp_path):
  """The job runs tasks with AutoGraph off: a Python `if` on a tensor fails, naming the remedy."""
  class Branching(ClassifyTask):
    name = "branching"

    def features(self, raw, text_encoder, seed=None):
      features = super().features(raw, text_encoder, seed)
      if features["label"] > 0:   # a tensor's value: tf.cond or tf.where
        features["weight"] = 2.0 * features["weight"]
      return features

  tasks.register(Branching)
  try:
    config = _config(task="branching", steps=1, seq_length=16, vocab_size=200,
                     model_overrides=dict(num_layers=1, hidden_size=16, num_heads=2, intermediate_size=32)
                     ).replace(model_dir=str(tmp_path))
    with pytest.raises(tf.errors.OperatorNotAllowedInGraphError) as raised:
      train.run(config)
  finally:
    tasks.task_registry.unregister(Branching.name)
  note = " ".join(raised.value.__notes__)
  assert "runs task 'branching' and its data with AutoGraph off" in note
  assert "tf.cond, tf.where or tf.while_loop" in note

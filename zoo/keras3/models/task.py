"""What the zoo's keras-hub tasks share: their `sequence_length`, and no training of the layers they
do not read."""


class TrainsWhatItReads:
  """A task mixin (before the keras-hub task in the bases): the encoder layers its outputs never read
  (`unused_layers`, name prefixes: a classifier's Funnel decoder, a masked LM's pooler) are not among
  its trainable variables, so its optimizer keeps no slots for them and no backend warns that they
  have no gradients. Their weights stay in the backbone, saved and loaded as before, and train again
  in a task that reads them."""

  unused_layers = ()

  def _unused_ids(self):
    backbones = [getattr(self, name, None) for name in ("backbone", "generator")]
    return {id(variable) for backbone in backbones if backbone is not None
            for layer in backbone.encoder.layers if layer.name.startswith(self.unused_layers)
            for variable in layer.weights}

  def _split(self, trainable):
    unused = self._unused_ids()
    return ([v for v in trainable if id(v) not in unused], [v for v in trainable if id(v) in unused])

  @property
  def trainable_variables(self):
    return self._split(super().trainable_variables)[0]

  @property
  def non_trainable_variables(self):
    return super().non_trainable_variables + self._split(super().trainable_variables)[1]

  @property
  def trainable_weights(self):
    return self._split(super().trainable_weights)[0]

  @property
  def non_trainable_weights(self):
    return super().non_trainable_weights + self._split(super().trainable_weights)[1]


def apply_sequence_length(task, sequence_length=None, seq_length=None):
  """A task's `sequence_length` (keras-hub's name: `TextClassifier.from_preset(path, sequence_length=32)`;
  `seq_length`, the zoo's, means the same): the length its preprocessor packs to, checked against the
  lengths the backbone takes."""
  if sequence_length is not None and seq_length is not None and sequence_length != seq_length:
    raise ValueError(f"sequence_length={sequence_length} and seq_length={seq_length}: give one")
  length = sequence_length if sequence_length is not None else seq_length
  if length is None:
    return
  problem = task.backbone.length_problem(int(length))
  if problem:
    raise ValueError(f"sequence_length={length}: {problem}")
  if task.preprocessor is not None:
    task.preprocessor.sequence_length = int(length)

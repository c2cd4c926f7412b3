"""The zoo's keras-hub text classifier: dropout and float32 logits on the pooled [cls] vector."""

import keras
import keras_hub

from zoo.keras3.models.encoder import PerLengthFunctions
from zoo.keras3.models.task import TrainsWhatItReads
from zoo.keras3.models.task import apply_sequence_length


class ZooTextClassifier(TrainsWhatItReads, PerLengthFunctions, keras_hub.models.TextClassifier):
  """Dropout and a dense layer on the backbone's `pooled_output`: `BertTextClassifier`'s head.

  The logits are float32 under any dtype policy (the zoo's convention). `sequence_length`
  (or `seq_length`): the preprocessor's length (`apply_sequence_length`). A Funnel decoder is
  not trained (the head reads the pooled [cls] of the encoder: `TrainsWhatItReads`).
  """

  unused_layers = ("decoder_layer_",)

  def __init__(self, backbone, num_classes, preprocessor=None, activation=None, dropout=0.1,
               sequence_length=None, seq_length=None, **kwargs):
    self.backbone = backbone
    self.preprocessor = preprocessor
    self.output_dropout = keras.layers.Dropout(dropout, dtype=backbone.dtype_policy,
                                               name="classifier_dropout")
    self.output_dense = keras.layers.Dense(
        num_classes, kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02),
        activation=activation, dtype="float32", name="logits")
    inputs = backbone.input
    pooled = self.output_dropout(backbone(inputs)["pooled_output"])
    outputs = self.output_dense(pooled)
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)
    self.num_classes = num_classes
    self.activation = keras.activations.get(activation)
    self.dropout = dropout
    apply_sequence_length(self, sequence_length, seq_length)

  def get_config(self):
    config = super().get_config()
    config.update(num_classes=self.num_classes, activation=keras.activations.serialize(self.activation),
                  dropout=self.dropout)
    return config

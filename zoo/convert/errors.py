"""`ConversionError`: what every converter raises for a checkpoint or model it cannot convert."""


class ConversionError(ValueError):
  """A checkpoint or model directory that cannot be converted; the message names the file and why."""

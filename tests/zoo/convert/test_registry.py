"""zoo.convert.registry: a format is one module; the command line and its errors come from declarations."""

import os
import subprocess
import sys

import pytest

from zoo.convert import formats
from zoo.convert import registry
from zoo.convert.__main__ import main

TOY = '''
from zoo.convert import registry


def _arguments(parser):
  parser.add_argument("src", metavar="THING")
  parser.add_argument("--shout", action="store_true", help="say it loudly")


def run(args):
  if args.src == "bad":
    raise ValueError("bad: not a thing this format reads")
  return args.src.upper() if args.shout else args.src


FORMAT = registry.Format(name="toy-out", direction="out", help="a toy format", description="Echo THING.",
                         add_arguments=_arguments, run=run)
'''


@pytest.fixture
def toy_format(tmp_path, monkeypatch):
  """A format module in a folder on the package's search path, as a new module in zoo/convert/formats."""
  (tmp_path / "toy_out.py").write_text(TOY)
  monkeypatch.setattr(formats, "__path__", [*formats.__path__, str(tmp_path)])
  registry.formats.cache_clear()
  yield
  sys.modules.pop("zoo.convert.formats.toy_out", None)
  registry.formats.cache_clear()


def test_a_new_module_is_a_new_subcommand(toy_format, capsys):
  assert "toy-out" in registry.names("out") and "toy-out" not in registry.names("in")
  assert main(["toy-out", "thing", "--shout"]) == 0
  assert capsys.readouterr().out == "THING\n"
  assert main(["toy-out", "bad"]) == 1
  assert capsys.readouterr().err == "zoo.convert: error: bad: not a thing this format reads\n"
  with pytest.raises(SystemExit):
    main(["--help"])
  assert "toy-out" in capsys.readouterr().out


def test_the_formats_and_the_errors_that_list_them():
  assert registry.names("in") == ["hf-funnel", "hf-bert", "hf-albert", "tf1-bert", "funnel-tf", "keras3",
                                   "sentence-transformers"]
  assert registry.names("out") == ["to-hf"]
  with pytest.raises(ValueError, match="unknown checkpoint format 'to-hf'; choose one of hf-funnel, hf-bert, "
                                       "hf-albert, tf1-bert, funnel-tf, keras3, sentence-transformers"):
    registry.get("to-hf", "in")
  with pytest.raises(ValueError, match="'in' format needs read"):
    registry.Format(name="x", direction="in", help="", description="", add_arguments=None, run=None)
  with pytest.raises(ValueError, match="direction must be one of"):
    registry.Format(name="x", direction="sideways", help="", description="", add_arguments=None, run=None)


def test_help_lists_every_format_without_loading_tensorflow():
  probe = ("import sys, contextlib, io\nfrom zoo.convert.__main__ import main\n"
           "with contextlib.redirect_stdout(io.StringIO()) as out:\n  try:\n    main(['--help'])\n"
           "  except SystemExit:\n    pass\nprint('tensorflow' in sys.modules, out.getvalue())")
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
  result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          cwd=root,
                          check=True)
  loaded, _, text = result.stdout.partition(" ")
  assert loaded == "False"
  for name in registry.names():
    assert name in text

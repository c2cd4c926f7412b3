"""zoo.convert.formats and zoo.convert.registry: a format is one module; the command line and its errors come
from declarations."""

import json
import os
import subprocess
import sys

import pytest

from zoo.convert import formats
from zoo.convert import registry
from zoo.convert.__main__ import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
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
  formats.declared.cache_clear()
  yield
  sys.modules.pop("zoo.convert.formats.toy_out", None)
  formats.declared.cache_clear()


def test_a_new_module_is_a_new_subcommand(toy_format, capsys):
  assert "toy-out" in formats.names("out") and "toy-out" not in formats.names("in")
  assert main(["toy-out", "thing", "--shout"]) == 0
  assert capsys.readouterr().out == "THING\n"
  assert main(["toy-out", "bad"]) == 1
  assert capsys.readouterr().err == "zoo.convert: error: bad: not a thing this format reads\n"
  with pytest.raises(SystemExit):
    main(["--help"])
  assert "toy-out" in capsys.readouterr().out


def test_the_formats_and_the_errors_that_list_them():
  assert formats.names("in") == ["hf-funnel", "hf-bert", "hf-albert", "tf1-bert", "funnel-tf", "keras3",
                                   "sentence-transformers"]
  assert formats.names("out") == ["to-hf"]
  with pytest.raises(ValueError, match="unknown checkpoint format 'to-hf'; choose one of hf-funnel, hf-bert, "
                                       "hf-albert, tf1-bert, funnel-tf, keras3, sentence-transformers"):
    formats.get("to-hf", "in")
  with pytest.raises(ValueError, match="'in' format needs read"):
    registry.Format(name="x", direction="in", help="", description="", add_arguments=None, run=None)
  with pytest.raises(ValueError, match="'out' format needs run"):
    registry.Format(name="x", direction="out", help="", description="", add_arguments=None)
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
  for name in formats.names():
    assert name in text


def test_a_source_that_is_not_there_fails_at_once_naming_it_and_what_the_format_reads(tmp_path):
  """A missing SRC, or a directory without the format's files, is refused before TensorFlow, torch or
  transformers is imported and before any download (in well under a second, not the 10-20 s of the
  imports)."""
  (tmp_path / "empty").mkdir()
  probe = "\n".join([
      "import contextlib, io, json, sys",
      "from zoo.convert import formats",
      "from zoo.convert.__main__ import main",
      "errors = {}",
      "for name in formats.names('in'):",
      "  for src in (sys.argv[1] + '/missing/path', sys.argv[1] + '/empty'):",
      "    with contextlib.redirect_stderr(io.StringIO()) as err:",
      "      code = main([name, src, '--out', sys.argv[1] + '/out'])",
      "    errors[name + ' ' + src.rsplit('/', 1)[1]] = [code, err.getvalue()]",
      "print(json.dumps(dict(errors=errors, loaded=sorted({'tensorflow', 'torch', 'transformers'}",
      "                                                   & set(sys.modules)))))"])
  result = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), check=True)
  printed = json.loads(result.stdout)
  assert printed["loaded"] == []
  errors = printed["errors"]
  missing = f"zoo.convert: error: {tmp_path}/missing/path: no such directory"
  assert errors["hf-bert path"] == [1, (
      f"{missing} (and not a Hugging Face hub id, which is `name` or `owner/name`): hf-bert converts a "
      "Hugging Face BERT checkpoint directory (config.json, model.safetensors or pytorch_model.bin, "
      "vocab.txt) or a hub id such as bert-base-uncased\n")]
  assert errors["tf1-bert path"][1].startswith(f"{missing} or checkpoint prefix: tf1-bert converts Google's")
  empty = f"zoo.convert: error: {tmp_path}/empty: the directory has no"
  assert errors["hf-funnel empty"][1].startswith(f"{empty} config.json: hf-funnel converts a Hugging Face")
  assert errors["sentence-transformers empty"][1].startswith(f"{empty} modules.json")
  for name in formats.names("in"):
    assert errors[f"{name} path"][0] == 1 and errors[f"{name} path"][1].startswith(missing), name
  assert not (tmp_path / "out").exists()

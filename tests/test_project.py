"""Project-wide rules: Keras 2 only (but for the Keras 3 edition), public layers registered and documented."""

import doctest
import importlib
import pathlib
import re

import pytest
import tensorflow as tf
import tf_keras as keras

import zoo.layers

ROOT = pathlib.Path(__file__).resolve().parents[1]
# tf.keras is Keras 3 under TF 2.16+ and does not mix with Model Garden's tf_keras layers: forbidden.
FORBIDDEN_KERAS = re.compile(r"(^|[^_\w])tf\.keras\b|"  # forbidden
                             r"from tensorflow import keras|^\s*import keras\b|^\s*from keras\b", re.M)
# The Keras 3 edition and what measures it import Keras 3 on purpose (and never tf_keras:
# tests/test_structure.py).
KERAS3_SOURCES = ("zoo/keras3/", "benchmarks/keras3.py", "benchmarks/keras3_lengths.py",
                  "notebooks/05_keras3_jax_tpu.ipynb")
DOCUMENTED_MODULES = [
    "zoo.layers.attention", "zoo.layers.relative_attention", "zoo.layers.funnel_pooling",
    "zoo.layers.transformer_block", "zoo.layers.embeddings", "zoo.configs", "zoo.configs.funnel",
    "zoo.configs.transformer",
    "zoo.models.transformer_encoder", "zoo.models.funnel_encoder", "zoo.models.heads",
    "zoo.models.pretrainers", "zoo.presets", "zoo.analysis", "tpu.config", "tpu.tasks",
    "tpu.tasks.task_registry", "tpu.tasks.sequence", "tpu.tasks.tagging", "tpu.data", "tpu.data.demo",
    "tpu.data.pipeline", "tpu.data.documents", "tpu.data.fingerprints", "export.predict", "zoo.model_dir",
    "zoo.atomic_files", "zoo.models.losses", "zoo.lazy"]


def _project_sources():
  for folder in ("zoo", "tpu", "export", "benchmarks", "notebooks"):
    for path in sorted((ROOT / folder).rglob("*")):
      if path.suffix in (".py", ".ipynb"):
        yield path


def test_no_module_uses_tf_keras():
  sources = list(_project_sources())
  assert sources, "no project sources found"
  offenders = [str(p.relative_to(ROOT)) for p in sources if FORBIDDEN_KERAS.search(p.read_text())
               and not str(p.relative_to(ROOT)).startswith(KERAS3_SOURCES)]
  assert not offenders, f"use 'import tf_keras as keras'; tf.keras / Keras 3 is forbidden: {offenders}"


def test_the_forbidden_pattern_catches_tf_keras():
  assert FORBIDDEN_KERAS.search("x = tf.keras.layers.Dense(3)")   # forbidden
  assert FORBIDDEN_KERAS.search("import keras\n")
  assert not FORBIDDEN_KERAS.search("import tf_keras as keras\nkeras.layers.Dense(3)")


# A rename publishes a file or folder; zoo/atomic_files.py holds the project's only ones, and
# zoo/model_dir.py the export versions' (a folder renamed to its version number).
RENAME = re.compile(r"\b(?:os\.(?:rename|replace)|gfile\.(?:rename|Rename))\(|\.rename\(")
RENAMING_MODULES = (ROOT / "zoo" / "atomic_files.py", ROOT / "zoo" / "model_dir.py")


def test_only_the_atomic_writers_rename():
  sources = list(_project_sources()) + [ROOT / "tests" / "conftest.py"]
  offenders = [str(p.relative_to(ROOT)) for p in sources
               if RENAME.search(p.read_text()) and p not in RENAMING_MODULES]
  assert not offenders, f"write through zoo.atomic_files' atomic_file / atomic_path instead: {offenders}"
  assert all(RENAME.search(path.read_text()) for path in RENAMING_MODULES)
  assert RENAME.search("os.replace(a, b)") and RENAME.search("tf.io.gfile.rename(a, b)")
  assert not RENAME.search("text.replace('a', 'b')")


@pytest.mark.parametrize("name", zoo.layers.__all__)
def test_public_layers_are_registered_and_documented(name):
  obj = getattr(zoo.layers, name)
  assert obj.__doc__ and len(obj.__doc__.strip()) > 40, f"{name} needs a docstring"
  if isinstance(obj, type) and issubclass(obj, keras.layers.Layer):
    assert keras.utils.get_registered_object(f"zoo>{name}") is obj
    assert "Example:" in obj.__doc__


@pytest.mark.parametrize("module_name", DOCUMENTED_MODULES)
def test_docstring_examples_run(module_name):
  import zoo.models
  module = importlib.import_module(module_name)
  keras.utils.set_random_seed(0)
  names = {"tf": tf, "np": __import__("numpy"), **{n: getattr(zoo.models, n) for n in zoo.models.__all__}}
  result = doctest.testmod(module, extraglobs=names, optionflags=doctest.NORMALIZE_WHITESPACE)
  assert result.attempted > 0, f"no docstring examples found in {module_name}"
  assert result.failed == 0, f"{result.failed} docstring example(s) failed in {module_name}"


# --- Every repository path that a README, notebook, docstring or comment names exists. ---

# Bare file names checked at the top level (or beside the naming file): these name repository files.
TOP_LEVEL_FILE = re.compile(
    r"^(?:[A-Z][A-Z0-9_-]*\.md|Makefile|pyproject\.toml|requirements(?:-[\w-]+)?\.txt)$")
# A bare module or notebook name (`train.py`) names a tracked file of that name somewhere, unless it
# is one of the files of other projects that the docs cite.
BARE_CODE_FILE = re.compile(r"^[\w-]+\.(?:py|ipynb)$")
OTHER_PROJECTS_FILES = {
    "create_pretraining_data.py", "run_squad.py", "tokenization.py",   # Google's BERT, Model Garden
    "modeling.py", "modify_ckpt.py", "ops.py", "race.py",               # the Funnel authors' code
    "utils_multiple_choice.py", "run_swag.py",                          # transformers' examples
}
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
# A candidate is a run of characters that can appear in a path (and in the placeholders and
# globs it is told apart from); quotes, backticks, brackets, commas and `=` end it.
PATH_CANDIDATE = re.compile(r"[^\s`'\"()\[\],;|=]+")
LINE_SUFFIX = re.compile(r"(?:::[\w\[\]-]+|(?::\d+)+)$")   # MODULE::test_x, MODULE:12, MODULE:12:3
PLACEHOLDER_CHARS = set("*?<>{}$~%[]")


def _tracked(root=ROOT):
  """The files git tracks (relative POSIX paths) and every folder holding one: what a clone has, not
  what a run left in the working tree (`runs/`, `.venv`)."""
  import subprocess
  listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
  files = {name for name in listed.decode().split("\0") if name}
  folders = {str(pathlib.PurePosixPath(name).parents[i]) for name in files
             for i in range(len(pathlib.PurePosixPath(name).parents) - 1)}
  return files, folders


TRACKED_FILES, TRACKED_FOLDERS = _tracked()
TRACKED_NAMES = {pathlib.PurePosixPath(name).name for name in TRACKED_FILES}


def _exists(path):
  """Whether `path` (absolute, or relative to the root) is a tracked file or folder."""
  path = pathlib.Path(path)
  try:
    relative = (path if path.is_absolute() else ROOT / path).resolve().relative_to(ROOT).as_posix()
  except ValueError:
    return False
  return relative in TRACKED_FILES or relative in TRACKED_FOLDERS or relative == "."


def _top_level_dirs():
  """The repository's own top-level folders (not hidden, holding code, docs or notebooks)."""
  return {name.split("/")[0] for name in TRACKED_FILES
          if "/" in name and not name.startswith(".") and name.endswith((".py", ".md", ".ipynb"))}


def _tracked_files(suffix):
  return sorted(ROOT / name for name in TRACKED_FILES if name.endswith(suffix))


def _markdown_files():
  return _tracked_files(".md")


def _python_files():
  return _tracked_files(".py")


def _notebook_files():
  return _tracked_files(".ipynb")


def _python_prose(source):
  """`(line number, text)` of the docstrings and comments of a Python source."""
  import ast
  import io
  import tokenize
  lines = source.splitlines()
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
      body = node.body
      if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
          and isinstance(body[0].value.value, str):
        for number in range(body[0].lineno, body[0].end_lineno + 1):
          yield number, lines[number - 1]
  for token in tokenize.generate_tokens(io.StringIO(source).readline):
    if token.type == tokenize.COMMENT:
      yield token.start[0], token.string


def _notebook_lines(path):
  """`(cell N line M, text)` of a notebook's Markdown cells and its code cells' comments."""
  import json
  cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
  for index, cell in enumerate(cells, start=1):
    for number, text in enumerate("".join(cell["source"]).splitlines(), start=1):
      if cell["cell_type"] == "markdown" or "#" in text:
        text = text if cell["cell_type"] == "markdown" else text[text.index("#"):]
        yield f"cell {index} line {number}", text


def _candidate_paths(text):
  """Path-like tokens of one line of prose, cleaned of punctuation, anchors and line numbers."""
  for match in PATH_CANDIDATE.finditer(text):
    token = match.group(0).strip("*").rstrip(".:!?")
    token = LINE_SUFFIX.sub("", token.split("#")[0]).rstrip(".:")
    if not token or ":" in token or token.startswith(("-", ".", "/")):
      continue   # URLs, gs:// and data specs (tfds:, text:), flags, relative or absolute paths
    if PLACEHOLDER_CHARS & set(token):
      continue   # globs and placeholders (BASE/<version>, $(DEMO_DIR))
    if "/" not in token and not TOP_LEVEL_FILE.match(token) and not BARE_CODE_FILE.match(token):
      continue   # plain words and data file names (config.json, a.txt)
    yield token


def _named_path_problem(token, folder, top_level):
  """None if `token` (named in a file of `folder`) is not a repository path or exists, else a message.

  A path is resolved beside the naming file first (a package README saying `configs/demo.json`
  or `README.md`), then at the repository root. Only paths starting with a top-level folder of
  the repository, or with a folder beside the naming file, are checked: `official/nlp/...`
  (an installed package) and `MODEL_DIR/config.json` (a placeholder) are not repository paths.
  A bare module or notebook name must be a tracked file's name somewhere (`OTHER_PROJECTS_FILES`
  aside). Existing means tracked by git: what a run writes into the working tree does not count.
  """
  if "/" not in token and BARE_CODE_FILE.match(token):
    if token in TRACKED_NAMES or token in OTHER_PROJECTS_FILES:
      return None
    return f"missing file {token} (no tracked file has this name)"
  first = token.split("/")[0]
  if "/" in token and first not in top_level and not _exists(folder / first):
    return None
  if _exists(folder / token) or _exists(ROOT / token):
    return None
  return f"missing path {token}"


def _link_problem(target, folder):
  """None if a Markdown link target is external, an anchor or an existing file, else a message."""
  if "://" in target or target.startswith(("#", "mailto:")):
    return None
  path = target.split("#")[0]
  if not path or PLACEHOLDER_CHARS & set(path):
    return None
  resolved = ROOT / path.lstrip("/") if path.startswith("/") else folder / path
  return None if _exists(resolved) else f"missing path {target} (a link)"


def _path_problems(path, lines, top_level):
  """`file:line: missing path` for every named repository path of `lines` that does not exist."""
  folder, name = path.parent, path.relative_to(ROOT)
  for number, text in lines:
    problems = []
    if path.suffix in (".md", ".ipynb"):
      problems += [_link_problem(target, folder) for target in MARKDOWN_LINK.findall(text)]
      text = MARKDOWN_LINK.sub("]()", text)
    problems += [_named_path_problem(token, folder, top_level) for token in _candidate_paths(text)]
    yield from (f"{name}:{number}: {problem}" for problem in problems if problem)


def test_named_repository_paths_exist():
  top_level = _top_level_dirs()
  assert {"zoo", "tpu", "export", "tests", "notebooks"} <= top_level, top_level
  markdown, python, notebooks = _markdown_files(), _python_files(), _notebook_files()
  assert ROOT / "README.md" in markdown and ROOT / "zoo" / "layers" / "attention.py" in python
  assert ROOT / "notebooks" / "03_layer_reuse.ipynb" in notebooks
  problems = []
  for path in markdown:
    problems += _path_problems(path, enumerate(path.read_text().splitlines(), start=1), top_level)
  for path in python:
    problems += _path_problems(path, _python_prose(path.read_text()), top_level)
  for path in notebooks:
    problems += _path_problems(path, _notebook_lines(path), top_level)
  assert not problems, "files name paths that are not in the repository:\n" + "\n".join(problems)


def test_the_path_check_reads_what_git_tracks_not_what_runs_leave(tmp_path):
  # `make demo` writes runs/demo; a README naming runs/sst2 names no repository path either way.
  (ROOT / "runs" / "check-untracked").mkdir(parents=True, exist_ok=True)
  try:
    assert _named_path_problem("runs/check-untracked", ROOT, _top_level_dirs()) is None   # not a repo folder
    assert not _exists(ROOT / "runs" / "check-untracked") and "runs" not in _top_level_dirs()
  finally:
    (ROOT / "runs" / "check-untracked").rmdir()
  assert _exists(ROOT / "zoo" / "layers") and _exists("README.md") and not _exists(ROOT / ".venv")
  # The stale names the check exists for: a module that became a package, a moved module.
  assert _named_path_problem("tasks.py", ROOT / "tpu", _top_level_dirs()) is not None
  assert _named_path_problem("tpu/demo_data.py", ROOT / "notebooks", _top_level_dirs()) is not None
  assert _named_path_problem("modify_ckpt.py", ROOT / "zoo", _top_level_dirs()) is None   # the authors'
  notebook = tmp_path / "n.ipynb"
  notebook.write_text('{"cells": [{"cell_type": "code", "source": ["x = 1  # see tpu/demo_data.py\\n"]},'
                      ' {"cell_type": "markdown", "source": ["Run [it](tpu/none.md)."]}]}')
  assert list(_notebook_lines(notebook)) == [("cell 1 line 1", "# see tpu/demo_data.py"),
                                             ("cell 2 line 1", "Run [it](tpu/none.md).")]


def test_the_path_check_tells_paths_from_placeholders():
  found = list(_candidate_paths(
      "see zoo/layers/README.md, DESIGN.md#masks and tests/zoo/layers/reference.py:12; "
      "not https://x.org/zoo/a.md, gs://bucket/zoo/a, tfds:glue/sst2, BASE/<version>/, "
      "zoo/layers/*.py, requirements*.txt, $(DEMO_DIR)/export, ../up.md or config.json"))
  assert found == ["zoo/layers/README.md", "DESIGN.md", "tests/zoo/layers/reference.py"]
  top_level, text = _top_level_dirs(), ROOT / "zoo" / "text"
  assert _named_path_problem("README.md", text, top_level) is None        # zoo/text/README.md
  assert _named_path_problem("tpu/configs/demo.json", text, top_level) is None
  assert _named_path_problem("configs/demo.json", ROOT / "tpu", top_level) is None
  assert _named_path_problem("official/nlp/tools/tokenization.py", ROOT, top_level) is None
  assert _named_path_problem("MODEL_DIR/config.json", ROOT, top_level) is None
  assert _named_path_problem("zoo/no_such_module.py", text, top_level) == "missing path zoo/no_such_module.py"
  assert _named_path_problem("NO_SUCH_FILE.md", ROOT, top_level) is not None
  assert _link_problem("../../DESIGN.md#7-serving", text) is None
  assert _link_problem("../DESIGN.md", text) is not None
  assert _link_problem("https://arxiv.org/abs/2006.03236", text) is None
  problems = list(_path_problems(ROOT / "zoo" / "text" / "README.md",
                                 [(3, "[a](missing.md) and zoo/none.py")], top_level))
  assert problems == ["zoo/text/README.md:3: missing path missing.md (a link)",
                      "zoo/text/README.md:3: missing path zoo/none.py"]


# --- DESIGN.md's layout names every module of the packages. ---

LAYOUT_PACKAGES = ("zoo", "tpu", "export", "benchmarks")


def _layout_modules(design):
  """The module paths (`zoo/layers/attention.py`) DESIGN.md's Layout block names: a line at the left margin
  opens a package, an indented line starting `folder/` a folder of it, deeper lines continue."""
  block = design.split("### Layout", 1)[1].split("```", 2)[1]
  named, package, folder = set(), None, None
  for line in block.splitlines()[1:]:
    words = line.split()
    if not words:
      continue
    indent = len(line) - len(line.lstrip())
    if indent == 0:
      package, folder, words = words[0].rstrip("/"), None, words[1:]
    elif indent <= 4:
      folder = words[0].rstrip("/") if words[0].endswith("/") else None
      words = words[1:] if folder else words
    for module in re.findall(r"\b\w+\.py\b", " ".join(words)):
      named.add("/".join(filter(None, (package, folder, module))))
  return named


def test_the_layout_names_every_module():
  named = _layout_modules((ROOT / "DESIGN.md").read_text())
  modules = {name for name in TRACKED_FILES if name.split("/")[0] in LAYOUT_PACKAGES
             and name.endswith(".py") and not name.endswith("__init__.py")}
  assert len(modules) > 100 and "zoo/convert/formats/to_hf.py" in named
  assert sorted(modules - named) == [], "DESIGN.md's Layout does not name these modules"
  unknown = sorted(name for name in named - modules if name.split("/")[0] in LAYOUT_PACKAGES
                   and not name.endswith("__init__.py"))
  assert unknown == [], "DESIGN.md's Layout names modules that do not exist"


# --- Every command a README shows parses with the command's own parser. ---

# The commands' argument parsers (module: (module of the parser, its function)).
COMMAND_PARSERS = {
    "tpu.train": ("tpu.train", "parser"), "tpu.pretraining_data": ("tpu.pretraining_data", "parser"),
    "export.saved_model": ("export.saved_model", "parser"), "export.predict": ("export.predict", "parser"),
    "zoo.convert": ("zoo.convert.__main__", "parser"), "zoo.text": ("zoo.text.__main__", "_parser"),
}
# A command line: `python -m MODULE ...`, maybe after `!`, a path to the interpreter and `VAR=value`s.
COMMAND = re.compile(r"^\s*!?(?:\w+=\S+\s+)*(?:\S*/)?python3?(?:\.\d+)? -m ([\w.]+)(.*)")


def _shown_commands(path):
  """`(line, module, arguments)` of every `python -m MODULE ...` line in the Markdown file's code blocks
  (continuation lines joined, comments dropped, `!`, `.venv/bin/` and `VAR=value` prefixes allowed)."""
  import shlex
  fenced, pending, start = False, "", 0
  for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
    if text.lstrip().startswith("```"):
      fenced, pending = not fenced, ""
      continue
    if not fenced:
      continue
    if not pending:
      start = number
    pending += text.rstrip().removesuffix("\\") + " "
    if text.rstrip().endswith("\\"):
      continue
    match = COMMAND.match(pending)
    line, pending = pending, ""
    if not match or match.group(1) not in COMMAND_PARSERS:
      continue
    try:
      arguments = shlex.split(match.group(2), comments=True)
    except ValueError:   # not a shell line (Python code that names a command)
      continue
    for stop in ("|", "&&", ";", ">"):
      arguments = arguments[:arguments.index(stop)] if stop in arguments else arguments
    if "..." not in arguments and "..." not in line.split("#")[0].split():
      yield start, match.group(1), arguments


def _command_problems(path):
  """`(number of commands checked, [file:line: the parser's error])` of one Markdown file."""
  import contextlib
  import io
  problems, checked = [], 0
  for number, module, arguments in _shown_commands(path):
    name, function = COMMAND_PARSERS[module]
    parser = getattr(importlib.import_module(name), function)()
    error = io.StringIO()
    try:
      with contextlib.redirect_stderr(error):
        if module == "tpu.pretraining_data":   # Apache Beam's own options pass through
          parser.parse_known_args(arguments)
        else:
          parser.parse_args(arguments)
      checked += 1
    except SystemExit:
      message = error.getvalue().strip().splitlines()[-1:]
      problems.append(f"{path.name}:{number}: python -m {module}: {' '.join(message)}")
  return checked, problems


def test_the_commands_the_readmes_show_parse(tmp_path):
  results = [_command_problems(path) for path in _markdown_files()]
  assert sum(checked for checked, _ in results) > 30
  problems = [problem for _, found in results for problem in found]
  assert not problems, "README commands that their parser refuses:\n" + "\n".join(problems)
  # The check can fail: a renamed flag, a lost choice.
  shown = tmp_path / "README.md"
  shown.write_text("```sh\npython -m tpu.train --model funnel_b4_4_4 --task classify \\\n"
                   "    --no-such-flag 3\n"
                   "!python -m export.predict --saved-model runs/demo/export/1 \"a film\"   # fine\n```\n")
  checked, problems = _command_problems(shown)
  assert checked == 1 and len(problems) == 1 and "README.md:2: python -m tpu.train" in problems[0]
  assert "unrecognized arguments: --no-such-flag 3" in problems[0]

"""The Colab notebooks of notebooks/: each runs top to bottom on CPU with small settings.

The runner drops the cells tagged `skip-ci` (installs and TPU-only cells), injects the
small settings of `CI_PARAMETERS` right after the cell tagged `parameters` (the
papermill convention), and executes the notebook with nbclient in a fresh kernel whose
working directory is a temporary directory, with the repository on PYTHONPATH,
matplotlib's Agg backend and the suite's XLA flags (tests/conftest.py: half the compile
time). A cell that raises fails the test, naming the cell.

The repository's copies must be clean and runnable from Colab: no outputs or execution
counts, no repository address of their own (`ZOO_REPO`, a parameter, says where the zoo
is; its default, None, finds the clone the notebook runs in), one `parameters` cell of plain
assignments that holds every name CI sets, and
`skip-ci` only on install cells (they `pip install`) or TPU-only cells (first line
`# TPU only`). The install and gs:// sign-in cells are also run here with fake shell
commands, fake TPU chips and a fake `google.colab`.
"""

import ast
import os
import pathlib
import re
import sys
import types

import nbformat
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(path.name for path in NOTEBOOK_DIR.glob("*.ipynb"))
PARAMETERS_TAG = "parameters"
SKIP_TAG = "skip-ci"
TPU_ONLY_MARK = "# TPU only"
CELL_TIMEOUT = 300   # seconds per cell

# The small CPU settings of every notebook: tiny models (width 32, 2 layers), a few dozen steps,
# the synthetic demo data (no download). Injected after each notebook's parameters cell.
_TINY_TRANSFORMER = dict(hidden_size=32, num_heads=2, intermediate_size=64, num_layers=2)
_PRETRAINING = dict(SIZE="small", MODEL_OVERRIDES=_TINY_TRANSFORMER, DEMO_CORPUS=True, STEPS=12,
                    BATCH_SIZE=16, SEQ_LENGTH=32, LEARNING_RATE=1e-3, WARMUP_STEPS=3, STEPS_PER_EXECUTION=4,
                    VOCAB_SIZE=200)
CI_PARAMETERS = {
    "01_finetune_tpu.ipynb": dict(
        MODEL_OVERRIDES=dict(hidden_size=32, num_heads=2, intermediate_size=64, block_sizes=[1, 1, 1]),
        DATA="demo", STEPS=12, BATCH_SIZE=16, EVAL_BATCH_SIZE=250, SEQ_LENGTH=32, LEARNING_RATE=1e-3,
        FINE_TUNE_LEARNING_RATE=1e-3, WARMUP_STEPS=3, EVAL_EVERY=4, STEPS_PER_EXECUTION=4, VOCAB_SIZE=200),
    # Notebook 02 on the demo sentences as text, one seed (its loop over seeds is plain; the
    # pydocs corpus it offers is the `pydocs` source, tested in tests/tpu/data).
    "02_pretrain_realformer.ipynb": dict({key: value for key, value in _PRETRAINING.items()
                                          if key != "DEMO_CORPUS"},
                                         DATA="demo", SEEDS=[0], EVAL_BATCH_SIZE=250, STEPS=12,
                                         EVAL_EVERY=12),
    "03_layer_reuse.ipynb": dict(SEQ_LENGTH=32, HIDDEN_SIZE=32, NUM_HEADS=2, TRAIN_EXAMPLES=512, EPOCHS=2),
    "04_attention_analysis.ipynb": dict(_PRETRAINING, ANALYSIS_EXAMPLES=32),
    # The Keras 3 notebook on JAX (one CPU device): a tiny Funnel preset on the demo sentences, one
    # batch of each split (JAX compiles the training and the validation step once each).
    "05_keras3_jax_tpu.ipynb": dict(
        MODEL_OVERRIDES=dict(hidden_size=32, num_heads=2, intermediate_size=64, block_sizes=[1, 1, 1]),
        DATA="demo", TRAIN_EXAMPLES=32, VALIDATION_EXAMPLES=32, EPOCHS=1, BATCH_SIZE=32, SEQ_LENGTH=32,
        LEARNING_RATE=1e-3),
    # Multiple choice from scratch on a small RACE-layout set the notebook writes.
    "06_multiple_choice_race.ipynb": dict(
        PUBLISHED_CHECKPOINT=None,
        MODEL_OVERRIDES=dict(hidden_size=32, num_heads=2, intermediate_size=64, block_sizes=[1, 1, 1]),
        ARTICLES=16, STEPS=8, BATCH_SIZE=8, EVAL_BATCH_SIZE=16, SEQ_LENGTH=48, MAX_QA_LENGTH=16,
        LEARNING_RATE=1e-3, WARMUP_STEPS=2, STEPS_PER_EXECUTION=4, VOCAB_SIZE=300),
    # Semantic search on the standard library's docstring pairs (written by the notebook, no download).
    "07_semantic_search.ipynb": dict(
        MODEL_OVERRIDES=dict(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64), STEPS=12,
        BATCH_SIZE=16, EVAL_BATCH_SIZE=128, SEQ_LENGTH=32, LEARNING_RATE=1e-3, WARMUP_STEPS=2,
        STEPS_PER_EXECUTION=4, VOCAB_SIZE=300),
}
# Notebooks whose install cell leaves the runtime's JAX and TensorFlow-less TPU stack alone: they
# install requirements.txt (TensorFlow's CPU build) and keras-hub wherever they run.
KERAS3_NOTEBOOKS = ("05_keras3_jax_tpu.ipynb",)


def _read(name):
  return nbformat.read(NOTEBOOK_DIR / name, as_version=4)


def _tags(cell):
  return cell.get("metadata", {}).get("tags", [])


def _parameters_index(notebook):
  indices = [index for index, cell in enumerate(notebook.cells) if PARAMETERS_TAG in _tags(cell)]
  assert len(indices) == 1, f"expected one cell tagged {PARAMETERS_TAG!r}, found {len(indices)}"
  return indices[0]


def _assigned_names(source):
  """Names a parameters cell assigns; fails on anything but plain assignments."""
  names = []
  for statement in ast.parse(source).body:
    assert isinstance(statement, ast.Assign) and all(isinstance(t, ast.Name) for t in statement.targets), (
        f"a parameters cell holds only NAME = value lines, got: {ast.unparse(statement)}")
    names.extend(target.id for target in statement.targets)
  return names


def _injected_source(name, extra=None):
  lines = ["# Injected by tests/notebooks/test_notebooks.py: small settings for a CPU."]
  lines += [f"{key} = {value!r}" for key, value in {**CI_PARAMETERS[name], **(extra or {})}.items()]
  return "\n".join(lines)


def ci_notebook(name, extra=None):
  """The notebook as CI runs it: skip-ci cells dropped, small settings (and `extra` ones) injected."""
  notebook = _read(name)
  notebook.cells = [cell for cell in notebook.cells if SKIP_TAG not in _tags(cell)]
  injected = nbformat.v4.new_code_cell(_injected_source(name, extra),
                                       metadata={"tags": ["injected-parameters"]})
  notebook.cells.insert(_parameters_index(notebook) + 1, injected)
  return notebook


# ---------------------------------------------------------------------------------------------
# The repository's copies.


def test_every_notebook_has_ci_settings():
  assert NOTEBOOKS, f"no notebooks in {NOTEBOOK_DIR}"
  assert sorted(CI_PARAMETERS) == NOTEBOOKS


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_is_stripped_and_valid(name):
  notebook = _read(name)
  nbformat.validate(notebook)
  dirty = [index for index, cell in enumerate(notebook.cells)
           if cell.cell_type == "code" and (cell.outputs or cell.execution_count is not None)]
  assert not dirty, f"{name}: cells {dirty} have outputs or execution counts; clear them before committing"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_says_how_to_open_it_and_names_no_repository_address(name):
  notebook = _read(name)
  first = notebook.cells[0]
  assert first.cell_type == "markdown"
  assert re.search(r"^# \S", first.source, re.M), f"{name}: the first cell needs a title"
  assert "Colab" in first.source and "`ZOO_REPO`" in first.source
  # Where the zoo lives is the reader's ZOO_REPO, not an address written into the notebook.
  hosts = sorted({match for cell in notebook.cells
                  for match in re.findall(r"(?:github\.com|gitlab\.com)/[\w.-]+/[\w.-]+", cell.source)})
  assert not hosts, f"{name} names repository addresses: {hosts}"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_parameters_cell_sets_every_name_ci_overrides(name):
  notebook = _read(name)
  cell = notebook.cells[_parameters_index(notebook)]
  assert cell.cell_type == "code"
  names = _assigned_names(cell.source)
  unknown = sorted(set(CI_PARAMETERS[name]) - set(names))
  assert not unknown, f"{name}: CI sets {unknown}, which its parameters cell does not define"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_only_install_and_tpu_only_cells_are_skipped(name):
  for cell in _read(name).cells:
    if SKIP_TAG in _tags(cell):
      install = "pip install" in cell.source
      tpu_only = cell.source.startswith(TPU_ONLY_MARK)
      assert cell.cell_type == "code" and (install or tpu_only), (
          f"{name}: a {SKIP_TAG!r} cell must install packages or start with {TPU_ONLY_MARK!r}:\n"
          f"{cell.source}")


def _cell(notebook, cell_id):
  (cell,) = [cell for cell in notebook.cells if cell.get("id") == cell_id]
  return cell


class _FakeShell:
  """Stands in for IPython in a cell's code: `!` commands are expanded and recorded, not run."""

  def __init__(self):
    self.commands = []

  def system(self, command):
    from IPython.utils.text import DollarFormatter

    namespace = sys._getframe(1).f_globals   # the cell's namespace, as IPython expands it
    self.commands.append(DollarFormatter().vformat(command, [], namespace))


def _run_install_cell(name, zoo_repo, chips, monkeypatch):
  from IPython.core.inputtransformer2 import TransformerManager

  from tpu import hardware

  monkeypatch.setattr(hardware, "tpu_device_files", lambda root="/": list(chips))
  monkeypatch.setattr(sys, "path", list(sys.path))
  shell = _FakeShell()
  code = TransformerManager().transform_cell(_cell(_read(name), "install").source)
  namespace = {"ZOO_REPO": zoo_repo, "get_ipython": lambda: shell}
  exec(compile(code, f"{name}:install", "exec"), namespace)
  return shell.commands, namespace


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_install_cell_installs_the_tpu_stack_where_there_are_tpu_chips(name, monkeypatch, tmp_path):
  notebook = _read(name)
  assert _assigned_names(notebook.cells[_parameters_index(notebook)].source)[0] == "ZOO_REPO"
  assert _parameters_index(notebook) < notebook.cells.index(_cell(notebook, "install"))
  checkout = str(ROOT)
  path = list(sys.path)
  commands, namespace = _run_install_cell(name, checkout, ["/dev/vfio/0"], monkeypatch)
  # The zoo is installed as a Colab user installs a package, not put on sys.path.
  assert namespace["ZOO_DIR"] == checkout and sys.path == path
  install_zoo = f"{sys.executable} -m pip install -q --no-deps {checkout}"
  if name in KERAS3_NOTEBOOKS:   # JAX drives the TPU: nothing of TensorFlow's TPU build
    assert commands == [install_zoo, f"cd {checkout} && {sys.executable} -m pip install -q -r "
                                     'requirements.txt "keras-hub==0.32.*" "matplotlib==3.*"']
  else:
    assert commands == [install_zoo, f"cd {checkout} && {sys.executable} -m pip install -q -r "
                                     'requirements-tpu.txt "matplotlib==3.*"']
  commands, _ = _run_install_cell(name, checkout, [], monkeypatch)
  assert commands[-1].split(" -r ")[1].startswith("requirements.txt ")

  # A git URL is cloned to ./zoo (the cloning is faked: nothing is fetched).
  monkeypatch.chdir(tmp_path)
  url = "https://git.example.org/me/zoo.git"
  commands, namespace = _run_install_cell(name, url, [], monkeypatch)
  assert commands[0] == f"git clone -q --depth 1 {url} {tmp_path / 'zoo'}"
  clone = tmp_path / "zoo"
  assert namespace["ZOO_DIR"] == str(clone) and commands[1].endswith(f"pip install -q --no-deps {clone}")
  assert commands[2].startswith(f"cd {clone} && ")
  with pytest.raises(FileNotFoundError, match="neither a directory nor a git URL"):
    _run_install_cell(name, "no-such-checkout", [], monkeypatch)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_install_cell_finds_the_clone_it_runs_in_or_says_what_to_set(name, monkeypatch, tmp_path):
  notebook = _read(name)
  assert "ZOO_REPO = None" in notebook.cells[_parameters_index(notebook)].source
  # Opened from a clone: Jupyter runs the notebook in notebooks/, Colab after `%cd zoo` in its root.
  for folder in (NOTEBOOK_DIR, ROOT):
    monkeypatch.chdir(folder)
    commands, namespace = _run_install_cell(name, None, [], monkeypatch)
    assert namespace["ZOO_DIR"] == str(ROOT) and commands[0].endswith(f"pip install -q --no-deps {ROOT}")
  monkeypatch.chdir(tmp_path)   # opened from GitHub or uploaded: not in a clone
  with pytest.raises(FileNotFoundError, match=f"{tmp_path} is not in a clone of the zoo: set ZOO_REPO in the "
                                              "settings to the zoo's git URL"):
    _run_install_cell(name, None, [], monkeypatch)


@pytest.mark.parametrize("name", [name for name in NOTEBOOKS
                                  if not name.startswith("03") and name not in KERAS3_NOTEBOOKS])
def test_gs_directories_sign_in_on_colab_only(name, monkeypatch, capsys):
  notebook = _read(name)
  source = _cell(notebook, "gcs-auth").source
  parameters = _assigned_names(notebook.cells[_parameters_index(notebook)].source)
  variable = "MODEL_DIR" if "MODEL_DIR" in parameters else "RUN_DIR"
  calls = []
  colab = types.ModuleType("google.colab")
  colab.auth = types.SimpleNamespace(authenticate_user=lambda: calls.append("signed in"))
  monkeypatch.setitem(sys.modules, "google.colab", colab)
  exec(source, {variable: "runs/local"})
  assert calls == []
  exec(source, {variable: "gs://bucket/run"})
  assert calls == ["signed in"]
  monkeypatch.setitem(sys.modules, "google.colab", None)   # not Colab: the import fails
  exec(source, {variable: "gs://bucket/run"})
  assert calls == ["signed in"] and "using this machine's Google Cloud credentials" in capsys.readouterr().out


def test_injected_settings_follow_the_parameters_cell():
  notebook = ci_notebook("01_finetune_tpu.ipynb")
  index = _parameters_index(notebook)
  assert notebook.cells[index + 1].source.splitlines()[1:] == [
      f"{key} = {value!r}" for key, value in CI_PARAMETERS["01_finetune_tpu.ipynb"].items()]
  assert not any(SKIP_TAG in _tags(cell) for cell in notebook.cells)


# ---------------------------------------------------------------------------------------------
# Running them.


def _cell_error(error):
  """nbclient's message without the terminal colour codes."""
  return re.sub(r"\x1b\[[0-9;]*m", "", str(error))


def _execute(name, tmp_path, extra=None):
  """Runs the CI version of a notebook in `tmp_path`, offline (`HF_HUB_OFFLINE=1`); returns its
  cells' printed output."""
  from nbclient import NotebookClient
  from nbclient.exceptions import CellExecutionError

  notebook = ci_notebook(name, extra)
  env = dict(os.environ, MPLBACKEND="Agg", TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="",
             HF_HUB_OFFLINE="1",
             PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
  client = NotebookClient(notebook, timeout=CELL_TIMEOUT, kernel_name="python3",
                          resources={"metadata": {"path": str(tmp_path)}})
  failure = None
  try:
    client.execute(env=env)
  except CellExecutionError as error:   # names the cell and holds its source and traceback
    failure = _cell_error(error)
  if failure:
    pytest.fail(f"{name} failed in CI mode (working directory {tmp_path}):\n{failure}", pytrace=False)
  plots = sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*.png"))
  assert plots, f"{name} saved no plot under {tmp_path}"
  return "".join(output.get("text", "") for cell in notebook.cells if cell.cell_type == "code"
                 for output in cell.outputs)


@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_on_cpu(name, tmp_path):
  printed = _execute(name, tmp_path)
  if name.startswith(("01", "05")):   # no network: the published checkpoint is out of reach
    assert "no network: funnel-transformer/small-base cannot be downloaded" in printed


@pytest.mark.slow
def test_notebook_01_fine_tunes_a_published_funnel_checkpoint(tmp_path):
  """A Hugging Face FunnelBaseModel with its FunnelTokenizer files (random weights, written here, as
  the hub serves them): converted, fine-tuned with its own tokenizer settings, exported, queried."""
  import torch
  import transformers

  from tpu.config import TrainConfig
  from tpu.data.demo import demo_words

  checkpoint = tmp_path / "funnel-small-base"
  vocab = tmp_path / "vocab.txt"
  special = ["<pad>", "<unk>", "<cls>", "<sep>", "<mask>", "<s>", "</s>"]
  vocab.write_text("".join(f"{token}\n" for token in special + sorted(set(demo_words())) + [".", ","]))
  config = transformers.FunnelConfig(vocab_size=len(vocab.read_text().split()), block_sizes=[1, 1, 1],
                                     d_model=32, n_head=2, d_head=16, d_inner=64, num_decoder_layers=1)
  torch.manual_seed(0)
  transformers.FunnelBaseModel(config).save_pretrained(checkpoint, safe_serialization=True)
  transformers.FunnelTokenizer(str(vocab)).save_pretrained(checkpoint)
  run = tmp_path / "run"
  run.mkdir()
  printed = _execute("01_finetune_tpu.ipynb", run, dict(PUBLISHED_CHECKPOINT=str(checkpoint)))
  assert f"fine-tuning {checkpoint}" in printed
  trained = TrainConfig.from_model_dir(str(run / "runs" / "sst2"))
  assert trained.init_checkpoint == "runs/sst2-init" and trained.tokenizer["special_tokens"]["cls"] == "<cls>"
  assert trained.tokenizer["cls_type_id"] == 2 and trained.model_overrides["hidden_size"] == 32

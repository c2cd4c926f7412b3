"""The project's structure: imports point one way and form no cycle, export/ knows no task, CLIs start
without TensorFlow."""

import ast
import collections
import itertools
import pathlib
import re
import subprocess
import sys

import pytest

from tpu import tasks

ROOT = pathlib.Path(__file__).resolve().parents[1]
# A package may import only the packages to its left: zoo <- tpu <- export.
LAYERS = ("zoo", "tpu", "export")
CLIS = ("tpu.train", "tpu.pretraining_data", "export.saved_model", "export.predict", "export.serving_ops",
        "zoo.convert", "zoo.presets", "zoo.text", "benchmarks.run")
# The packages whose modules may import one another in no cycle.
CYCLE_PACKAGES = ("zoo", "tpu", "export", "benchmarks")


def _module_name(path, root):
  """The module a .py file under `root` is: `a/b/c.py` is `a.b.c`, a package's `__init__.py` the package."""
  parts = path.relative_to(root).with_suffix("").parts
  return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


# The calls that import the module they name: `importlib.import_module`, the built-in `__import__` and
# `zoo.lazy.lazy_module` (which imports on first use, as an import inside a function does).
IMPORT_CALLS = ("import_module", "__import__", "lazy_module")


def module_imports(path, root=ROOT):
  """(module, names, line) of every import of the module at `path`, at module level or inside functions.

  `import a.b` is ("a.b", (), line) and `from a.b import c, d` ("a.b", ("c", "d"), line); relative
  imports resolve against the module's package (those beyond its top-level package are left out).
  A call of `importlib.import_module`, `__import__` or `lazy_module` imports its first argument:
  - a string literal "a.b" is ("a.b", (), line);
  - `D[key]`, where `D` is a dict literal of module names assigned at module level (the packages'
    `__getattr__` over `_EXPORTS`), is every value of `D`, each at its own line;
  - `f"{__name__}.{name}"` or `f"{package.__name__}.{name}"`, `package` a name an import of the module
    binds, is ("package", None, line): every submodule of that package. It is the form of the loops
    over `pkgutil.iter_modules` of a package's `__path__`, which import each of its modules.
  A name the call computes otherwise is not seen.
  """
  tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
  module = _module_name(path, root)
  package = module if path.name == "__init__.py" else module.rpartition(".")[0]

  def source(node):
    """The absolute name of the module a `from` import takes from, None beyond the top-level package."""
    if not node.level:
      return node.module
    parts = package.split(".")
    if node.level - 1 >= len(parts):
      return None
    return ".".join(parts[:len(parts) - (node.level - 1)] + ([node.module] if node.module else []))

  bound = {}   # {name: the module an import binds it to}, for `name.__name__`
  dicts = {}   # {name: [(module, line)]} of the dict literals of strings assigned at module level
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        name = alias.name if alias.asname else alias.name.split(".")[0]   # `import a.b` binds `a`
        bound[alias.asname or name] = name
    elif isinstance(node, ast.ImportFrom) and source(node):
      bound.update({alias.asname or alias.name: f"{source(node)}.{alias.name}" for alias in node.names})
  for node in tree.body:
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict) and all(
        isinstance(value, ast.Constant) and isinstance(value.value, str) for value in node.value.values):
      for target in node.targets:
        if isinstance(target, ast.Name):
          dicts[target.id] = [(value.value, value.lineno) for value in node.value.values]

  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        yield alias.name, (), node.lineno
    elif isinstance(node, ast.ImportFrom):
      if source(node):
        yield source(node), tuple(alias.name for alias in node.names), node.lineno
    elif isinstance(node, ast.Call) and node.args and _function_name(node.func) in IMPORT_CALLS:
      argument = node.args[0]
      if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
        yield argument.value, (), node.lineno
      elif isinstance(argument, ast.Subscript) and isinstance(argument.value, ast.Name) and \
          argument.value.id in dicts:
        for name, line in dicts[argument.value.id]:
          yield name, (), line
      elif (parent := _submodule_parent(argument, module, bound)) is not None:
        yield parent, None, node.lineno


def _function_name(function):
  """`f` of a call `f(...)` or `a.f(...)`."""
  return function.id if isinstance(function, ast.Name) else getattr(function, "attr", None)


def _submodule_parent(argument, module, bound):
  """The module `m` of an f-string `f"{m.__name__}.{...}"`, `module` of `f"{__name__}.{...}"`, else None."""
  if not isinstance(argument, ast.JoinedStr) or len(argument.values) != 3:
    return None
  head, dot, _ = argument.values
  if not (isinstance(head, ast.FormattedValue) and isinstance(dot, ast.Constant) and dot.value == "."):
    return None
  if isinstance(head.value, ast.Name) and head.value.id == "__name__":
    return module
  if isinstance(head.value, ast.Attribute) and head.value.attr == "__name__" and \
      isinstance(head.value.value, ast.Name):
    return bound.get(head.value.value.id)
  return None


def imported_packages(path, root=ROOT):
  """The top-level names a module imports anywhere (module level or inside functions, by any of the ways
  `module_imports` sees), with line numbers."""
  for name, _, line in module_imports(path, root):
    yield name.split(".")[0], line


def direction_violations(root=ROOT):
  violations = []
  for rank, package in enumerate(LAYERS):
    forbidden = set(LAYERS[rank + 1:])
    for path in sorted((root / package).rglob("*.py")):
      for name, line in imported_packages(path, root):
        if name in forbidden:
          violations.append(f"{path.relative_to(root)}:{line}: {package} imports {name}")
  return violations


def test_imports_point_one_way():
  modules = [path for package in LAYERS for path in (ROOT / package).rglob("*.py")]
  assert len(modules) > 30
  assert direction_violations() == []


def test_the_direction_check_catches_a_local_import(tmp_path):
  for package in LAYERS:
    (tmp_path / package).mkdir()
  (tmp_path / "tpu" / "job.py").write_text("def run():\n  from export import saved_model\n")
  (tmp_path / "zoo" / "layer.py").write_text("import tpu.train\nfrom zoo import models\n")
  (tmp_path / "zoo" / "names.py").write_text('import importlib\n\nfrom zoo.lazy import lazy_module\n\n'
                                             'train = lazy_module("tpu.train")\n\n\ndef load():\n'
                                             '  return importlib.import_module("export.predict")\n')
  assert direction_violations(tmp_path) == ["zoo/layer.py:1: zoo imports tpu",
                                            "zoo/names.py:5: zoo imports tpu",
                                            "zoo/names.py:9: zoo imports export",
                                            "tpu/job.py:2: tpu imports export"]


# The Keras 3 edition (zoo/keras3) imports Keras 3 and never tf_keras; nothing else of zoo imports Keras 3,
# so the tf_keras modules never load it.
KERAS3_PACKAGE = ("zoo", "keras3")
KERAS3_ONLY = ("keras", "keras_hub")


def keras_edition_violations(root=ROOT):
  violations = []
  for path in sorted((root / "zoo").rglob("*.py")):
    inside = path.relative_to(root).parts[:2] == KERAS3_PACKAGE
    for name, line in imported_packages(path, root):
      if inside and name == "tf_keras":
        violations.append(f"{path.relative_to(root)}:{line}: zoo.keras3 imports tf_keras")
      elif not inside and name in KERAS3_ONLY:
        violations.append(f"{path.relative_to(root)}:{line}: a tf_keras module imports {name} (Keras 3)")
      elif not inside and name == "zoo" and ".keras3" in _import_text(path, line):
        violations.append(f"{path.relative_to(root)}:{line}: a tf_keras module imports zoo.keras3")
  return violations


def _import_text(path, line):
  return path.read_text(encoding="utf-8").splitlines()[line - 1]


def test_the_keras_3_edition_and_the_tf_keras_one_never_import_each_others_keras():
  assert (ROOT / "zoo" / "keras3" / "models" / "encoder.py").exists()
  assert keras_edition_violations() == []


def test_the_edition_check_catches_crossed_imports(tmp_path):
  (tmp_path / "zoo" / "keras3").mkdir(parents=True)
  (tmp_path / "zoo" / "keras3" / "layer.py").write_text("import keras\n\n\ndef f():\n  import tf_keras\n")
  (tmp_path / "zoo" / "layers.py").write_text("import tf_keras\nfrom keras import ops\nimport zoo.keras3\n")
  assert keras_edition_violations(tmp_path) == [
      "zoo/keras3/layer.py:5: zoo.keras3 imports tf_keras",
      "zoo/layers.py:2: a tf_keras module imports keras (Keras 3)",
      "zoo/layers.py:3: a tf_keras module imports zoo.keras3"]


# Each edition's twin of a layer or encoder is written in its own module; their arguments stay the same.
TF_KERAS_EDITION = ("zoo/layers", "zoo/models")
KERAS3_EDITION = ("zoo/keras3",)
# Classes of one name in both editions that are not twins: the editions' own bases, and the masked-LM
# heads (the tf_keras one is Model Garden's MaskedLM and takes the encoder's table; the Keras 3 one,
# keras-hub's, takes the backbone's embedding layer: no argument list in common to share).
NOT_TWINS = {"ZooLayer", "EncoderModel", "MaskedLMHead"}


def _edition_classes(root, folders):
  """{class name: (path, its own __init__ parameters, whether it defines get_config, its bases' text)}."""
  classes = {}
  for folder in folders:
    for path in sorted((root / folder).rglob("*.py")):
      for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if not isinstance(node, ast.ClassDef):
          continue
        methods = {item.name: item for item in node.body if isinstance(item, ast.FunctionDef)}
        init = methods.get("__init__")
        parameters = set()
        if init is not None:
          arguments = init.args
          declared = arguments.posonlyargs + arguments.args + arguments.kwonlyargs
          parameters = {argument.arg for argument in declared} - {"self"}
        classes[node.name] = (path.relative_to(root), parameters, "get_config" in methods,
                              [ast.unparse(base) for base in node.bases])
  return classes


# Arguments one edition's layer takes and the other's does not: Keras 3's seed generators and dtype policy,
# its shared word-embedding layer.
EDITION_ARGUMENTS = {"seed", "word_embeddings", "dtype"}


def twin_differences(root=ROOT):
  """The twins (a class of either edition's name) whose constructors take other arguments: each edition's
  layer writes its own constructor, which must stay the other's (`EDITION_ARGUMENTS` aside)."""
  tf_keras, keras3 = _edition_classes(root, TF_KERAS_EDITION), _edition_classes(root, KERAS3_EDITION)
  problems = []
  for name in sorted(set(tf_keras) & set(keras3) - NOT_TWINS):
    (path_a, args_a, _, _), (path_b, args_b, _, _) = tf_keras[name], keras3[name]
    only_a, only_b = sorted(args_a - args_b - EDITION_ARGUMENTS), sorted(args_b - args_a - EDITION_ARGUMENTS)
    if only_a or only_b:
      problems.append(f"{name}: {path_a} alone takes {only_a}, {path_b} alone takes {only_b}")
  return problems


def test_each_twin_takes_the_arguments_of_the_other():
  names = set(_edition_classes(ROOT, TF_KERAS_EDITION)) & set(_edition_classes(ROOT, KERAS3_EDITION))
  assert {"MultiHeadAttention", "RelativeMultiHeadAttention", "TransformerBlock", "EncoderEmbeddings",
          "FunnelPooling", "FunnelUpsampling", "ClsSegmentIds", "FunnelEncoder",
          "TransformerEncoder"} <= names
  assert twin_differences() == []


def test_the_twin_check_catches_an_argument_of_one_edition(tmp_path):
  for folder, text in (("zoo/layers", "class Pool(Base):\n  def __init__(self, size, stride):\n    pass\n"),
                       ("zoo/keras3",
                        "class Pool(Base):\n  def __init__(self, size, seed=None):\n    pass\n")):
    (tmp_path / folder).mkdir(parents=True)
    (tmp_path / folder / "m.py").write_text(text)
  assert twin_differences(tmp_path) == [
      "Pool: zoo/layers/m.py alone takes ['stride'], zoo/keras3/m.py alone takes []"]


def module_paths(root=ROOT, packages=CYCLE_PACKAGES):
  """{module name: path} of every .py file of the packages; a package's `__init__.py` is the package."""
  modules = {}
  for package in packages:
    for path in sorted((root / package).rglob("*.py")):
      modules[_module_name(path, root)] = path
  return modules


def _prefixes(name):
  """'a.b.c' -> ['a', 'a.b']: the packages whose `__init__.py` importing `name` runs first."""
  parts = name.split(".")
  return [".".join(parts[:end]) for end in range(1, len(parts))]


def import_graph(root=ROOT, packages=CYCLE_PACKAGES):
  """{module: {imported module: "path:line" of the first such import}} over the packages' modules.

  Every import `module_imports` sees counts, at module level or inside a function: the statements and the
  calls that import a module they name (`importlib.import_module`, `__import__`, `lazy_module`).
  `import a.b.c` and `from a.b.c import x` are edges to `a.b.c` (or, where that is no module, the
  longest prefix that is) and to the packages `a` and `a.b` whose `__init__.py` Python runs first, but
  for the importer's own packages, which are initialised (or being initialised) before it runs.
  `from a.b import c` is an edge to `a.b.c` where that is a module (`a/b/c.py`, `a/b/c/__init__.py`),
  else to `a.b`. A package's loop that imports each of its modules (`f"{__name__}.{name}"`) is an edge to
  every module and subpackage directly in it. Imports of modules outside the packages are left out.
  """
  modules = module_paths(root, packages)

  def longest_module(name):
    return next((prefix for prefix in reversed([*_prefixes(name), name]) if prefix in modules), None)

  graph = {}
  for module, path in modules.items():
    initialised = {*_prefixes(module), module}   # running when this module's imports run
    where = f"{path.relative_to(root)}"
    edges = graph[module] = {}

    def add(name, line, edges=edges, initialised=initialised, where=where):
      target = longest_module(name)
      if target is None:
        return
      for prefix in _prefixes(target):
        if prefix in modules and prefix not in initialised:
          edges.setdefault(prefix, f"{where}:{line}")
      edges.setdefault(target, f"{where}:{line}")

    for name, names, line in module_imports(path, root):
      if names is None:   # every submodule of `name`
        for submodule in modules:
          if submodule.rpartition(".")[0] == name:
            add(submodule, line)
      elif not names:
        add(name, line)
      else:
        for alias in names:
          submodule = f"{name}.{alias}"
          add(submodule if alias != "*" and submodule in modules else name, line)
  return graph


def _strongly_connected(graph):
  """Tarjan's strongly connected components of `graph` ({node: iterable of nodes})."""
  index, low, stack, on_stack, components = {}, {}, [], set(), []

  def visit(node):
    index[node] = low[node] = len(index)
    stack.append(node)
    on_stack.add(node)
    for successor in sorted(graph.get(node, ())):
      if successor not in index:
        visit(successor)
        low[node] = min(low[node], low[successor])
      elif successor in on_stack:
        low[node] = min(low[node], index[successor])
    if low[node] == index[node]:
      component = []
      while True:
        member = stack.pop()
        on_stack.discard(member)
        component.append(member)
        if member == node:
          break
      components.append(sorted(component))

  for node in sorted(graph):
    if node not in index:
      visit(node)
  return components


def _shortest_cycle(graph, start, members):
  """The shortest path start -> ... -> start inside `members`, as its list of nodes (start twice)."""
  previous, queue = {}, collections.deque([start])
  while queue:
    node = queue.popleft()
    for successor in sorted(graph[node]):
      if successor == start:
        path = [node]
        while path[-1] != start:
          path.append(previous[path[-1]])
        return [*reversed(path), start]
      if successor in members and successor not in previous:
        previous[successor] = node
        queue.append(successor)
  raise AssertionError(f"{start} is on no cycle")


def import_cycles(root=ROOT, packages=CYCLE_PACKAGES, graph=None):
  """Every import cycle, one line each, e.g. 'tpu.data -> tpu.token_data -> tpu.data'.

  A strongly connected component of more than one module, or a module importing itself, is reported
  as the shortest cycle through its first module, and further cycles until every module of it is on
  one of the lines.
  """
  graph = import_graph(root, packages) if graph is None else graph
  lines = []
  for component in _strongly_connected(graph):
    members = set(component)
    if len(component) == 1 and component[0] not in graph[component[0]]:
      continue
    uncovered = list(component)
    while uncovered:
      cycle = _shortest_cycle(graph, uncovered[0], members)
      lines.append(" -> ".join(cycle))
      uncovered = [module for module in uncovered if module not in cycle]
  return lines


def _cycle_report(lines, graph):
  """The cycles with where each of their imports is."""
  report = []
  for line in lines:
    cycle = line.split(" -> ")
    report.append(line)
    report.extend(f"    {a} -> {b}: {graph[a][b]}" for a, b in itertools.pairwise(cycle))
  return "\n".join(report)


def test_no_import_cycle():
  graph = import_graph()
  assert len(graph) > 60 and {"zoo.models", "tpu.train", "export.saved_model", "benchmarks.run"} <= set(graph)
  cycles = import_cycles(graph=graph)
  assert cycles == [], "import cycles:\n" + _cycle_report(cycles, graph)


def _tree(root, files):
  for name, text in files.items():
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
  return root


def test_the_cycle_check_catches_a_cycle_through_a_function_level_import(tmp_path):
  root = _tree(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "from pkg import b\n",
                          "pkg/b.py": "import os\n\n\ndef later():\n  from . import a\n  return a\n",
                          "pkg/c.py": "import pkg.a\nimport tensorflow\n"})
  graph = import_graph(tmp_path, ("pkg",))
  assert graph["pkg.b"] == {"pkg.a": "pkg/b.py:5"}
  assert graph["pkg.c"] == {"pkg.a": "pkg/c.py:1"}   # its own package pkg is initialised before it runs
  assert import_cycles(root, ("pkg",)) == ["pkg.a -> pkg.b -> pkg.a"]
  (root / "pkg" / "b.py").write_text("import pkg.b\n")
  assert import_cycles(root, ("pkg",)) == ["pkg.b -> pkg.b"]   # a module importing itself


def test_a_package_importing_its_submodules_is_no_cycle_unless_one_imports_the_package(tmp_path):
  files = {"pkg/__init__.py": "from pkg.sub import thing\nfrom . import other\nVERSION = 1\n",
           "pkg/sub.py": "from pkg import sibling\nfrom .deep.leaf import x\nthing = sibling\n",
           "pkg/sibling.py": "import pkg.deep.leaf\n",
           "pkg/other.py": "from . import sibling\n",
           "pkg/deep/__init__.py": "", "pkg/deep/leaf.py": "from .helper import y\n",
           "pkg/deep/helper.py": "from ..util import z\n", "pkg/util.py": "z = 1\n"}
  root = _tree(tmp_path, files)
  graph = import_graph(root, ("pkg",))
  assert set(graph["pkg"]) == {"pkg.sub", "pkg.other"}
  assert set(graph["pkg.sub"]) == {"pkg.sibling", "pkg.deep", "pkg.deep.leaf"}
  assert set(graph["pkg.deep.leaf"]) == {"pkg.deep.helper"} and set(graph["pkg.deep.helper"]) == {"pkg.util"}
  assert import_cycles(root, ("pkg",)) == []
  # A sibling that takes a name of the package itself does cycle: `import pkg` runs pkg/__init__.py first.
  (root / "pkg" / "sibling.py").write_text("def f():\n  from pkg import VERSION\n")
  assert import_cycles(root, ("pkg",)) == ["pkg -> pkg.other -> pkg.sibling -> pkg",
                                           "pkg.sub -> pkg.sibling -> pkg -> pkg.sub"]


def test_importing_a_submodule_runs_the_package_inits_on_its_way(tmp_path):
  files = {"p/__init__.py": "import q.x\n", "p/z.py": "", "q/__init__.py": "", "q/x.py": "",
           "q/y.py": "from p.z import name\n"}
  root = _tree(tmp_path, files)
  graph = import_graph(root, ("p", "q"))
  assert graph["p"] == {"q": "p/__init__.py:1", "q.x": "p/__init__.py:1"}
  assert graph["q.y"] == {"p": "q/y.py:1", "p.z": "q/y.py:1"}
  assert import_cycles(root, ("p", "q")) == []   # importing q.x runs q/__init__.py, not q.y
  (root / "q" / "__init__.py").write_text("from . import y\n")
  assert import_cycles(root, ("p", "q")) == ["p -> q -> q.y -> p"]


def test_the_cycle_check_catches_a_cycle_through_importlib_and_lazy_module(tmp_path):
  files = {"pkg/__init__.py": "",
           "pkg/a.py": 'import importlib\n\n\ndef later():\n  return importlib.import_module("pkg.b")\n',
           "pkg/b.py": 'from zoo.lazy import lazy_module\n\na = lazy_module("pkg.a")\n',
           "pkg/c.py": 'import importlib\n\nname = "pkg." + "a"\nmodule = importlib.import_module(name)\n'
                       'builtin = __import__("pkg.b")\n'}
  root = _tree(tmp_path, files)
  graph = import_graph(root, ("pkg",))
  assert graph["pkg.a"] == {"pkg.b": "pkg/a.py:5"}
  assert graph["pkg.b"] == {"pkg.a": "pkg/b.py:3"}   # zoo.lazy is no module of the packages
  assert graph["pkg.c"] == {"pkg.b": "pkg/c.py:5"}   # a name computed otherwise is not seen
  assert import_cycles(root, ("pkg",)) == ["pkg.a -> pkg.b -> pkg.a"]


# A package whose __init__.py imports each of its modules (as tpu/tasks and tpu/data do).
IMPORT_EACH_MODULE = ("import importlib\nimport pkgutil\n\n"
                      "for _module in sorted(info.name for info in pkgutil.iter_modules(__path__)):\n"
                      '  importlib.import_module(f"{__name__}.{_module}")\n')


def test_the_cycle_check_catches_a_cycle_through_a_package_importing_each_of_its_modules(tmp_path):
  files = {"pkg/__init__.py": "", "pkg/checkpoints.py": "from pkg import tasks\n",
           "pkg/tasks/__init__.py": IMPORT_EACH_MODULE, "pkg/tasks/one.py": "",
           "pkg/tasks/two.py": "def restore():\n  from pkg.checkpoints import restore_encoder\n",
           "pkg/tasks/sub/__init__.py": "", "pkg/tasks/sub/deep.py": "",
           "pkg/formats.py": "import importlib\nimport pkgutil\n\n\ndef found():\n"
                             "  from pkg import tasks as package\n"
                             '  return [importlib.import_module(f"{package.__name__}.{info.name}")\n'
                             "          for info in pkgutil.iter_modules(package.__path__)]\n"}
  root = _tree(tmp_path, files)
  graph = import_graph(root, ("pkg",))
  # Every module and subpackage directly in the package, not the subpackage's own modules.
  assert graph["pkg.tasks"] == {name: "pkg/tasks/__init__.py:5"
                                for name in ("pkg.tasks.one", "pkg.tasks.sub", "pkg.tasks.two")}
  assert graph["pkg.formats"] == {"pkg.tasks": "pkg/formats.py:6", "pkg.tasks.one": "pkg/formats.py:7",
                                  "pkg.tasks.sub": "pkg/formats.py:7", "pkg.tasks.two": "pkg/formats.py:7"}
  assert import_cycles(root, ("pkg",)) == ["pkg.checkpoints -> pkg.tasks -> pkg.tasks.two -> pkg.checkpoints"]


def test_the_cycle_check_catches_a_cycle_through_a_module_getattr_over_a_dict_of_modules(tmp_path):
  getattr_over_exports = ('_EXPORTS = {\n    "thing": "pkg.a",\n    "other": "pkg.b",\n}\n\n\n'
                          "def __getattr__(name):\n  import importlib\n"
                          "  return getattr(importlib.import_module(_EXPORTS[name]), name)\n")
  files = {"pkg/__init__.py": getattr_over_exports, "pkg/a.py": "",
           "pkg/b.py": "def f():\n  from app import run\n", "app/__init__.py": "",
           "app/run.py": "from pkg import thing\n"}
  root = _tree(tmp_path, files)
  graph = import_graph(root, ("pkg", "app"))
  assert graph["pkg"] == {"pkg.a": "pkg/__init__.py:2", "pkg.b": "pkg/__init__.py:3"}
  assert import_cycles(root, ("pkg", "app")) == ["app.run -> pkg -> pkg.b -> app.run"]


def test_export_holds_no_task_name():
  names = tasks.names()
  assert {"mlm", "classify"} <= set(names)
  pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")
  hits = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
          for path in sorted((ROOT / "export").rglob("*.py"))
          for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
          if pattern.search(line)]
  assert hits == [], "export/ must ask the task, not name it"


HELP_PROBE = """
import contextlib, io, runpy, sys
sys.argv = [sys.argv[1], "--help"]
output = io.StringIO()
with contextlib.redirect_stdout(output):
  try:
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
  except SystemExit as exit:
    code = exit.code
print(code, "tensorflow" in sys.modules, len(output.getvalue()))
"""


@pytest.mark.parametrize("module", CLIS)
def test_help_imports_no_tensorflow(module):
  result = subprocess.run([sys.executable, "-c", HELP_PROBE, module], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
  code, tensorflow_loaded, help_length = result.stdout.split()
  assert (code, tensorflow_loaded) == ("0", "False"), result.stderr
  assert int(help_length) > 200
  assert result.stderr == ""   # no TensorFlow log lines either


def test_task_choices_come_from_the_registry(capsys):
  from tpu import train
  for name in tasks.names():
    assert train.parser().parse_args(["--task", name]).task == name
  with pytest.raises(SystemExit):
    train.parser().parse_args(["--task", "nothing"])
  assert "choose from " + ", ".join(f"'{name}'" for name in tasks.names()) in capsys.readouterr().err
  # The description names every task, and a setting with choices shows them in --help.
  description = train.parser().description
  assert all(re.search(rf"\b{name}\b", description) for name in tasks.names()), description
  assert "--tag-scheme {auto,iob1,iob2,iobes,bilou}" in train.parser().format_help()


@pytest.mark.parametrize("family", ["transformer", "funnel"])
def test_a_tf_keras_encoders_forward_pass_reads_few_files(family):
  import numpy as np

  from tests.forward_pass import files_run
  from zoo import models
  settings = dict(vocab_size=20, hidden_size=8, num_heads=2, intermediate_size=16)
  if family == "funnel":
    encoder = models.FunnelEncoder(**settings, block_sizes=(1, 1), num_decoder_layers=1, seq_length=8)
  else:
    encoder = models.TransformerEncoder(**settings, num_layers=2, residual_attention=True)
  ids = np.ones([2, 8], np.int32)
  files = files_run(lambda: encoder(dict(input_word_ids=ids, input_mask=ids, input_type_ids=0 * ids)))
  assert "zoo/layers/transformer_block.py" in files and len(files) <= 8, files

"""The task registry and the settings tasks declare.

`TASKS` maps each name to its `Task` class, in registration order; `register` adds
one. A task's own settings are `Setting`s in its class attribute `settings`: each is a
field of the run's `config.json` and, unless `flag=False`, a command-line flag of
`python -m tpu.train`; `tpu.config.TrainConfig` validates them from these
declarations and `tpu.train` generates the flags from them. No setting of a task is
written anywhere else.

Example:
  >>> setting = Setting("doc_stride", int, 128, "tokens between the starts of a context's windows", minimum=1)
  >>> setting.flag_name, setting.check(0)
  ('--doc-stride', 'doc_stride must be at least 1, got 0')
"""

from __future__ import annotations

import dataclasses
from typing import Any
from typing import TypeVar

# `tpu.tasks.base`, whose `Task` the classes subclass, imports this module: the types name no `Task`.
TASKS: dict[str, type[Any]] = {}
TaskClass = TypeVar("TaskClass", bound=type[Any])
# The run's configuration: a `tpu.config.TrainConfig` (which imports this package, so it is not named here).
Config = Any
SETTING_TYPES = (int, float, bool, str, dict, list)


@dataclasses.dataclass(frozen=True)
class Setting:
  """One setting a task declares.

  Attributes:
    name: the config field (`snake_case`); the flag is `--name-with-dashes`.
    type: int, float, bool, str, dict or list. None is accepted when it is the default.
    default: the value when not set.
    help: one line for `--help` (the owning tasks and the default are added to it).
    minimum: the smallest valid value of a number, or None.
    choices: the valid values, or None.
    flag: whether `python -m tpu.train` has a flag for it (dicts and lists: config files only).
    architecture: the value fixes the model's variables or what it computes from them (an
      embedding's pooling), so a model directory cannot be resumed with another one, and a run
      takes the `--init-checkpoint` directory's value unless it sets one.
    input: the value shapes the training examples (their windows, masks or labels), so a
      saved input position belongs to it (`tpu.checkpointing.input_stream`): a resume with
      another one is refused unless told to start a new input stream.
  """

  name: str
  type: type
  default: object
  help: str
  minimum: float | None = None
  choices: tuple | None = None
  flag: bool = True
  architecture: bool = False
  input: bool = False

  def __post_init__(self) -> None:
    if self.type not in SETTING_TYPES:
      raise ValueError(f"setting {self.name}: type must be one of {[t.__name__ for t in SETTING_TYPES]}")

  @property
  def flag_name(self) -> str:
    return "--" + self.name.replace("_", "-")

  def check(self, value: Any) -> str | None:
    """None when `value` is valid, else a message naming the setting and what it takes."""
    if value is None and self.default is None:
      return None
    kind = self.type
    valid_type = (isinstance(value, kind) and not (kind in (int, float) and isinstance(value, bool))
                  or kind is float and isinstance(value, int) and not isinstance(value, bool))
    if not valid_type:
      return f"{self.name} must be a {kind.__name__}, got {value!r}"
    if self.minimum is not None and value < self.minimum:
      return f"{self.name} must be at least {self.minimum}, got {value!r}"
    if self.choices is not None and value not in self.choices:
      return f"{self.name} must be one of {list(self.choices)}, got {value!r}"
    return None


def register(cls: TaskClass) -> TaskClass:
  """Class decorator: adds a `Task` subclass to `TASKS` under its `name`.

  Raises:
    ValueError: the name is empty or taken, or a setting's name is declared differently
      by another registered task.
  """
  if not cls.name or cls.name in TASKS:
    raise ValueError(f"a task needs a new, non-empty name; got {cls.name!r} (taken: {sorted(TASKS)})")
  declared = declared_settings()
  for setting in cls.settings:
    if setting.name in declared and declared[setting.name][0] != setting:
      owners = ", ".join(declared[setting.name][1])
      raise ValueError(f"task {cls.name!r} declares setting {setting.name!r} differently from "
                       f"task(s) {owners}")
  if len({setting.name for setting in cls.settings}) != len(cls.settings):
    raise ValueError(f"task {cls.name!r} declares a setting twice")
  TASKS[cls.name] = cls
  return cls


def unregister(name: str) -> None:
  """Removes a task (for tests that register a task of their own)."""
  TASKS.pop(name)


def names() -> tuple[str, ...]:
  """The registered task names, in registration order."""
  return tuple(TASKS)


def task_class(name: str) -> type[Any]:
  """The `Task` class of `name`; a ValueError lists the registered tasks."""
  if name not in TASKS:
    raise ValueError(f"unknown task {name!r}; choose one of: {', '.join(TASKS)}")
  return TASKS[name]


def get_task(config: Config) -> Any:
  """The `Task` of `config.task`."""
  return task_class(config.task)(config)


def build_model(config: Config) -> Any:
  """Builds the model of a (resolved) config: what the job trains and the exporter restores."""
  return get_task(config).build()


def declared_settings() -> dict[str, tuple[Setting, list[str]]]:
  """`{name: (Setting, [task names])}` over every registered task, in registration order."""
  declared: dict[str, tuple[Setting, list[str]]] = {}
  for task_name, cls in TASKS.items():
    for setting in cls.settings:
      declared.setdefault(setting.name, (setting, []))[1].append(task_name)
  return declared


def settings_of(name: str) -> dict[str, Setting]:
  """`{setting name: Setting}` of the task `name`."""
  return {setting.name: setting for setting in task_class(name).settings}

"""The suite's memory budget: no test process above `LIMIT_BYTES` resident, checked at the end of a run.

Each test process (the pytest-xdist workers, or the single process without them) notes its own
peak resident memory (VmHWM) before and after every test, and the peak of the processes its tests
start, with the test that started the largest. At the end of the run the peaks are printed per
process; above the limit the run fails, naming the tests during which the peak grew most and those
that left the most memory behind (resident memory after the test minus before it: what a fixture,
cache or compiled function kept).

A started process's peak is its own VmHWM, read from /proc every `SAMPLE_SECONDS` while a test runs
for every descendant of the test process: the last reading of each, the high-water mark of the
program it runs (a child not yet past its exec still has the test process's command line and
memory, and is skipped). `RUSAGE_CHILDREN` alone cannot tell it: a child's `ru_maxrss` starts at
what its parent held when it was started (Linux keeps the high-water mark of the forked memory
across the exec), so once a test process has grown, every child it starts, even `python -c pass`,
reports the parent's size. That figure counts only where it exceeds the test process's own peak:
a process that rose above it and ended between two readings.

`ZOO_TEST_MEMORY_LIMIT_GB` sets another limit (e.g. to find the growth on a smaller budget).
"""

import ctypes
import os
import resource
import threading

import pytest

LIMIT_BYTES = float(os.environ.get("ZOO_TEST_MEMORY_LIMIT_GB", "4")) * 1e9
NAMED = 5   # tests named per list in a report over the limit
SHOWN = 3   # tests named per process within the limit
MEANINGFUL = 10e6   # bytes of growth worth naming
SAMPLE_SECONDS = 0.5   # between two readings of the started processes' peaks
_STATE = {"peak_growth": {}, "kept": {}, "children_peak": 0, "largest_child": None, "first": None}


def _status(field, pid="self"):
  """A size of /proc/PID/status in bytes: VmHWM, the process's own peak (`ru_maxrss` would start
  at its parent's size at the fork), or VmRSS; None if the process has none (a zombie)."""
  with open(f"/proc/{pid}/status") as file:
    for line in file:
      if line.startswith(field + ":"):
        return int(line.split()[1]) * 1024
  return None


def _peak():
  return _status("VmHWM")


def _waited_children_peak():
  """The largest `ru_maxrss` of the processes waited for: at least the parent's size when it started them."""
  return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024   # kilobytes on Linux


def _descendants(pid):
  """The process ids started by `pid` and by those, from /proc/PID/task/TID/children."""
  found, pending = [], [pid]
  while pending:
    parent = pending.pop()
    try:
      tasks = os.listdir(f"/proc/{parent}/task")
    except OSError:   # ended
      continue
    for task in tasks:
      try:
        with open(f"/proc/{parent}/task/{task}/children") as file:
          children = [int(child) for child in file.read().split()]
      except OSError:
        continue
      found += children
      pending += children
  return found


def _command_line(pid):
  try:
    with open(f"/proc/{pid}/cmdline", "rb") as file:
      return file.read()
  except OSError:
    return None


class _Sampler:
  """Reads the peak (VmHWM) of every descendant of this process every `SAMPLE_SECONDS` from a thread,
  from `start()` to `stop()`; `stop()` returns the largest last reading of a process."""

  def __init__(self):
    self.readings = {}
    self.stopped = threading.Event()
    self.thread = threading.Thread(target=self._run, name="memory_guard", daemon=True)

  def _run(self):
    while True:
      self.sample()
      if self.stopped.wait(SAMPLE_SECONDS):
        return

  def sample(self):
    for pid in _descendants(os.getpid()):
      if _command_line(pid) in (None, _command_line("self")):   # ended, or not past its exec yet
        continue
      try:
        peak = _status("VmHWM", pid)
      except OSError:   # ended meanwhile
        continue
      if peak is not None:   # the last reading: what the process's program has held so far
        self.readings[pid] = peak

  def start(self):
    self.thread.start()
    return self

  def stop(self):
    self.sample()
    self.stopped.set()
    self.thread.join()
    return max(self.readings.values(), default=0)


def resident():
  return _status("VmRSS")


def return_free_memory():
  """Hands the C heap's free memory back to the system (glibc's `malloc_trim`), so that resident
  memory counts what is held; a no-op where there is no glibc."""
  try:
    ctypes.CDLL("libc.so.6").malloc_trim(0)
  except (OSError, AttributeError):
    pass


def _gb(size):
  return f"{size / 1e9:.2f} GB"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
  peak, held, waited = _peak(), resident(), _waited_children_peak()
  if _STATE["first"] is None:
    _STATE["first"] = held
  sampler = _Sampler().start()
  try:
    yield
  finally:
    children = sampler.stop()
  _STATE["peak_growth"][item.nodeid] = _peak() - peak
  _STATE["kept"][item.nodeid] = resident() - held
  if _waited_children_peak() > max(waited, _peak()):   # rose above this process, ended between readings
    children = max(children, _waited_children_peak())
  if children > _STATE["children_peak"]:   # a process this test started is the largest so far
    _STATE["children_peak"], _STATE["largest_child"] = children, item.nodeid


def _top(values):
  ranked = sorted(values.items(), key=lambda item: -item[1])[:NAMED]
  return [(name, size) for name, size in ranked if size > MEANINGFUL]


def _summary(name):
  return dict(name=name, peak=_peak(), children_peak=_STATE["children_peak"], first=_STATE["first"] or 0,
              largest_child=_STATE["largest_child"],
              peak_growth=_top(_STATE["peak_growth"]), kept=_top(_STATE["kept"]))


def pytest_configure(config):
  config._memory_summaries = []


def pytest_sessionfinish(session):
  config = session.config
  worker = os.environ.get("PYTEST_XDIST_WORKER")
  ran = _STATE["first"] is not None   # no test ran here: collection only, or the controller of workers
  if worker:   # sent to the controller with the worker's end (pytest-xdist's `workeroutput`)
    if ran:
      config.workeroutput["memory"] = _summary(worker)
    return
  if ran and config.pluginmanager.getplugin("dsession") is None:   # the tests ran in this process
    config._memory_summaries.append(_summary("pytest"))
  if any(_over(summary) for summary in config._memory_summaries) and session.exitstatus == 0:
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
  summary = getattr(node, "workeroutput", {}).get("memory")
  if summary:
    node.config._memory_summaries.append(summary)


def _over(summary):
  return max(summary["peak"], summary["children_peak"]) > LIMIT_BYTES


def pytest_terminal_summary(terminalreporter, config):
  summaries = sorted(config._memory_summaries, key=lambda s: s["name"])
  if not summaries:
    return
  write = terminalreporter.write_line
  terminalreporter.section("peak resident memory per test process")
  for summary in summaries:
    write(f"{summary['name']}: {_gb(summary['peak'])} ({_gb(summary['first'])} before its first test); "
          + (f"the processes it started, at most: {_gb(summary['children_peak'])} (started by "
             f"{summary['largest_child']})" if summary.get("largest_child") else "it started no process")
          + f" (limit {_gb(LIMIT_BYTES)})")
    if not _over(summary):
      write("  grew most during: " + ("; ".join(f"{name} (+{_gb(size)})" for name, size in
                                                summary["peak_growth"][:SHOWN]) or "none"))
  for summary in filter(_over, summaries):
    write(f"FAILED memory budget: {summary['name']} reached "
          f"{_gb(max(summary['peak'], summary['children_peak']))}, above {_gb(LIMIT_BYTES)}", red=True)
    for title, key in (("tests during which its peak grew most", "peak_growth"),
                       ("tests that left the most memory behind", "kept")):
      write(f"  {title}: " + ("; ".join(f"{name} (+{_gb(size)})" for name, size in summary[key]) or "none"))

"""``--executor``: one spec parser, one map over points, and the same study results on every executor.

The studies (policy, cold-start, advise) run here serially, in two local processes and on a real Dask
``LocalCluster`` (two worker processes on the loopback address), and must give byte-identical JSON but
for their wall-clock fields (``seconds``, a cold-start row's ``wall_s``).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import replace

import pytest

from dynbsz.errors import ConfigError
from simulator.advise import advise
from simulator.cli import main
from simulator.executors import (
    ExecutorSpec,
    SerialExecutor,
    default_processes,
    open_executor,
    parse_executor,
    run_points,
)
from simulator.policy import PolicyConfig, PolicyStudy
from simulator.study import Study, StudyConfig
from simulator.training import STEP_PRESETS, TEXT_VIDEO_LONG
from simulator.workloads import Stream

K = 1024
FORMS = ("serial", "processes:N", "dask://HOST:PORT")
#: a real policy grid, kept small: two budgets, two DP sizes, two scored and two advice streams, 3 h
POLICY = PolicyConfig(budgets=(512 * K, 1024 * K), dp_sizes=(1, 2), workloads=("seed",), hours=(1.0, 3.0),
                      fixed_search=(4, 8, 24, 200), gates=("fixed:200", "context_aware", "auto"), streams=2)
#: a cold-start grid with a point that fails closed (context_aware off 512K/1M): errors travel too
COLD_START = StudyConfig(budgets=(512 * K, 128 * K), gates=("fixed:24", "context_aware", "fixed:8"), dp_sizes=(1, 2),
                         steps=50)
ADVISE_HOURS = (1.0, 2.0)


# ---- the spec ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, spec", [
    ("serial", ExecutorSpec("serial")),
    (" processes:3 ", ExecutorSpec("processes", workers=3)),
    ("processes:1", ExecutorSpec("processes", workers=1)),
    ("dask://127.0.0.1:8786", ExecutorSpec("dask", address="127.0.0.1:8786")),
    ("dask://scheduler.example.org:9000", ExecutorSpec("dask", address="scheduler.example.org:9000")),
])
def test_parse_executor_reads_the_three_forms(text, spec):
    assert parse_executor(text) == spec
    assert parse_executor(str(spec)) == spec        # str() is the spec's own text
    assert parse_executor(spec) is spec


@pytest.mark.parametrize("text", ["", "threads:2", "processes", "processes:", "processes:0", "processes:-1",
                                  "processes:two", "processes:1.5", "dask://", "dask://host", "dask://:8786",
                                  "dask://host:0", "dask://host:99999", "dask://host:port", "dask://host:8786/x",
                                  "tcp://host:8786", "Serial", 2, None])
def test_a_bad_spec_is_one_line_naming_the_setting_and_the_forms(text):
    with pytest.raises(ConfigError) as info:
        parse_executor(text)
    msg = str(info.value)
    assert "--executor" in msg and all(form in msg for form in FORMS) and "\n" not in msg


def test_a_dask_spec_without_distributed_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)      # what `import distributed` sees when it is absent
    with pytest.raises(ConfigError, match=r"--executor dask://127\.0\.0\.1:8786: .*pip install '\.\[dask\]'"):
        with open_executor("dask://127.0.0.1:8786"):
            pass


# ---- run_points ------------------------------------------------------------------------------------

def _log_call(log: list, i: int) -> int:
    log.append(("run", i))
    return 10 * i


def test_serial_runs_in_this_process_and_reports_each_point_before_the_next():
    log: list = []
    out = run_points(_log_call, [(log, i) for i in range(3)], SerialExecutor(),
                     lambda done, n, what: log.append(("progress", done, n, what)), labels=["a", "b", "c"])
    assert out == [0, 10, 20]
    assert log == [("run", 0), ("progress", 1, 3, "a"), ("run", 1), ("progress", 2, 3, "b"),
                   ("run", 2), ("progress", 3, 3, "c")]


def test_weights_submit_the_heaviest_first_and_results_keep_the_points_order():
    log: list = []
    out = run_points(_log_call, [(log, i) for i in range(5)], SerialExecutor(),
                     lambda done, n, what: log.append(("progress", done, n, what)), labels=list("abcde"),
                     weights=[1.0, 5.0, 1.0, 9.0, 5.0])
    assert out == [0, 10, 20, 30, 40]
    # heaviest first; equal weights in the points' own order
    assert [e[1] for e in log if e[0] == "run"] == [3, 1, 4, 0, 2]
    assert [e[3] for e in log if e[0] == "progress"] == list("dbeac")
    with pytest.raises(ValueError, match="2 weights for 5 points"):
        run_points(_log_call, [(log, i) for i in range(5)], SerialExecutor(), weights=[1.0, 2.0])


def test_policy_points_go_heaviest_first_by_dp_then_budget():
    from simulator.policy import point_weights

    pts = [(128 * K, 1, "seed"), (2048 * K, 8, "mix"), (128 * K, 8, "seed"), (512 * K, 2, "mix"), (128 * K, 8, "mix")]
    order = sorted(range(len(pts)), key=lambda i: -point_weights(pts)[i])
    assert [pts[i] for i in order] == [(128 * K, 8, "seed"), (128 * K, 8, "mix"), (2048 * K, 8, "mix"),
                                       (512 * K, 2, "mix"), (128 * K, 1, "seed")]


def _wait_then_return(gate: threading.Event, i: int) -> int:
    assert gate.wait(10), "the test's chain of events broke"
    return i


def test_results_come_back_in_submission_order_whatever_order_the_points_finish_in():
    # point i may finish only once point i+1 was reported: they finish last to first, one at a time
    gates = [threading.Event() for _ in range(4)]
    gates[-1].set()
    seen = []

    def progress(done, n, what):
        seen.append((done, n, what))
        i = int(what)
        if i:
            gates[i - 1].set()

    with ThreadPoolExecutor(max_workers=4) as ex:
        out = run_points(_wait_then_return, [(g, i) for i, g in enumerate(gates)], ex, progress,
                         labels=[str(i) for i in range(4)])
    assert out == [0, 1, 2, 3]
    assert seen == [(1, 4, "3"), (2, 4, "2"), (3, 4, "1"), (4, 4, "0")]


def test_the_first_error_is_raised_and_the_points_after_it_do_not_run():
    log: list = []
    points = [(log, 0), ("not a spec",), (log, 2)]

    def fn(*args):
        return _log_call(*args) if len(args) == 2 else parse_executor(*args)

    with pytest.raises(ConfigError, match="--executor"):
        run_points(fn, points, SerialExecutor())
    assert log == [("run", 0)]


@pytest.mark.parametrize("spec", ["serial", "processes:2"])
def test_points_run_where_the_spec_says_and_errors_come_back(spec):
    with open_executor(spec) as ex:
        assert isinstance(ex, Executor)
        pids = run_points(os.getpid, [()] * 4, ex)
        with pytest.raises(ConfigError, match="--executor"):     # raised in a worker, a ConfigError here
            run_points(parse_executor, [("processes:0",)], ex)
    if spec == "serial":
        assert set(pids) == {os.getpid()}
    else:
        assert os.getpid() not in pids


# ---- every study: the same JSON on every executor -----------------------------------------------------

def _json(obj, drop=("seconds", "wall_s")) -> str:
    def clean(x):
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items() if k not in drop}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        return x
    return json.dumps(clean(obj), sort_keys=True)


def _policy(executor) -> tuple[str, list]:
    calls: list = []
    out = PolicyStudy(POLICY).run(progress=lambda *c: calls.append(c), executor=executor)
    return _json(out), calls


def _cold_start(executor) -> tuple[str, list]:
    calls: list = []
    rows = Study(COLD_START).run(progress=lambda *c: calls.append(c), executor=executor)
    return _json([r.to_json() for r in rows]), calls


@pytest.fixture(scope="module")
def advise_trace():
    return Stream(TEXT_VIDEO_LONG, 5).take(1500)


def _advise(executor, trace) -> tuple[str, list]:
    calls: list = []
    out = advise(trace, 512 * K, 1, STEP_PRESETS["1b-h100"], hours=ADVISE_HOURS, executor=executor,
                 progress=lambda *c: calls.append(c))
    return _json(out), calls


@pytest.fixture(scope="module")
def serial_results(advise_trace):
    return {"policy": _policy("serial"), "cold-start": _cold_start("serial"),
            "advise": _advise("serial", advise_trace)}


def _same_bar(calls: list, reference: list) -> None:
    """The same progress bar: the same counts and totals in the same order, and the same labels in all."""
    assert [c[:2] for c in calls] == [c[:2] for c in reference]
    assert sorted(c[2] for c in calls) == sorted(c[2] for c in reference)


def _check_every_study(spec, serial_results, advise_trace) -> None:
    got = {"policy": _policy(spec), "cold-start": _cold_start(spec), "advise": _advise(spec, advise_trace)}
    for study, (text, calls) in got.items():
        ref_text, ref_calls = serial_results[study]
        assert text == ref_text, f"{study} on {spec} differs from serial"
        _same_bar(calls, ref_calls)


def test_every_study_gives_the_same_json_in_two_processes(serial_results, advise_trace):
    _check_every_study("processes:2", serial_results, advise_trace)


def test_the_studies_are_real_and_the_comparison_can_tell_them_apart(serial_results):
    policy = json.loads(serial_results["policy"][0])
    assert len(policy["best"]) == 4 and {r["gate"] for r in policy["rows"]} >= {"fixed:200", "auto"}
    rows = json.loads(serial_results["cold-start"][0])
    assert len(rows) == 12 and sum(r["error"] is not None for r in rows) == 2
    assert json.loads(serial_results["advise"][0])["configs_searched"] > 20
    # what the comparison drops is only the wall clock: another stream seed is another JSON
    other = _json([r.to_json() for r in Study(replace(COLD_START, seed=7)).run()])
    assert other != serial_results["cold-start"][0]


# ---- the command line --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def trace_file(tmp_path_factory, advise_trace):
    path = tmp_path_factory.mktemp("executor") / "trace.csv"
    advise_trace.to_csv(path)
    return path


def _commands(trace_file) -> dict[str, list[str]]:
    study = ["--budgets", "512K", "--dp", "1,2", "--steps", "20", "--json", "--no-progress"]
    return {
        "policy": ["policy", "--budgets", "512K", "--dp", "1", "--workloads", "seed", "--hours", "1,2",
                   "--gates", "fixed:200", "--streams", "1", "--json", "--no-progress"],
        "cold-start": ["cold-start", "--gates", "fixed:24,fixed:8", "--no-plot", *study],
        "sweep": ["sweep", "--gate", "fixed:12", "--baseline", *study],
        "advise": ["advise", "--trace", str(trace_file), "--budget", "512K", "--hours", "1,2", "--json",
                   "--no-progress"],
    }


@pytest.mark.parametrize("command", ["policy", "cold-start", "sweep", "advise"])
def test_the_study_commands_take_executor_and_print_the_same_json(command, trace_file, capsys):
    argv = _commands(trace_file)[command]
    outs = []
    for spec in ("serial", "processes:2"):
        assert main(argv + ["--executor", spec]) == 0
        outs.append(_json(json.loads(capsys.readouterr().out)))
    assert outs[0] == outs[1]
    if command == "policy":   # --jobs N is processes:N
        assert main(argv + ["--jobs", "2"]) == 0
        assert _json(json.loads(capsys.readouterr().out)) == outs[0]


@pytest.fixture
def no_work(monkeypatch):
    """A study that starts fails the test at once (derive-auto's would run for 40 minutes)."""
    import simulator.advise
    import simulator.policy
    import simulator.study

    def started(*args, **kwargs):
        raise AssertionError("the study started")

    for module, name in ((simulator.policy, "derive_auto"), (simulator.policy.PolicyStudy, "run"),
                         (simulator.study.Study, "run"), (simulator.advise, "advise")):
        monkeypatch.setattr(module, name, started)


@pytest.mark.parametrize("argv", [
    ["policy", "--jobs", "2", "--executor", "serial"],
    ["derive-auto", "--executor", "processes:2", "--jobs", "2"],
])
def test_jobs_and_executor_together_are_refused(argv, capsys, no_work):
    assert main(argv + (["--no-progress"] if argv[0] == "policy" else [])) == 2
    err = capsys.readouterr().err.strip()
    assert "--jobs" in err and "--executor" in err and "\n" not in err


@pytest.mark.parametrize("command", ["policy", "cold-start", "sweep", "advise", "derive-auto"])
def test_a_bad_executor_is_refused_before_any_work(command, tmp_path, capsys, no_work):
    # advise, cold-start and sweep would otherwise fail on the missing trace, policy on the workload:
    # the executor is checked first
    missing = str(tmp_path / "missing.csv")
    argv = {"policy": ["policy", "--workloads", "nope"], "cold-start": ["cold-start", "--trace", missing],
            "sweep": ["sweep", "--gate", "fixed:8", "--trace", missing],
            "advise": ["advise", "--trace", missing, "--budget", "512K"], "derive-auto": ["derive-auto"]}[command]
    assert main(argv + ["--executor", "processes:0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --executor 'processes:0'") and all(form in err for form in FORMS)
    if command in ("policy", "derive-auto"):
        assert main(argv + ["--jobs", "0"]) == 2
        assert "--jobs must be an integer >= 1" in capsys.readouterr().err


GIB = 1024 ** 3


@pytest.mark.parametrize("cpus, memory, points, expected", [
    (16, 64 * GIB, None, 16),     # one per CPU
    (16, 8 * GIB, None, 8),       # a GiB each: memory is the limit
    (64, 256 * GIB, 12, 12),      # no more processes than points
    (4, GIB // 2, 60, 1),         # never fewer than one
    (2, 24 * GIB, 60, 2),         # this development machine
])
def test_the_default_process_count_is_one_per_cpu_within_memory_and_points(cpus, memory, points, expected):
    assert default_processes(points, cpus=cpus, memory_bytes=memory) == expected


@pytest.mark.parametrize("argv, expected", [
    (["policy", "--budgets", "512K,1M", "--dp", "1", "--workloads", "seed", "--no-progress"], 2),  # 2 points
    (["policy", "--no-progress"], 60),                                                         # the default grid
    (["derive-auto"], 64),
])
def test_the_study_commands_default_to_a_process_per_cpu(argv, expected, monkeypatch, capsys):
    """With no --executor, policy runs on one process per usable CPU (no more than its points) and derive-auto
    on one per CPU; a 64-CPU machine with a TiB of memory is pretended here, and the study stops at once."""
    import simulator.machine
    import simulator.policy

    monkeypatch.setattr(simulator.machine, "available", lambda: (64, 1024 * GIB))
    seen = []

    class Stop(Exception):
        pass

    def record(*args, executor=None, **kwargs):
        seen.append(parse_executor(executor))
        raise Stop

    monkeypatch.setattr(simulator.policy.PolicyStudy, "run", lambda self, progress=None, executor=None: record(
        executor=executor))
    monkeypatch.setattr(simulator.policy, "derive_auto", lambda config, executor=None, **kw: record(executor=executor))
    with pytest.raises(Stop):
        main(argv)
    assert seen == [ExecutorSpec("processes", workers=expected)]


# ---- on a Dask cluster: last, so that no process pool above forks while the cluster's threads run -----

@pytest.fixture(scope="module")
def dask_address():
    distributed = pytest.importorskip("distributed", reason="Dask's distributed is not installed (the dask extra: "
                                      "pip install '.[dask]'; the test extra has it)")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        yield "dask://" + cluster.scheduler_address.removeprefix("tcp://")


def test_points_run_on_the_dask_workers_and_errors_come_back(dask_address):
    with open_executor(dask_address) as ex:
        pids = run_points(os.getpid, [()] * 4, ex)
        with pytest.raises(ConfigError, match="--executor"):
            run_points(parse_executor, [("processes:0",)], ex)
    assert os.getpid() not in pids


def test_every_study_gives_the_same_json_on_a_dask_cluster(dask_address, serial_results, advise_trace):
    _check_every_study(dask_address, serial_results, advise_trace)


def test_an_unreachable_scheduler_is_one_line_naming_the_address():
    pytest.importorskip("distributed", reason="Dask's distributed is not installed (pip install '.[dask]')")
    import dask

    with socket.socket() as s:   # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        with pytest.raises(ConfigError, match=f"cannot reach a Dask scheduler at 127.0.0.1:{port}"):
            with open_executor(f"dask://127.0.0.1:{port}"):
                pass

"""test_gpu_checks.py — the parts of the GPU checks (python/tests/gpu) that
run without a GPU: the scripts compile and parse their arguments without
torch, and run_all.py's verdicts on the CUDA-graph cases and under
compute-sanitizer, fed with made-up JSON and sanitizer output.

The one idea: run_all.py turns numbers the scripts measured into PASS and
FAIL, so its judging functions are tested here the way a GPU run would feed
them, with a run that should pass and, for every rule, the smallest change
that must make it fail; the runner itself is driven with a stand-in for the
scripts (Run.script replaced), so the wiring (which runs, which modes, the
sanitizer's command, the knobs) is checked too.
"""

import importlib.util
import json
import os
import py_compile
import subprocess
import sys
import types

import pytest

from conftest import HERE

GPU = os.path.join(HERE, "gpu")
MiB = 1 << 20


@pytest.fixture(scope="module")
def ra():
    spec = importlib.util.spec_from_file_location("run_all_under_test", os.path.join(GPU, "run_all.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_gpu_script_compiles(tmp_path):
    names = sorted(n for n in os.listdir(GPU) if n.endswith(".py"))
    assert "torch_graphs.py" in names and "run_all.py" in names
    for n in names:
        py_compile.compile(os.path.join(GPU, n), cfile=str(tmp_path / (n + "c")), doraise=True)


def run_without_torch(*argv):
    """torch_graphs.py run as a program with torch made unimportable."""
    code = ("import os, runpy, sys\nsys.modules['torch'] = None\nsys.argv = sys.argv[1:]\n"
            "sys.path.insert(0, os.path.dirname(sys.argv[0]))\nrunpy.run_path(sys.argv[0], run_name='__main__')\n")
    return subprocess.run([sys.executable, "-c", code, os.path.join(GPU, "torch_graphs.py"), *argv],
                          capture_output=True, text=True, timeout=60)


def test_torch_graphs_help_needs_no_torch():
    out = run_without_torch("--help")
    assert out.returncode == 0, out.stderr
    for word in ("--mode", "--case", "gpt2-graph", "compile", "--replays", "--warmup"):
        assert word in out.stdout


def test_torch_graphs_refuses_bad_arguments():
    bad_case = run_without_torch("--mode", "carve", "--out", "x.json", "--case", "bogus")
    assert bad_case.returncode != 0 and "expected gpt2-graph or compile" in bad_case.stderr
    bad_mode = run_without_torch("--mode", "pytorch", "--out", "x.json")
    assert bad_mode.returncode == 2 and "invalid choice" in bad_mode.stderr
    no_out = run_without_torch("--mode", "carve")
    assert no_out.returncode == 2 and "--out" in no_out.stderr


# ---- Judging the graph cases --------------------------------------------------

def level(allocated, reserved):
    return {"allocated": allocated, "reserved": reserved, "torch_allocated": None, "driver_free": 70 << 30}


def graph_run(mode, case="gpt2-graph", replays=100, **over):
    """A run of torch_graphs.py that should pass: 100 MiB before the capture,
    the graph holding 40 MiB more, all of it back after the release."""
    d = {"mode": mode, "case": case, "replays": replays, "error": None, "nondeterministic_ops": [],
         "canary_corrupt": [0] * replays, "batch_changed": 0,
         "before_capture": level(100 * MiB, 120 * MiB), "after_capture": level(110 * MiB, 160 * MiB),
         "after_replays": level(110 * MiB, 160 * MiB), "after_release": level(100 * MiB, 120 * MiB)}
    if case == "gpt2-graph":
        d["losses"] = [9.0 - i / 1024 for i in range(replays)]
        d["param_checksum"] = 123.456
    else:
        d["sums"] = [[i / 8, i / 4] for i in range(replays)]
        d["cudagraph_skips"] = 0
        d["graphs_recorded"] = 1
    d.update(over)
    return d


def verdicts(checks):
    return {check: ok for check, ok, _ in checks}


def test_graph_runs_that_agree_pass(ra):
    for case in ("gpt2-graph", "compile"):
        checks = ra.judge_graph(case, graph_run("carve", case), graph_run("default", case))
        assert len(checks) == (4 if case == "compile" else 3)
        assert all(verdicts(checks).values()), checks


def test_outputs_must_be_bitwise_equal_unless_an_op_is_nondeterministic(ra):
    d = graph_run("default")
    c = graph_run("carve")
    c["losses"][37] = c["losses"][37] + 2e-15  # one bit in the last place
    bad = ra.judge_graph("gpt2-graph", c, d)
    assert not bad[0][1] and "first differs at replay 37" in bad[0][2]
    c["nondeterministic_ops"] = ["embedding_dense_backward does not have a deterministic implementation"]
    assert ra.judge_graph("gpt2-graph", c, d)[0][1]
    c["losses"][37] += 1e-2  # beyond the tolerance
    assert not ra.judge_graph("gpt2-graph", c, d)[0][1]
    same = graph_run("carve", param_checksum=123.457)
    assert not ra.judge_graph("gpt2-graph", same, d)[0][1]
    short = graph_run("carve", losses=graph_run("carve")["losses"][:99])
    assert not ra.judge_graph("gpt2-graph", short, d)[0][1]
    c = graph_run("carve", "compile")
    c["sums"][5][1] += 1.0
    assert not ra.judge_graph("compile", c, graph_run("default", "compile"))[0][1]


def test_a_short_run_is_compared_with_the_first_replays(ra):
    """The run under memcheck replays a few times; the reference 100."""
    c = graph_run("carve", replays=5, losses=graph_run("carve")["losses"][:5], param_checksum=1.0)
    checks = ra.judge_graph("gpt2-graph", c, graph_run("default"))
    assert all(verdicts(checks).values()), checks
    c["losses"][4] += 1e-9
    assert not ra.judge_graph("gpt2-graph", c, graph_run("default"))[0][1]


def test_a_tensor_overwritten_between_replays_fails(ra):
    d = graph_run("default")
    c = graph_run("carve")
    c["canary_corrupt"][3] = 4096
    assert verdicts(ra.judge_graph("gpt2-graph", c, d)) == {
        "gpt2-graph: same outputs as PyTorch's allocator over 100 replays": True,
        "gpt2-graph: tensors made between replays keep their values (no graph writes into them)": False,
        "gpt2-graph: the graph's memory back after the release (carve)": True}
    c = graph_run("carve", batch_changed=1)
    assert not ra.judge_graph("gpt2-graph", c, d)[1][1]
    bad_reference = graph_run("default", batch_changed=2)
    assert not ra.judge_graph("gpt2-graph", graph_run("carve"), bad_reference)[1][1]


def test_memory_must_come_back_after_the_release(ra):
    d = graph_run("default")
    mem = "gpt2-graph: the graph's memory back after the release (carve)"
    within = graph_run("carve", after_release=level(100 * MiB + ra.GRAPH_ALLOC_TOL, 120 * MiB + ra.GRAPH_RESERVED_TOL))
    assert verdicts(ra.judge_graph("gpt2-graph", within, d))[mem]
    kept = graph_run("carve", after_release=level(100 * MiB + ra.GRAPH_ALLOC_TOL + 512, 120 * MiB))
    assert not verdicts(ra.judge_graph("gpt2-graph", kept, d))[mem]
    cached = graph_run("carve", after_release=level(100 * MiB, 120 * MiB + ra.GRAPH_RESERVED_TOL + 2 * MiB))
    assert not verdicts(ra.judge_graph("gpt2-graph", cached, d))[mem]
    # A graph holding too little to show a leak cannot pass.
    small = graph_run("carve", after_capture=level(101 * MiB, 121 * MiB), after_replays=level(101 * MiB, 121 * MiB))
    assert not verdicts(ra.judge_graph("gpt2-graph", small, d))[mem]
    # gpt2-graph's rule is absolute: PyTorch keeping memory does not excuse carve.
    both = level(140 * MiB, 160 * MiB)
    assert not verdicts(ra.judge_graph("gpt2-graph", graph_run("carve", after_release=both),
                                       graph_run("default", after_release=both)))[mem]


def test_compile_memory_allows_what_pytorch_keeps_and_no_more(ra):
    mem = "compile: the graph's memory back after the release (carve)"
    kept = level(132 * MiB, 152 * MiB)  # inductor's stream workspace, say, kept under PyTorch too
    d = graph_run("default", "compile", after_release=kept)
    assert verdicts(ra.judge_graph("compile", graph_run("carve", "compile", after_release=kept), d))[mem]
    more = level(132 * MiB + ra.GRAPH_ALLOC_TOL + MiB, 152 * MiB)
    assert not verdicts(ra.judge_graph("compile", graph_run("carve", "compile", after_release=more), d))[mem]


def test_compile_must_record_graphs(ra):
    d = graph_run("default", "compile")
    used = "compile: inductor ran the model as CUDA graphs (no cudagraph skips)"
    assert not verdicts(ra.judge_graph("compile", graph_run("carve", "compile", cudagraph_skips=1), d))[used]
    assert not verdicts(ra.judge_graph("compile", graph_run("carve", "compile", graphs_recorded=0), d))[used]
    assert verdicts(ra.judge_graph("compile", graph_run("carve", "compile", graphs_recorded=None), d))[used]
    assert not verdicts(ra.judge_graph("compile", graph_run("carve", "compile"),
                                       graph_run("default", "compile", cudagraph_skips=2)))[used]


def test_a_run_that_raised_is_one_failed_check(ra):
    c = graph_run("carve", error="torch.OutOfMemoryError: carve: out of memory during a capture")
    checks = ra.judge_graph("gpt2-graph", c, graph_run("default"))
    assert len(checks) == 1 and not checks[0][1] and "carve: torch.OutOfMemoryError" in checks[0][2]


def test_compile_is_skipped_only_for_what_pytorch_cannot_do_either(ra):
    ok = graph_run("default", "compile")
    assert ra.compile_skip(graph_run("carve", "compile"), ok) is None
    assert ra.compile_skip({"skip": "triton missing"}, {"skip": "triton missing"}) == "triton missing"
    failed = graph_run("default", "compile", error="torch._dynamo.exc.BackendCompilerFailed: backend='inductor'")
    assert "even under PyTorch's allocator" in ra.compile_skip(graph_run("carve", "compile"), failed)
    # carve's run failing or skipping alone is no reason to skip.
    assert ra.compile_skip({"skip": "triton missing"}, ok) is None
    assert ra.compile_skip(graph_run("carve", "compile", error="BackendCompilerFailed"), ok) is None


# ---- compute-sanitizer -----------------------------------------------------------

CLEAN = """========= COMPUTE-SANITIZER
wrote /tmp/x.json error: None
========= ERROR SUMMARY: 0 errors
"""

DIRTY = """========= COMPUTE-SANITIZER
========= Program hit cudaErrorInvalidValue (error 1) due to "invalid argument" on CUDA API call to cudaFuncGetAttributes.
=========     Saved host backtrace up to driver entry point at error
=========         Host Frame: [0x2f1e3] in libcudart.so
========= Program hit cudaErrorInvalidValue (error 1) due to "invalid argument" on CUDA API call to cudaFuncGetAttributes.
========= Invalid __global__ write of size 4 bytes
=========     at 0x1b0 in void fill(float *, int)
=========     by thread (3,0,0) in block (0,0,0)
=========     Address 0x7f0000200000 is out of bounds
========= Target application returned an error
========= ERROR SUMMARY: 3 errors
"""


def test_sanitizer_summary(ra):
    assert ra.sanitizer_summary(CLEAN) == {"errors": 0, "api": [], "other": []}
    s = ra.sanitizer_summary(DIRTY)
    assert s["errors"] == 3
    assert s["api"] == ["cudaFuncGetAttributes: cudaErrorInvalidValue"]
    assert s["other"] == ["Invalid __global__ write of size 4 bytes"]
    text = ra.describe_sanitizer(s)
    assert "3 errors" in text and "cudaFuncGetAttributes" in text and "Invalid __global__ write" in text
    assert ra.sanitizer_summary("Segmentation fault\n")["errors"] is None
    # One summary per process the sanitizer followed: they add up.
    assert ra.sanitizer_summary(CLEAN + "========= ERROR SUMMARY: 1 error\n")["errors"] == 1


def test_memcheck_api_knob(ra, monkeypatch):
    monkeypatch.delenv("CARVE_GPU_MEMCHECK_API", raising=False)
    assert ra.memcheck_api() == "explicit"
    monkeypatch.setenv("CARVE_GPU_MEMCHECK_API", "no")
    assert ra.memcheck_command("cs", ra.memcheck_api()) == [
        "cs", "--tool", "memcheck", "--target-processes", "all", "--report-api-errors", "no"]
    monkeypatch.setenv("CARVE_GPU_MEMCHECK_API", "sometimes")
    with pytest.raises(SystemExit, match="expected all, explicit or no"):
        ra.memcheck_api()


def test_memcheck_cases_knob(ra, monkeypatch):
    monkeypatch.delenv("CARVE_GPU_MEMCHECK_CASES", raising=False)
    assert ra.memcheck_cases() == ["oom", "outlive", "gpt2-graph", "compile"]
    monkeypatch.setenv("CARVE_GPU_MEMCHECK_CASES", "gpt2-graph,oom")
    assert ra.memcheck_cases() == ["oom", "gpt2-graph"]


# ---- The runner, with the scripts stood in for --------------------------------------

def oom_run():
    return {"oom_raises": True, "forward": ["torch.cuda.OutOfMemoryError"] * 3, "sums": [6.0 * MiB] * 3,
            "backward": "torch.cuda.OutOfMemoryError", "backward_on_other_thread": True,
            "losses": [1.0, 0.9, 0.8, 0.7, 0.6], "while_held": "torch.cuda.OutOfMemoryError", "after_free": 1,
            "num_ooms": 5}


def outlive_run():
    return {"t_sum": 7.0 * MiB, "u_sum": 3.0 * MiB, "distinct": True, "state_after_block": "retired",
            "known_while_t_lives": True, "known_after_t_freed": False}


def test_oom_and_outlive_judges(ra):
    assert all(ok for _, ok, _ in ra.judge_oom(oom_run()))
    late = dict(oom_run(), backward="no exception")
    assert [ok for _, ok, _ in ra.judge_oom(late)] == [True, False, True]
    assert ra.judge_outlive(outlive_run(), "wrote x\n")[1]
    assert not ra.judge_outlive(outlive_run(), "free(): Trying to free a pointer not allocated here\nAbort")[1]
    assert not ra.judge_outlive(dict(outlive_run(), t_sum=3.0 * MiB), "")[1]


class FakeRun:
    """run_all.Run whose scripts are canned answers (and logs) per run."""

    def __new__(cls, ra, outdir, answers, logs=None):
        class Fake(ra.Run):
            def script(self, name, mode, timeout=900, tag="", wrap=(), **opts):
                self.calls.append((name, mode, tag, tuple(wrap), opts))
                with open(os.path.join(self.outdir, f"{name}-{mode}{tag}.log"), "w") as f:
                    f.write((logs or {}).get((name, mode, tag), ""))
                d = answers.get((name, mode, tag))
                if d is None:
                    self.verdict(f"{name} --mode {mode} runs", False, "exit 1")
                return json.loads(json.dumps(d)) if d is not None else None

        r = Fake(str(outdir))
        r.calls = []
        return r


@pytest.fixture
def wanted(ra, monkeypatch):
    monkeypatch.setattr(ra, "have", lambda module: True)
    monkeypatch.setattr(ra, "ONLY", [])
    for k in ("CARVE_GPU_MEMCHECK", "CARVE_GPU_MEMCHECK_CASES", "CARVE_GPU_MEMCHECK_API"):
        monkeypatch.delenv(k, raising=False)


def graph_answers():
    return {("torch_graphs", m, f"-{case}"): graph_run(m, case) for m in ("carve", "default")
            for case in ("gpt2-graph", "compile")}


def test_graphs_checks_run_both_cases_in_both_modes(ra, wanted, tmp_path):
    r = FakeRun(ra, tmp_path, graph_answers())
    runs = ra.graphs_checks(r)
    assert sorted(runs) == ["compile", "gpt2-graph"]
    assert [(c[1], c[2], c[4]) for c in r.calls] == [
        ("carve", "-gpt2-graph", {"case": "gpt2-graph", "replays": ra.GRAPH_REPLAYS}),
        ("default", "-gpt2-graph", {"case": "gpt2-graph", "replays": ra.GRAPH_REPLAYS}),
        ("carve", "-compile", {"case": "compile", "replays": ra.GRAPH_REPLAYS}),
        ("default", "-compile", {"case": "compile", "replays": ra.GRAPH_REPLAYS})]
    assert [v for _, v, _ in r.rows] == ["PASS"] * 7


def test_graphs_checks_skip_compile_only_when_pytorch_cannot(ra, wanted, tmp_path):
    answers = graph_answers()
    answers[("torch_graphs", "carve", "-compile")] = {"skip": "no triton"}
    answers[("torch_graphs", "default", "-compile")] = {"skip": "no triton"}
    r = FakeRun(ra, tmp_path, answers)
    ra.graphs_checks(r)
    assert [(c, v) for c, v, _ in r.rows if v != "PASS"] == [
        ("torch_graphs compile (torch.compile reduce-overhead)", "SKIP")]
    answers[("torch_graphs", "default", "-compile")] = graph_run("default", "compile")
    r = FakeRun(ra, tmp_path, answers)
    ra.graphs_checks(r)
    assert ("compile under carve.torch: inductor compiles as under PyTorch's allocator", "FAIL") in \
        [(c, v) for c, v, _ in r.rows]


def test_graphs_checks_follow_the_filter(ra, wanted, tmp_path, monkeypatch):
    monkeypatch.setattr(ra, "ONLY", ["memcheck"])
    r = FakeRun(ra, tmp_path, graph_answers())
    assert ra.graphs_checks(r) == {} and r.calls == []


def memcheck_answers(summary="========= ERROR SUMMARY: 0 errors\n"):
    answers = {("torch_safety", "carve", "-oom-memcheck"): oom_run(),
               ("torch_safety", "carve", "-outlive-memcheck"): outlive_run(),
               ("torch_graphs", "carve", "-gpt2-graph-memcheck"):
                   graph_run("carve", replays=5, losses=graph_run("carve")["losses"][:5]),
               ("torch_graphs", "default", "-gpt2-graph-memcheck-ref"):
                   graph_run("default", replays=5, losses=graph_run("default")["losses"][:5]),
               ("torch_graphs", "carve", "-compile-memcheck"):
                   graph_run("carve", "compile", replays=5, sums=graph_run("carve", "compile")["sums"][:5]),
               ("torch_graphs", "default", "-compile-memcheck-ref"):
                   graph_run("default", "compile", replays=5, sums=graph_run("default", "compile")["sums"][:5])}
    logs = {k: "wrote it\n" + summary for k in answers}
    return answers, logs


def test_memcheck_runs_the_three_cases_under_the_sanitizer(ra, wanted, tmp_path, monkeypatch):
    monkeypatch.setenv("COMPUTE_SANITIZER", "/opt/cs")
    answers, logs = memcheck_answers()
    r = FakeRun(ra, tmp_path, answers, logs)
    ra.memcheck_checks(r)
    wrap = ("/opt/cs", "--tool", "memcheck", "--target-processes", "all", "--report-api-errors", "explicit")
    # the reference for the graphs: PyTorch's allocator without the sanitizer
    assert [(c[0], c[2], c[3]) for c in r.calls] == [
        ("torch_safety", "-oom-memcheck", wrap), ("torch_safety", "-outlive-memcheck", wrap),
        ("torch_graphs", "-gpt2-graph-memcheck", wrap), ("torch_graphs", "-gpt2-graph-memcheck-ref", ()),
        ("torch_graphs", "-compile-memcheck", wrap), ("torch_graphs", "-compile-memcheck-ref", ())]
    assert r.calls[2][4] == r.calls[3][4] == {"case": "gpt2-graph", "replays": ra.MEMCHECK_REPLAYS}
    assert r.calls[4][4] == r.calls[5][4] == {"case": "compile", "replays": ra.MEMCHECK_REPLAYS}
    assert [v for _, v, _ in r.rows] == ["PASS"] * 4, r.rows
    # under the sanitizer the memory after the release is not judged (the program keeps tensors alive
    # there whatever the allocator); the outputs and fresh tensors are
    answers[("torch_graphs", "carve", "-gpt2-graph-memcheck")]["after_release"] = level(220 * MiB, 360 * MiB)
    answers[("torch_graphs", "carve", "-compile-memcheck")]["after_release"] = level(2200 * MiB, 2300 * MiB)
    r = FakeRun(ra, tmp_path, answers, logs)
    ra.memcheck_checks(r)
    assert [v for _, v, _ in r.rows] == ["PASS"] * 4, r.rows
    assert "judged without the sanitizer" in r.rows[2][2] and "judged without the sanitizer" in r.rows[3][2]
    answers[("torch_graphs", "carve", "-compile-memcheck")]["sums"][3][0] += 1.0
    answers[("torch_graphs", "carve", "-gpt2-graph-memcheck")]["canary_corrupt"][1] = 7
    r = FakeRun(ra, tmp_path, answers, logs)
    ra.memcheck_checks(r)
    assert [v for _, v, _ in r.rows] == ["PASS", "PASS", "FAIL", "FAIL"], r.rows
    # carve's compile run skipped where PyTorch's did not: a failure, as without the sanitizer
    answers, logs = memcheck_answers()
    answers[("torch_graphs", "carve", "-compile-memcheck")] = {"skip": "no triton"}
    r = FakeRun(ra, tmp_path, answers, logs)
    ra.memcheck_checks(r)
    assert [(c, v) for c, v, _ in r.rows][-1] == (
        "memcheck compile: compute-sanitizer memcheck clean and the case passes", "FAIL"), r.rows
    assert ("torch_graphs", "default", "-compile-memcheck-ref") in [(c[0], c[1], c[2]) for c in r.calls]
    # inductor missing (PyTorch's run says so too): the compile case is skipped, not failed
    answers, logs = memcheck_answers()
    answers[("torch_graphs", "carve", "-compile-memcheck")] = {"skip": "no triton"}
    answers[("torch_graphs", "default", "-compile-memcheck-ref")] = {"skip": "no triton"}
    r = FakeRun(ra, tmp_path, answers, logs)
    ra.memcheck_checks(r)
    assert [(c, v) for c, v, _ in r.rows][-1] == ("memcheck compile", "SKIP"), r.rows


def test_memcheck_fails_on_errors_or_a_failed_case(ra, wanted, tmp_path, monkeypatch):
    monkeypatch.setenv("COMPUTE_SANITIZER", "/opt/cs")
    answers, logs = memcheck_answers(DIRTY)
    r = FakeRun(ra, tmp_path, answers, logs)
    ra.memcheck_checks(r)
    assert [v for _, v, _ in r.rows] == ["FAIL"] * 4
    assert "cudaFuncGetAttributes" in r.rows[0][2]
    answers, logs = memcheck_answers()
    answers[("torch_safety", "carve", "-oom-memcheck")]["after_free"] = 0
    answers[("torch_graphs", "carve", "-gpt2-graph-memcheck")]["canary_corrupt"][2] = 1
    logs[("torch_safety", "carve", "-outlive-memcheck")] = "========= COMPUTE-SANITIZER\nKilled\n"
    r = FakeRun(ra, tmp_path, answers, logs)
    ra.memcheck_checks(r)
    assert [v for _, v, _ in r.rows] == ["FAIL"] * 3 + ["PASS"], r.rows
    assert "no ERROR SUMMARY" in r.rows[1][2] and "tensors made between replays" in r.rows[2][2]


def test_memcheck_knobs(ra, wanted, tmp_path, monkeypatch):
    monkeypatch.setenv("COMPUTE_SANITIZER", "/opt/cs")
    monkeypatch.setenv("CARVE_GPU_MEMCHECK", "0")
    r = FakeRun(ra, tmp_path, {})
    ra.memcheck_checks(r)
    assert r.calls == [] and [(c, v) for c, v, _ in r.rows] == [("memcheck", "SKIP")]
    monkeypatch.delenv("CARVE_GPU_MEMCHECK")
    monkeypatch.setenv("CARVE_GPU_MEMCHECK_CASES", "outlive")
    monkeypatch.setenv("CARVE_GPU_MEMCHECK_API", "no")
    answers, logs = memcheck_answers()
    r = FakeRun(ra, tmp_path, answers, logs)
    ra.memcheck_checks(r)
    assert [c[2] for c in r.calls] == ["-outlive-memcheck"] and r.calls[0][3][-1] == "no"
    monkeypatch.delenv("COMPUTE_SANITIZER")
    monkeypatch.setattr(ra, "shutil", types.SimpleNamespace(which=lambda name: None))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "nocuda"))
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(ra, "CUDA_ROOTS", ())
    r = FakeRun(ra, tmp_path, answers, logs)
    ra.memcheck_checks(r)
    assert r.calls == [] and [v for _, v, _ in r.rows] == ["SKIP"]

"""The build cache: keys, hits, rebuilds, concurrency, killed and failed builds, safe names.

Every test compiles into a pytest tmp folder, never into the repository's generated/.
A compile takes a few seconds; the tests share one cache where they can.
"""
from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae
from symdae.compilation import cache as build
from symdae.errors import BuildError, InputError

pipeline = importlib.import_module("symdae.simulation.compile")
EXT = sysconfig.get_config_var("EXT_SUFFIX")

MODEL_SOURCE = '''
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols
import symdae

def make_model(name="cache_probe", stiffness=40.0, cubic=False):
    t = dynamicsymbols._t
    x = dynamicsymbols("x")
    m, c, d = sp.symbols("m c d")
    force = -c * x - d * x.diff(t)
    if cubic:
        force = -c * x**3 - d * x.diff(t)
    return symdae.Model(name, [x], mass_matrix=[[m]], forces=[force],
                        parameters={m: 1.0, c: stiffness, d: 0.4},
                        initial_state={x: 1.0}, outputs={"x": x})
'''
_ns: dict = {}
exec(compile(MODEL_SOURCE, "<cache model>", "exec"), _ns)
make_model = _ns["make_model"]


def folders(cache: Path) -> list[str]:
    """Cache entries that are complete builds (not lock files, temporaries or failures)."""
    return sorted(p.name for p in cache.iterdir()
                  if p.is_dir() and not p.name.startswith(".") and not p.name.endswith(".failed"))


def forbid(monkeypatch, *names):
    """Make the named build stages raise if anything calls them."""
    def boom(*args, **kwargs):
        raise AssertionError("a cache hit must not derive, emit or compile")
    targets = {"derive": (pipeline, "derive"), "emit": (pipeline, "emit_cython"),
               "compile": (build, "compile_module")}
    for n in names:
        monkeypatch.setattr(*targets[n], boom)


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("symdae_cache")


@pytest.fixture(scope="module")
def base(cache):
    system = symdae.compile_model(make_model(), cache_dir=cache)
    return system


# ---------------------------------------------------------------------------- keys and hits
def test_first_compile_builds(base, cache):
    info = base.build_info
    assert info["cache_hit"] is False
    folder = Path(info["folder"])
    assert folder.parent == cache and folder.name.startswith("cache_probe-")
    assert info["key"] == build.cache_key(make_model().definition())
    assert folder.name == build.build_name("cache_probe", info["key"])[0]
    for f in ("kernels.pyx", "meta.json", "build.log"):
        assert (folder / f).is_file(), f
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["key"] == info["key"] and meta["parameters"] == ["m", "c", "d"]
    assert not list(cache.glob(".tmp-*"))


def test_second_compile_hits_and_does_not_derive(base, cache, monkeypatch):
    forbid(monkeypatch, "derive", "emit", "compile")
    again = symdae.compile_model(make_model(), cache_dir=cache)
    assert again.build_info["cache_hit"] is True
    assert again.build_info["key"] == base.build_info["key"]
    assert again.build_info["folder"] == base.build_info["folder"]
    assert "derive_s" not in again.build_info and "compile_s" not in again.build_info
    np.testing.assert_array_equal(again.simulate(t_end=1.0, h=0.01).q, base.simulate(t_end=1.0, h=0.01).q)


def test_parameter_value_does_not_change_the_key(base, cache, monkeypatch):
    other = make_model(stiffness=55.0)
    assert build.cache_key(other.definition()) == base.build_info["key"]
    forbid(monkeypatch, "derive", "emit", "compile")
    system = symdae.compile_model(other, cache_dir=cache)
    assert system.build_info["cache_hit"] is True
    # the hit uses the new model's nominal values, not those of the model that was built
    assert system.parameter_vector()[1] == 55.0
    q_new = system.simulate(t_end=1.0, h=0.01).q
    q_run = base.simulate(t_end=1.0, h=0.01, params={"c": 55.0}).q
    np.testing.assert_array_equal(q_new, q_run)
    assert not np.allclose(q_new, base.simulate(t_end=1.0, h=0.01).q)


def test_changed_expression_rebuilds(base, cache):
    changed = make_model(cubic=True)
    key = build.cache_key(changed.definition())
    assert key != base.build_info["key"]
    system = symdae.compile_model(changed, cache_dir=cache)
    info = system.build_info
    assert info["cache_hit"] is False and info["key"] == key
    assert info["folder"] != base.build_info["folder"]
    assert {Path(info["folder"]).name, Path(base.build_info["folder"]).name} <= set(folders(cache))
    # the new kernels implement the new force: a0 = -c x0^3 / m
    tr = system.simulate(t_end=0.1, h=0.01, q0=[0.5], v0=[0.0])
    assert tr.a[0, 0] == pytest.approx(-40.0 * 0.125, rel=1e-14)


def probe_kwargs():
    t = dynamicsymbols._t
    x = dynamicsymbols("x")
    m, c, d = sp.symbols("m c d")
    return x, dict(mass_matrix=[[m]], forces=[-c * x - d * x.diff(t)],
                   parameters={m: 1.0, c: 40.0, d: 0.4}, initial_state={x: 1.0},
                   outputs={"x": x})


@pytest.mark.parametrize("mutate", ["none", "name", "order", "assumption", "output", "initial"])
def test_key_sees_definition_changes(mutate):
    """Keys differ for any change that shapes the generated code (no compile needed)."""
    ref = build.cache_key(make_model().definition())
    x, kw = probe_kwargs()
    m, c, d = sp.symbols("m c d")
    name = "cache_probe"
    if mutate == "name":
        name = "cache_probe2"
    elif mutate == "order":
        kw["parameters"] = {c: 40.0, m: 1.0, d: 0.4}
    elif mutate == "assumption":
        c2 = sp.Symbol("c", positive=True)
        kw["forces"] = [-c2 * x - d * x.diff(dynamicsymbols._t)]
        kw["parameters"] = {m: 1.0, c2: 40.0, d: 0.4}
    elif mutate == "output":
        kw["outputs"] = {"x": x, "v": x.diff(dynamicsymbols._t)}
    elif mutate == "initial":
        kw["initial_state"] = {x: 1.5}
    key = build.cache_key(symdae.Model(name, [x], **kw).definition())
    assert (key == ref) == (mutate == "none")


# ---------------------------------------------------------------------------- processes
WORKER = MODEL_SOURCE + '''
import json, sys, time
from pathlib import Path
cache, barrier, ident, parties = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
model = make_model(sys.argv[5])
(barrier / ident).touch()
deadline = time.time() + 120
while len(list(barrier.iterdir())) < parties and time.time() < deadline:
    time.sleep(0.002)
system = symdae.compile_model(model, cache_dir=cache)
tr = system.simulate(t_end=1.0, h=0.01)
print(json.dumps({"cache_hit": system.build_info["cache_hit"], "key": system.build_info["key"],
                  "folder": system.build_info["folder"], "q_end": tr.q[-1].tolist()}))
'''


def start_worker(tmp_path, cache, barrier, ident, parties, name, seed, env=None):
    script = tmp_path / "worker.py"
    if not script.exists():
        script.write_text(WORKER)
    # the symdae under test, not an installed one (its cache key may differ)
    env = dict(os.environ, PYTHONHASHSEED=str(seed),
               PYTHONPATH=str(Path(symdae.__file__).resolve().parents[1]), **(env or {}))
    env.pop("SYMDAE_CACHE_DIR", None)
    return subprocess.Popen([sys.executable, str(script), str(cache), str(barrier), ident,
                             str(parties), name], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
                            start_new_session=True)


def test_two_processes_compile_at_once(tmp_path):
    cache, barrier = tmp_path / "cache", tmp_path / "barrier"
    barrier.mkdir()
    # different hash seeds too: the key must not depend on Python's string hashing
    procs = [start_worker(tmp_path, cache, barrier, str(k), 2, "race_probe", seed)
             for k, seed in enumerate((1, 2))]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert results[0]["key"] == results[1]["key"]
    assert results[0]["folder"] == results[1]["folder"]
    assert sorted(r["cache_hit"] for r in results) == [False, True]
    assert results[0]["q_end"] == results[1]["q_end"]
    assert folders(cache) == [Path(results[0]["folder"]).name]
    assert not list(cache.glob(".tmp-*")) and not list(cache.glob("*.failed"))


def test_killed_build_is_never_loaded(tmp_path):
    """A build killed while its C compiler runs leaves only its temporary folder, which the next
    build neither loads nor keeps. The compiler is a stand-in that says it started and then
    waits when asked to compile, so the kill lands inside the compile whatever the machine's
    load."""
    cache, barrier = tmp_path / "cache", tmp_path / "barrier"
    barrier.mkdir()
    started = tmp_path / "compiler-started"
    compiler = tmp_path / "slow-cc"
    real = (sysconfig.get_config_var("CC") or "cc").split()[0]
    compiler.write_text(f"#!/bin/sh\ncase \" $* \" in *\" -c \"*) touch '{started}'; "
                        f"exec sleep 300;; esac\nexec {real} \"$@\"\n")
    compiler.chmod(0o755)
    model = make_model("kill_probe")
    dirname, modname = build.build_name(model.name, build.cache_key(model.definition()))
    proc = start_worker(tmp_path, cache, barrier, "0", 1, "kill_probe", 0,
                        env={"CC": str(compiler)})
    try:
        deadline = time.time() + 120
        while not started.exists():
            assert proc.poll() is None, proc.communicate()[1]
            assert time.time() < deadline, "the worker never started its compiler"
            time.sleep(0.01)
        assert list(cache.glob(f".tmp-{dirname}-*/{modname}.pyx"))
    finally:
        os.killpg(proc.pid, signal.SIGKILL)       # the worker and its compiler child
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    assert not (cache / dirname).exists(), "the build finished before it could be killed"
    (tmp,) = cache.glob(f".tmp-{dirname}-*")
    # a half-written extension in the temporary folder must not be picked up
    (tmp / f"{modname}{EXT}").write_bytes(b"\x7fELF truncated")
    system = symdae.compile_model(model, cache_dir=cache)
    assert system.build_info["cache_hit"] is False
    assert folders(cache) == [dirname]
    assert not tmp.exists(), "the stale temporary folder was not removed"
    assert system.simulate(t_end=0.5, h=0.01).counters["steps"] == 50


def test_damaged_cache_folder_is_rebuilt(tmp_path):
    cache = tmp_path / "cache"
    model = make_model("damaged_probe")
    dirname, _ = build.build_name(model.name, build.cache_key(model.definition()))
    (cache / dirname).mkdir(parents=True)
    (cache / dirname / "kernels.pyx").write_text("# left over\n")
    system = symdae.compile_model(model, cache_dir=cache)
    assert system.simulate(t_end=0.1, h=0.01).counters["steps"] == 10


# ---------------------------------------------------------------------------- names, failures
def test_malicious_names_compile_safely(tmp_path):
    marker = tmp_path / "pwned"
    evil = f'x]; import os; os.system("touch {marker}")#'
    t = dynamicsymbols._t
    q = sp.Function(evil + "_q")(t)                 # a coordinate with that name
    k = sp.Symbol(evil)                             # a parameter
    u = sp.Symbol(evil + "_u")                      # an input
    model = symdae.Model(f'evil"; import os; os.system("touch {marker}")#', [q],
                         mass_matrix=[[1]], forces=[-k * q + u], parameters={k: 4.0},
                         inputs=[u], initial_state={q: 1.0},
                         outputs={evil + "_out": q.diff(t)})
    cache = tmp_path / "cache"
    system = symdae.compile_model(model, cache_dir=cache)
    tr = system.simulate(t_end=0.5, h=0.01, inputs={evil + "_u": 0.0}, params={evil: 4.0})
    assert np.isfinite(tr.q).all() and tr.q[0, 0] == 1.0
    assert not marker.exists()
    folder = Path(system.build_info["folder"])
    assert folder.parent == cache                   # the folder name is sanitised
    sources = list(folder.glob("*.pyx")) + list(folder.glob("*.c"))
    assert len(sources) >= 3
    for path in sources:
        text = path.read_text(errors="replace")
        for needle in ("os.system", "pwned", "import os", evil):
            assert needle not in text, (path.name, needle)


BROKEN = {
    "cython": ("cdef int f(:\n    return 1\n", "Error compiling Cython file"),
    "c": ('cdef extern from *:\n    """\n    #error symdae_deliberately_broken\n    """\n'
          "    int dummy\n", "symdae_deliberately_broken"),
}


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_failed_compile_carries_output_and_log(tmp_path, kind):
    text, marker = BROKEN[kind]
    path = build.write_source(text, tmp_path, "symdae_broken_module")
    assert path == tmp_path / "symdae_broken_module.pyx" and path.read_text() == text
    with pytest.raises(BuildError) as exc:
        build.compile_module(tmp_path, "symdae_broken_module")
    e = exc.value
    log = Path(e.log_path)
    assert log.is_file() and log.parent == tmp_path
    assert str(log) in str(e)
    assert marker in str(e) and marker in e.output and marker in log.read_text()
    assert not list(tmp_path.glob(f"*{EXT}"))


def break_emit(monkeypatch):
    """Make the generated source fail to compile; returns the real emitter to restore."""
    real_emit = pipeline.emit_cython
    monkeypatch.setattr(pipeline, "emit_cython",
                        lambda *a, **k: real_emit(*a, **k) + "\ncdef int broken(:\n")
    return real_emit


def test_failed_model_build_keeps_log_and_next_build_succeeds(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    model = make_model("fail_probe")
    dirname, _ = build.build_name(model.name, build.cache_key(model.definition()))
    real_emit = break_emit(monkeypatch)
    with pytest.raises(BuildError) as exc:
        symdae.compile_model(model, cache_dir=cache)
    log = Path(exc.value.log_path)
    assert log.is_file() and log.parent == cache / f"{dirname}.failed"
    assert str(log) in str(exc.value) and "fail_probe" in str(exc.value)
    assert "Error compiling Cython file" in str(exc.value)
    assert folders(cache) == [] and not list(cache.glob(".tmp-*"))
    monkeypatch.setattr(pipeline, "emit_cython", real_emit)
    system = symdae.compile_model(model, cache_dir=cache)
    assert system.build_info["cache_hit"] is False and folders(cache) == [dirname]


# ---------------------------------------------------------------------------- correctness
def test_truncated_extension_is_rebuilt_not_loaded(tmp_path):
    """A damaged extension (truncated: loading it would kill the process with SIGBUS) fails
    the checksum recorded at build time and is rebuilt. Built and loaded in subprocesses: this
    process must not map the file it truncates."""
    cache = tmp_path / "cache"
    (tmp_path / "probe.py").write_text(MODEL_SOURCE)
    code = ("import sys, symdae; sys.path.insert(0, sys.argv[2]); from probe import make_model;"
            "s = symdae.compile_model(make_model('truncated_probe'), cache_dir=sys.argv[1]);"
            "print(s.build_info['cache_hit'], repr(s.simulate(t_end=0.1, h=0.01).q[-1, 0]))")

    def run():
        out = subprocess.run([sys.executable, "-c", code, str(cache), str(tmp_path)],
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr      # a SIGBUS would be a negative code
        return out.stdout.split()

    hit, q_first = run()
    assert hit == "False"
    (so,) = cache.glob(f"truncated_probe-*/*{EXT}")
    so.write_bytes(so.read_bytes()[:4096])
    hit, q_end = run()
    assert hit == "False" and q_end == q_first
    assert run() == ["True", q_first]


def test_module_of_another_definition_is_rebuilt(tmp_path, monkeypatch):
    """The definition hash embedded in a loaded module must be the model's: a folder that
    answers to the key but holds another model's kernels is rebuilt."""
    cache = tmp_path / "cache"
    a, b = make_model("collide_probe"), make_model("collide_probe", cubic=True)
    built_a = symdae.compile_model(a, cache_dir=cache)
    monkeypatch.setattr(build, "cache_key", lambda definition, flags=None:
                        built_a.build_info["key"])    # force b onto a's folder
    built_b = symdae.compile_model(b, cache_dir=cache)
    assert built_b.build_info["cache_hit"] is False
    assert built_b.backend.module.DEFINITION_HASH == b.definition_hash()
    tr = built_b.simulate(t_end=0.01, h=0.01, q0=[0.5], v0=[0.0])
    assert tr.a[0, 0] == pytest.approx(-40.0 * 0.125, rel=1e-14)     # the cubic force


def test_key_hashes_the_generator_sources(monkeypatch):
    """No hand-bumped version: the key covers the sources the emitted code depends on."""
    for rel in build.GENERATOR_SOURCES:
        assert (Path(build.__file__).parents[1] / rel).is_file(), rel
    for module in ("derivation", "kernels", "emit", "printer", "definition"):
        assert f"model/{module}.py" in build.GENERATOR_SOURCES
    definition = make_model().definition()
    ref = build.cache_key(definition)
    monkeypatch.setattr(build, "generator_digest", lambda: "another generator")
    assert build.cache_key(definition) != ref


def test_compile_flags_follow_the_vector_instructions(base, monkeypatch):
    """AVX2 machines build the whole module for AVX2, never with FMA (one rounding less would
    break the compiled steps' bit-for-bit agreement with the core's); the flags are part of
    the key and recorded in meta.json."""
    assert build.compile_flags("base") == build.COMPILE_FLAGS
    avx2 = build.compile_flags("avx2")
    assert avx2[:len(build.COMPILE_FLAGS)] == build.COMPILE_FLAGS
    assert "-mavx2" in avx2 and "-ffp-contract=off" in avx2
    assert not any("fma" in f for f in avx2)
    with pytest.raises(InputError, match="avx512"):
        build.compile_flags("avx512")
    folder = Path(base.build_info["folder"])
    assert tuple(json.loads((folder / "meta.json").read_text())["flags"]) == \
        build.compile_flags()
    command = (folder / "build.log").read_text().splitlines()[0]
    assert json.dumps(list(build.compile_flags())) in command
    definition = make_model().definition()
    keys = {build.cache_key(definition, build.compile_flags(v)) for v in build.VECTOR_FLAGS}
    assert len(keys) == len(build.VECTOR_FLAGS)
    assert build.cache_key(definition) == build.cache_key(definition, build.compile_flags())
    monkeypatch.setattr(build, "vector_extension", lambda: "base")
    assert build.compile_flags() == build.COMPILE_FLAGS


def test_warm_load_starts_no_subprocess(base, cache, monkeypatch):
    """A warm load asks no compiler anything (its version is recorded at build time only)."""
    def no_subprocess(*args, **kwargs):
        raise AssertionError(f"a warm load started a subprocess: {args}")
    monkeypatch.setattr(subprocess, "run", no_subprocess)
    again = symdae.compile_model(make_model(), cache_dir=cache)
    assert again.build_info["cache_hit"] is True


# ---------------------------------------------------------------------------- cache errors
@pytest.mark.parametrize("error", [
    PermissionError(13, "Permission denied"),        # a read-only cache (tests run as root)
    OSError(27, "File too large"),                   # ulimit -f
])
def test_cache_errors_name_the_folder_and_how_to_choose_another(tmp_path, monkeypatch, error):
    cache = tmp_path / "cache"

    def fail(cache_folder, dirname):
        error.filename = str(cache_folder / f".tmp-{dirname}")
        raise error
    monkeypatch.setattr(build, "_make_temporary", fail)
    with pytest.raises(BuildError) as exc:
        symdae.compile_model(make_model("readonly_probe"), cache_dir=cache)
    msg = str(exc.value)
    assert f"the compile cache {cache}" in msg and error.strerror in msg
    assert "--cache-dir" in msg and "SYMDAE_CACHE_DIR" in msg and ".tmp-readonly_probe" in msg


def test_a_killed_compiler_is_reported_with_its_signal(tmp_path, monkeypatch):
    def killed(cmd, **kwargs):
        return subprocess.CompletedProcess(cmd, -signal.SIGKILL, "", "")
    monkeypatch.setattr(build.subprocess, "run", killed)
    with pytest.raises(BuildError, match="the compiling process was killed by SIGKILL"):
        build.compile_module(tmp_path, "symdae_killed")
    output = "error: command '/usr/bin/gcc' terminated by signal 9\n"
    assert build._exit_reason(1, output) == "the C compiler was killed by SIGKILL"
    assert build._exit_reason(1, "error: x.pyx:3:4: undeclared") == "exit code 1"


def test_failed_builds_go_once_a_build_succeeds_and_folders_follow_the_umask(tmp_path,
                                                                            monkeypatch):
    cache = tmp_path / "cache"
    model = make_model("umask_probe")
    dirname, _ = build.build_name(model.name, build.cache_key(model.definition()))
    real_emit = break_emit(monkeypatch)
    # an earlier failure of another version of the model, and this version's own
    (cache / "umask_probe-0123456789abcdef.failed").mkdir(parents=True)
    with pytest.raises(BuildError):
        symdae.compile_model(model, cache_dir=cache)
    assert [p.name for p in cache.glob("*.failed")] == [f"{dirname}.failed"]   # the latest
    monkeypatch.setattr(pipeline, "emit_cython", real_emit)
    old = os.umask(0o022)
    try:
        symdae.compile_model(model, cache_dir=cache)
    finally:
        os.umask(old)
    assert not list(cache.glob("*.failed"))
    assert (cache / dirname).stat().st_mode & 0o777 == 0o755       # not mkdtemp's 0700

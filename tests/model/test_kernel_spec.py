"""The kernel spec is the one place that knows the kernel interface: the C header, the .pxd, the
ABI numbers, the compiled core and every generated module agree with it."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import symdae
from symdae._version import ABI_VERSION
from symdae.errors import InputError, UnknownNameError
from symdae.model import kernels
from symdae.model.kernels import KERNEL_NAMES, KERNELS, Sizes, layout, pack_weights, split

CORE = Path(symdae.__file__).parent / "simulation" / "core"


def enum_names(text: str) -> list[str]:
    return re.findall(r"^\s*(SYMDAE_[A-Z_]+),?\s*(?:#.*)?$", text, flags=re.M)


def test_header_and_pxd_list_the_spec_kernels_in_order():
    want = [f"SYMDAE_{name.upper()}" for name in KERNEL_NAMES] + ["SYMDAE_N_KERNELS"]
    header = (CORE / "symdae_kernels.h").read_text()
    pxd = (CORE / "kernel_api.pxd").read_text()
    assert enum_names(header.split("typedef enum {")[1].split("}")[0]) == want
    assert enum_names(pxd.split("enum:   # symdae_kernel_id")[1].split("ctypedef")[0]) == want


def test_abi_numbers_agree():
    header = (CORE / "symdae_kernels.h").read_text()
    (h_abi,) = re.findall(r"#define SYMDAE_ABI_VERSION (\d+)", header)
    from symdae.simulation.core import hht
    assert int(h_abi) == ABI_VERSION == kernels.ABI_VERSION == hht.ABI_VERSION
    assert hht.N_KERNELS == len(KERNELS)


def test_internal_kernels_come_last_and_every_other_kernel_builds():
    internal = [k.internal for k in KERNELS]
    assert internal == sorted(internal), "internal (time-term) kernels must come last"
    for k in KERNELS:
        assert (k.build is None) == k.internal, k.name
        assert k.doc, f"kernel {k.name} has no doc line"


@pytest.mark.parametrize("name", ["engine_mount", "slider_crank", "oscillator"])
def test_generated_module_layout_is_the_specs(name):
    system = symdae.compile_model(symdae.load_model(name)[0])
    sizes = system.sizes
    module = system.backend.module
    assert module.ABI_VERSION == ABI_VERSION
    assert Sizes.of(module.SIZES) == sizes
    for idx, spec in enumerate(KERNELS):
        out, w, acc = system.backend.kernels.layout(idx)
        assert out == kernels.size(spec.name, sizes), spec.name
        assert w == kernels.weight_size(spec.name, sizes), spec.name
        assert acc == spec.accumulate, spec.name


def test_layout_split_and_pack_weights():
    sz = Sizes(n=3, m=2, n_p=4, n_u=1, n_s=2)
    lay = layout("jacobians", sz)
    assert lay == {"JM": (0, 9, (3, 3)), "JG": (9, 18, (3, 3)), "GV": (18, 27, (3, 3)),
                   "Cq": (27, 33, (2, 3))}
    flat = np.arange(33.0)
    parts = split("jacobians", flat, sz)
    np.testing.assert_array_equal(parts["Cq"], np.arange(27.0, 33.0).reshape(2, 3))
    assert np.shares_memory(parts["JG"], flat)          # views, no copies
    w = pack_weights("state_vjp", sz, wG=[1.0, 2.0, 3.0], wL=7.0)
    np.testing.assert_array_equal(w, [0, 0, 0, 1, 2, 3, 0, 0, 7, 7, 7])
    np.testing.assert_array_equal(pack_weights("newton", sz, c_m=1.0), [1.0, 0.0, 0.0])
    assert kernels.size("output_vjp", sz) == sz.nx + sz.n_p == 15
    with pytest.raises(UnknownNameError, match="unknown kernel 'jacobian'; kernels: residual"):
        layout("jacobian", sz)
    with pytest.raises(UnknownNameError, match=r"no weight block\(s\) \['wX'\]"):
        pack_weights("state_vjp", sz, wX=1.0)
    with pytest.raises(InputError, match=r"kernel residual: output has shape \(5,\), expected"):
        split("residual", np.zeros(5), sz)


def check_declared_time_terms(k, sz, nominal) -> None:
    """Every kernel of the compiled kernels ``k`` evaluated with the time terms it does not
    declare left NaN gives exactly its output with all of them, at a state and weights away
    from zero."""
    rng = np.random.default_rng(1)
    p = np.array(nominal, dtype=float)
    args = [rng.uniform(0.1, 0.2, max(size, 1)) for size in (sz.n, sz.n, sz.n, sz.m)]
    args += [p if sz.n_p else np.zeros(1), rng.uniform(0.1, 0.2, max(sz.n_u, 1))]
    for idx, spec in enumerate(KERNELS):
        if spec.internal and spec.name != "state_terms":    # the time terms themselves
            assert k.tau_reads(idx) == 0, spec.name
            continue
        w = rng.uniform(0.5, 1.5, max(kernels.weight_size(spec.name, sz), 1))
        full = k.evaluate(idx, 0.37, *args, w)
        assert np.all(np.isfinite(full)), spec.name
        np.testing.assert_array_equal(k.evaluate(idx, 0.37, *args, w, k.tau_reads(idx)), full,
                                      err_msg=spec.name)


@pytest.mark.parametrize("name", ["engine_mount", "slider_crank", "cart_pendulum"])
def test_each_kernel_reads_only_the_time_terms_it_declares(name):
    """A sweep evaluates only the time terms its kernels declare (symdae_kernel_entry.tau)."""
    system = symdae.compile_model(symdae.load_model(name)[0])
    check_declared_time_terms(system.backend.kernels, system.sizes, system.model.nominal_values)


def test_time_terms_are_declared_where_the_engine_mount_reads_them():
    """The engine mount's excitation A sin(omega0 C^t t) is a hoisted time term: the residual
    reads it, the parameter Jacobian its derivatives (sensitivity terms), the state Jacobians
    and the Newton matrix neither."""
    k = symdae.compile_model(symdae.load_model("engine_mount")[0]).backend.kernels
    reads = {name: k.tau_reads(i) for i, name in enumerate(KERNEL_NAMES)}
    assert reads["residual"] & 1 and reads["param_jacobians"] == 2
    assert reads["newton"] == reads["jacobians"] == 0



def test_absolute_values_of_parameters_stay_in_their_kernels():
    """|p| prints as one fabs: the kernels that read it compute it (the round-off level's
    |m|, |c|, ...), it is no time term. The engine mount's forward time terms are its
    excitation and that term's size, the sensitivity terms the excitation's seven
    derivatives; the residual's round-off level reads the size and computes the rest."""
    source = symdae.emit_cython(symdae.derive(symdae.load_model("engine_mount")[0]))

    def body(kernel):
        return source.split(f"// kernel {kernel}:")[1].split("\n    }\n")[0]
    forward = body("time_terms")
    assert re.findall(r"out\[(\d+)\] =", forward) == ["0", "1"], forward
    assert not re.search(r"out\[\d+\] = fabs\(p\[\d+\]\);", body("time_terms_sensitivity"))
    magnitude = body("residual_magnitude")
    assert "tau[1]" in magnitude and "fabs(p[4])" in magnitude
    assert symdae.compile_model(symdae.load_model("engine_mount")[0]).sizes.n_tau == 9


def check_time_terms_are_all_of_them(k, sz, nominal) -> None:
    """time_terms_sensitivity of the compiled kernels ``k`` writes every time term, the
    forward ones bit for bit as time_terms does (the core calls only it where a sweep reads
    both)."""
    idx = {s: KERNEL_NAMES.index(s) for s in ("time_terms", "time_terms_sensitivity")}
    rng = np.random.default_rng(3)
    args = [rng.uniform(0.1, 0.2, max(size, 1)) for size in (sz.n, sz.n, sz.n, sz.m)]
    args += [np.array(nominal, dtype=float), rng.uniform(0.1, 0.2, max(sz.n_u, 1))]
    for t in (0.0, 0.37, 1.9):
        fwd = k.evaluate(idx["time_terms"], t, *args, np.zeros(1), 0)
        full = k.evaluate(idx["time_terms_sensitivity"], t, *args, np.zeros(1), 0)
        nonzero = np.flatnonzero(fwd)      # a model may have no forward time terms
        n_fwd = int(nonzero[-1]) + 1 if nonzero.size else 0
        np.testing.assert_array_equal(full[:n_fwd], fwd[:n_fwd])
        assert np.all(np.isfinite(full)) and np.count_nonzero(full[n_fwd:]) > 0


@pytest.mark.parametrize("name", ["engine_mount", "four_cylinder_tvd"])
def test_sensitivity_time_terms_are_all_of_them(name):
    """time_terms_sensitivity evaluates every time term, each costly function once: the
    engine mount's excitation sin(omega0 C^t t) and C^t appear once in it, though the
    forward term and four derivative terms read them."""
    model = symdae.load_model(name)[0]
    if name == "engine_mount":
        source = symdae.emit_cython(symdae.derive(model))
        body = source.split("// kernel time_terms_sensitivity:")[1].split("\n    }\n")[0]
        assert body.count("sin(") == 1 and body.count("pow(") == 1 and body.count("cos(") == 1
    system = symdae.compile_model(model)
    check_time_terms_are_all_of_them(system.backend.kernels, system.sizes,
                                     model.nominal_values)

"""Which kernels and solves a module marks for inlining into its compiled adjoint step
(SYMDAE_STEP_INLINE: emit.py's STEP_INLINE_KERNELS up to STEP_INLINE_NODES, lu_plan.py's
written_lu_solve_t up to MAX_INLINE_SOLVE_T multiply-subtracts). Text only, no compiler:
tests/simulation/test_compiled_steps.py runs the compiled adjoint steps and compares them
with the core's generic step bit for bit."""
from __future__ import annotations

import re
from pathlib import Path

import symdae
from symdae.model import emit, lu_plan
from symdae.model.lu_plan import lu_lines, plan_lu


def _marked(source: str) -> set:
    return set(re.findall(r"SYMDAE_STEP_INLINE static \w+ (\w+)\(", source))


def test_the_adjoint_steps_small_kernels_and_solve_are_marked(monkeypatch):
    model, _ = symdae.load_model("engine_mount")
    ds = symdae.derive(model)
    source = symdae.emit_cython(ds)
    assert _marked(source) == {"_k_state_vjp", "_k_param_vjp", "_k_output_vjp",
                               "written_lu_solve_t"}
    # the module includes the header that defines the mark for the C compiler
    assert '#include "symdae_kernels.h"' in source
    header = (Path(symdae.__file__).parent / "simulation" / "core" / "symdae_kernels.h")
    assert re.search(r"#define SYMDAE_STEP_INLINE __attribute__\(\(always_inline\)\) inline",
                     header.read_text())
    # kernels above the size limit stay calls (the engine mount's state_vjp, param_vjp and
    # output_vjp are 71, 97 and 4 tree nodes); so does a solve above its limit
    monkeypatch.setattr(emit, "STEP_INLINE_NODES", 80)
    assert _marked(symdae.emit_cython(ds)) == {"_k_state_vjp", "_k_output_vjp",
                                                "written_lu_solve_t"}
    monkeypatch.setattr(emit, "STEP_INLINE_NODES", 0)
    monkeypatch.setattr(lu_plan, "MAX_INLINE_SOLVE_T", 0)
    assert _marked(symdae.emit_cython(ds)) == set()


def test_the_solve_limit_counts_the_transposed_solves_multiply_subtracts(monkeypatch):
    # an arrow matrix: 3 multipliers below and 3 above the last pivot
    N = 4
    nz = [i * N + i for i in range(N)] + [3 * N + j for j in range(3)] + [j * N + 3
                                                                           for j in range(3)]
    plan = plan_lu(nz, N)
    steps = plan.solve_updates
    assert steps == 6           # by hand: 3 multipliers below the last pivot, 3 above
    monkeypatch.setattr(lu_plan, "MAX_INLINE_SOLVE_T", steps)
    assert "SYMDAE_STEP_INLINE static void written_lu_solve_t(" in "\n".join(lu_lines(plan))
    monkeypatch.setattr(lu_plan, "MAX_INLINE_SOLVE_T", steps - 1)
    text = "\n".join(lu_lines(plan))
    assert "SYMDAE_STEP_INLINE" not in text and "static void written_lu_solve_t(" in text

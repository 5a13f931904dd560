"""The tangent sweep's products with the state Jacobian blocks, written out for one model.

The tangent-linear sweep (symdae/simulation/core/tangent.pxd) multiplies the Jacobian blocks
at each state with the tangents of all its directions: y += P(vals) x, one entry of a block
at a time, from entry lists its structure pass finds at run time. For the few directions of a
Fisher information or a Gauss-Newton Jacobian the index loads and loop of each entry cost
more than its multiply-adds (the engine mount's four directions: about 900 of the sweep's
2 500 instructions per step). A kernel module can carry these products written out for
nd = 1 .. SYMDAE_TANGENT_ND directions: every index a constant, so that the C compiler keeps
the rows of y in registers. They are the lists' operations entry for entry, in the order of
tangent.pxd's ``collect_products`` (so the same numbers), for the products whose entries
do not depend on the directions: those with the state blocks at x_{i+1} (NEW_STATE) and at
x_i (OLD_STATE) and with the output Jacobian (OUT_STATE). The parameter blocks' products
keep to the lists, which hold only the columns some direction moves. The core takes the
written code where its structure pass counted the entries it was written for.
"""
from __future__ import annotations

from dataclasses import dataclass

from .printer import c_block

__all__ = ["TANGENT_ND", "MAX_ENTRIES", "ProductEntry", "state_products", "tangent_lines"]

# symdae_kernels.h's SYMDAE_TANGENT_ND: the direction counts written out
TANGENT_ND = 4
# every direction count is a copy of each product's entries: above this many entries (over
# the three products) the module keeps to the core's lists, whose cost per entry matters
# less where the kernels are large. Written out, the flexible beam's 227 entries took its
# cold build from 3.9 to 4.5-5.0 s and the spring chain's 234 from 3.3-3.4 to 3.7-4.2 s
MAX_ENTRIES = 128

# the three products, in the order of symdae_tangent_products.fn's second index
PRODUCTS = ("new_state", "old_state", "outputs")


@dataclass(frozen=True)
class ProductEntry:
    """y[row] += coef vals[at] x[col] (for each direction)."""

    row: int
    col: int
    at: int
    coef: str     # C: "coef[0]" (c_M), "coef[1]" (1 / s), "coef[2]" (-alpha_p) or "1.0"


def _block(written, start: int, rows: int, cols: int, row0: int, col0: int, coef: str,
           transpose: bool = False) -> list:
    """tangent.pxd's ``block``: the written entries of a row-major block, row by row."""
    out = []
    for r in range(rows):
        for k in range(cols):
            at = start + r * cols + k
            if written[at]:
                out.append(ProductEntry(row0 + k if transpose else row0 + r,
                                        col0 + r if transpose else col0 + k, at, coef))
    return out


def state_products(jac_written, out_written, n: int, m: int, n_s: int) -> dict:
    """{product: its entries} from the entries the jacobians kernel (J_M, J_G, G_V, C_q) and
    the output_jacobians kernel (S_x first) write, as collect_products lists them."""
    nn, nx = n * n, 3 * n + m
    new = (_block(jac_written, 0, n, n, 0, 0, "coef[0]")
           + _block(jac_written, nn, n, n, 0, 0, "1.0")
           + _block(jac_written, 2 * nn, n, n, 0, n, "1.0")
           + _block(jac_written, 3 * nn, m, n, n, 0, "coef[1]"))
    old = (_block(jac_written, nn, n, n, 0, 0, "coef[2]")
           + _block(jac_written, 2 * nn, n, n, 0, n, "coef[2]")
           + _block(jac_written, 3 * nn, m, n, 0, 3 * n, "coef[2]", True))
    outputs = _block(out_written, 0, n_s, nx, 0, 0, "1.0")
    return {"new_state": new, "old_state": old, "outputs": outputs}


def _body(entries: list, nd: int) -> list:
    """The C statements of one product for nd directions: sd_product's operations (pairs of
    directions, then the odd one) with constant offsets."""
    lines = ["    double c;"]
    for e in entries:
        lines.append(f"    c = {e.coef} * vals[{e.at}];")
        y, x = e.row * nd, e.col * nd
        d = 0
        while d + 1 < nd:
            lines.append(f"    sd_store_pair(y + {y + d}, sd_load_pair(y + {y + d}) "
                         f"+ c * sd_load_pair(x + {x + d}));")
            d += 2
        if d < nd:
            lines.append(f"    y[{y + d}] += c * x[{x + d}];")
    return lines


@dataclass(frozen=True)
class TangentLines:
    """The module's written-out products: Cython lines declaring them (C inside) and the
    lines that fill the kernel table's ``tangent`` record."""

    code: list
    table: list


def tangent_lines(jac_written, out_written, n: int, m: int, n_s: int) -> TangentLines:
    """The products for nd = 1 .. TANGENT_ND, or none (a NULL table) where they have more
    than MAX_ENTRIES entries together."""
    prods = state_products(jac_written, out_written, n, m, n_s)
    table = [f"_model.tangent.nnz[{k}] = {len(prods[p])}" for k, p in enumerate(PRODUCTS)]
    if sum(len(v) for v in prods.values()) > MAX_ENTRIES:
        return TangentLines([], table + [
            f"_model.tangent.fn[{nd}][{k}] = NULL"
            for nd in range(TANGENT_ND + 1) for k in range(len(PRODUCTS))])
    c = ['#include "vector_ops.h"',
         "/* the tangent sweep's products with the state blocks (symdae/model/"
         "tangent_products.py) */"]
    decls = []
    for nd in range(1, TANGENT_ND + 1):
        for p in PRODUCTS:
            name = f"sd_tangent_{p}_{nd}"
            c += [f"static void {name}(const double *restrict vals, const double *restrict x, "
                  "double *restrict y, const double *restrict coef) {"]
            c += _body(prods[p], nd) + ["}", ""]
            decls.append(f"void {name}(const double* vals, const double* x, double* y, "
                         "const double* coef) noexcept nogil")
    table += [f"_model.tangent.fn[0][{k}] = NULL" for k in range(len(PRODUCTS))]
    table += [f"_model.tangent.fn[{nd}][{k}] = sd_tangent_{p}_{nd}"
              for nd in range(1, TANGENT_ND + 1) for k, p in enumerate(PRODUCTS)]
    return TangentLines(c_block(c, decls), table)

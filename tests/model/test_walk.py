"""symdae.model.walk.serialize: the model's definition text (the compile cache's key) written
once per distinct subexpression."""
from __future__ import annotations

import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae
from symdae.model.walk import serialize


def test_shared_subexpressions_are_written_once():
    """e_{k+1} = e_k^2 + e_k, 40 times: as a tree 2^40 nodes (srepr could not write it), here
    a few lines per level; the text names the root last."""
    x = sp.Symbol("x", real=True)
    e = x
    for _ in range(40):
        e = sp.Add(sp.Pow(e, 2, evaluate=False), e, evaluate=False)
    text = serialize((e,))
    assert len(text.splitlines()) < 200 and text.endswith(")")


def test_equal_objects_give_equal_text_and_different_ones_differ():
    q = dynamicsymbols("q")
    t = dynamicsymbols._t
    c, d = sp.symbols("c d")

    def parts(coef, sym=c):
        return ("m", sp.Matrix([[1, q], [q, 2]]), [coef * sym * q + d * q.diff(t)], None,
                (("out", q),))

    base = serialize(parts(3))
    assert serialize(parts(3)) == base
    for other in (parts(4), parts(sp.Float(3.0)), parts(3, sp.Symbol("c", positive=True)),
                  ("n",) + parts(3)[1:]):
        assert serialize(other) != base
    # a matrix entry that moves, a nested tuple's order, a string's content
    assert serialize(("m", sp.Matrix([[q, 1], [q, 2]]))) != serialize(
        ("m", sp.Matrix([[1, q], [q, 2]])))
    assert serialize((("a", q), ("b", q))) != serialize((("b", q), ("a", q)))


def test_the_definition_of_a_model_is_its_serialisation():
    model, _ = symdae.load_model("slider_crank")
    again, _ = symdae.load_model("slider_crank")
    assert model.definition() == again.definition()

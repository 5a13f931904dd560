"""Units declared in a model, and the figures that show them."""
from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae
from symdae.errors import ModelError, UnknownNameError
from symdae.plots.base import axis_label, envelope, fit_figure, outputs_figure

t = dynamicsymbols._t
x = dynamicsymbols("x")
k, F = sp.symbols("k F")


def spring(units=None):
    return symdae.Model("spring_units", [x], mass_matrix=[[1]], forces=[-k * x + F],
                        parameters={k: 4.0}, inputs=[F], outputs={"acc": x.diff(t, 2)},
                        units=units)


def test_units_by_name_symbol_or_coordinate():
    m = spring({"acc": "m/s^2", x: "m", k: "N/m", "F": "N"})
    assert m.units == {"acc": "m/s^2", "x": "m", "k": "N/m", "F": "N"}
    assert m.unit("acc") == "m/s^2" and m.unit("nothing declared") == ""
    # not part of the generated code: the same kernels with or without them
    assert m.definition_hash() == spring().definition_hash()
    with pytest.raises(UnknownNameError, match=r"units: 'speed' is not an output, coordinate"):
        spring({"speed": "m/s"})
    with pytest.raises(ModelError, match=r"units: the unit of 'k' must be a string"):
        spring({k: 4})


def test_bundled_models_declare_units():
    model, _ = symdae.load_model("engine_mount")
    assert model.unit("a1") == "m/s^2" and model.unit("cE2") == "N/m^3"
    assert axis_label("a1", model.unit("a1")) == "a1 [m/s^2]" and axis_label("q") == "q"


def test_fit_figure_shows_every_fitted_output_with_units():
    t = np.linspace(0.0, 10.0, 100_001)
    y = np.sin(50 * t)
    t_few = np.linspace(0.0, 10.0, 50)
    fits = {"a1": (t, y, {"start": 1.1 * y, "identified": y + 1e-9}),
            "lambda": (t_few, np.cos(t_few), {"identified": np.cos(t_few)})}
    fig = fit_figure(fits, {"a1": "m/s^2", "lambda": "N/m"})
    axes = fig.axes
    assert len(axes) == 4                           # one row per output, signal and residual
    assert axes[0].get_ylabel() == "a1 [m/s^2]" and axes[2].get_ylabel() == "lambda [N/m]"
    assert axes[1].get_ylabel() == "|a1 - measured| [m/s^2]"
    assert axes[2].get_xlabel() == "t [s]" and axes[3].get_xlabel() == "t [s]"
    # 100 001 samples drawn as a min/max envelope of 4000 bins, not a solid block
    long_line = axes[0].lines[0]
    assert len(long_line.get_xdata()) == 8000
    assert long_line.get_ydata().max() == pytest.approx(1.0, abs=1e-6)
    # 50 samples: points
    assert axes[2].lines[0].get_marker() == "."
    labels = [line.get_label() for line in axes[0].lines]
    assert labels == ["measured", "start", "identified"]


def test_envelope_keeps_the_extremes():
    t = np.arange(20_000.0)
    y = np.zeros(20_000)
    y[12_345], y[777] = 5.0, -3.0
    te, ye = envelope(t, y, points=1000)
    assert len(te) == 2000 and ye.max() == 5.0 and ye.min() == -3.0
    short = np.arange(10.0)
    assert envelope(short, short)[1] is short


def test_outputs_figure_labels(tmp_path):
    system = symdae.compile_model(spring({"acc": "m/s^2"}))
    traj = system.simulate(t_end=0.1, h=1e-3, inputs={"F": 1.0})
    fig = outputs_figure(traj, system.model.units)
    assert fig.axes[0].get_ylabel() == "acc [m/s^2]" and fig.axes[-1].get_xlabel() == "t [s]"

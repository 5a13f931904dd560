"""simulate -> identify: the CSV that ``symdae simulate`` writes is data that ``symdae identify
--data`` reads, for every bundled model. States are written as q:NAME, v:NAME, a:NAME and
lambda:MULTIPLIER, outputs by their names, so an output named like a coordinate (x1 in the
engine mount, x in the pendulum) is not ambiguous."""
from __future__ import annotations

import csv
import json

import pytest

import symdae
from symdae import Scenario
from symdae.cli.main import main

# the fast set: outputs named like coordinates (engine mount: x1; pendulum: x), multipliers
# (pendulum, slider-crank), inputs written to the CSV (two-mass oscillator), a switching force
# (end stop); every other bundled model in the slow set (README: "the slow set")
FAST = {"engine_mount", "pendulum", "slider_crank", "two_mass_oscillator", "end_stop"}


@pytest.mark.parametrize("name", [n if n in FAST else pytest.param(n, marks=pytest.mark.slow)
                                  for n in symdae.bundled_models()])
def test_simulate_then_identify_from_its_csv(tmp_path, name):
    model, ns = symdae.load_model(name)
    sc = Scenario.make(ns.get("SCENARIO") or {"t_end": 1.0, "h": 1e-3})
    t_end = f"{sc.t0 + 40 * sc.h!r}"
    assert main(["simulate", name, "--t-end", t_end, "--no-plot",
                 "--out-dir", str(tmp_path / "sim")]) == 0
    path = tmp_path / "sim" / "trajectory.csv"
    with open(path) as fh:
        header = next(csv.reader(fh))
    assert len(set(header)) == len(header), header
    assert set(model.output_names) <= set(header)
    nominal = dict(zip(model.parameter_names, model.nominal_values))
    free = next(iter(ns.get("FREE", []))) if ns.get("FREE") else \
        next(k for k, v in nominal.items() if v)
    out = tmp_path / "id"
    # started at the nominal values the data were simulated with: the cost must be zero, so
    # every output column was read back exactly and matched to its output
    assert main(["identify", name, "--data", str(path), "--t-end", t_end, "--free", free,
                 "--start", f"{free}={nominal[free]!r}", "--quiet", "--out-dir", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["data"]["synthetic"] is False
    assert report["outputs"] and set(report["outputs"]) <= set(model.output_names)
    assert report["result"]["start_cost"] == 0.0
    assert report["result"]["identified"][free] == nominal[free]

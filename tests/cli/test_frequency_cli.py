"""``symdae identify MODEL --domain frequency``: the report, the figures, bad input."""
from __future__ import annotations

import json

import numpy as np

from symdae.cli.main import main


def test_cart_pendula_in_the_frequency_domain(tmp_path, capsys):
    """The paper's case from the model file's defaults (band, start, model error), on a 20 s
    record (lines 1.25, 1.3, ..., 1.45 Hz) to keep the test short."""
    out = tmp_path / "freq"
    rc = main(["identify", "cart_pendula", "--domain", "frequency", "--contour", "5",
               "--t-end", "20", "--quiet", "--out-dir", str(out)])
    assert rc == 0
    report = json.loads((out / "report.json").read_text())
    assert report["domain"] == "frequency" and report["model_error"] == {"d_c": 0.1}
    assert report["result"]["method"] == "BFGS"
    np.testing.assert_allclose(report["analysis"]["lines_hz"], 1.25 + 0.05 * np.arange(5))
    err = report["relative_error"]
    assert err["c_f"] <= 0.01 and err["d_f"] <= 0.15
    spectra = report["spectra"]["phi1"]
    meas = np.array(spectra["measured"]["amplitude"])
    before = np.array(spectra["start"]["amplitude"])
    after = np.array(spectra["identified"]["amplitude"])
    assert np.max(np.abs(after - meas)) < 0.05 * np.max(np.abs(before - meas))
    contrast = report["time_domain_contrast"]
    assert set(contrast["relative_error"]) == {"c_f", "d_f"}
    assert [len(g["x"]) for g in report["cost_grids"]] == [5, 5]
    for name in ("spectra.png", "time.png", "convergence.png", "contour.png", "data.csv"):
        assert (out / name).stat().st_size > 1000
    text = capsys.readouterr().out
    # the frequency-domain result first, then the contrast under its own heading
    result_at = text.index("BFGS:")
    contrast_at = text.index("time-domain contrast (least squares on the same data")
    assert result_at < text.index("relative errors against the true values") < contrast_at


def test_no_model_error_and_other_options(tmp_path):
    out = tmp_path / "control"
    rc = main(["identify", "cart_pendula", "--domain", "frequency", "--model-param",
               "d_c=0.01", "--window", "hann", "--kind", "amplitude", "--band", "1.2:1.5",
               "--t-end", "20", "--contour", "0", "--no-contrast", "--quiet",
               "--out-dir", str(out)])
    assert rc == 0
    report = json.loads((out / "report.json").read_text())
    assert report["analysis"]["window"] == "hann" and report["analysis"]["gain"] == 2.0
    assert max(report["relative_error"].values()) < 1e-6
    assert "time_domain_contrast" not in report and not (out / "contour.png").exists()


def test_bad_frequency_input_exits_with_a_message(tmp_path, capsys):
    base = ["identify", "cart_pendula", "--domain", "frequency", "--quiet", "--t-end", "4",
            "--out-dir", str(tmp_path / "bad")]
    assert main(base + ["--band", "150:160"]) == 2
    err = capsys.readouterr().err
    assert "band [150, 160] Hz" in err and "Nyquist frequency 100 Hz" in err
    assert main(base + ["--band", "1.3:1.4"]) == 2
    assert "band [1.3, 1.4] Hz contains no line" in capsys.readouterr().err
    assert main(base + ["--window-span", "0:5"]) == 2
    assert "is 5 s long, longer than the measurement" in capsys.readouterr().err
    assert main(base + ["--window", "nosuchwindow"]) == 2
    assert "unknown window 'nosuchwindow'" in capsys.readouterr().err
    assert main(base + ["--model-param", "d_x=0.1"]) == 2
    assert "d_x" in capsys.readouterr().err

"""Measured data: ``measurement`` (Measurement: samples on their own time grid, CSV in and
out), ``readers`` (test-bench recordings: CSV dialects, MATLAB, MDF4, TDMS; per-channel time
bases), ``units`` (unit conversion and the channel map), ``alignment`` (recordings onto the
simulation grid: interpolation, anti-aliased resampling, time offsets).

May import: ``symdae.errors`` and this package only.
"""

"""Measured data: ``Measurement`` (samples on their own time grid, alignment to a model's grid,
CSV in and out).

May import: ``symdae.errors`` and this package only.
"""

"""Optimal input design: ``driver`` (design_input), ``criteria``, ``problem`` (the design
objective and its exact gradient), ``gradients`` (reverse over tangent: input gradients),
``input_maps`` (input bases and bounds) and ``study`` (the paper's studies).

May import: ``symdae.identification`` and the layers below.
"""

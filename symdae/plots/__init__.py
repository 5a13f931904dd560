"""Figures, one module per domain on one public figure function (``base.figure``).

May import: ``symdae.design`` and the layers below (matplotlib is imported only here).
"""

"""The build stage: content-hashed cache key, writing the source, compiling it in a child
process (``worker``), loading the extension (``cache``). Knows neither models nor systems.

May import: ``symdae.errors`` and this package only.
"""

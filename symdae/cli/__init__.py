"""The command line: ``main`` (the parser and the table of commands), ``common`` (the argument
parsers every command shares), one module per command or domain.

May import: every other layer.
"""

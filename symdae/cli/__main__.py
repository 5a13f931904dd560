"""``python -m symdae.cli``: the ``symdae`` command."""
import sys

from .main import main

sys.exit(main())

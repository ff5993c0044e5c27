"""python -m cumemtrace ARGS: the same as the `cumemtrace` command."""
import sys

from ._native import main

sys.exit(main())

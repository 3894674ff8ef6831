"""``python -m a0_reranker``: the command line (see ``cli/main.py``)."""

import sys

from .cli.main import main

if __name__ == "__main__":
    sys.exit(main())

"""``python -m dpipe`` runs the ``dpipe`` command."""

import sys

from .cli.main import main

sys.exit(main())

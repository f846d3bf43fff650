"""``python -m k8py`` runs the command line."""

import sys

from k8py.cli.main import main

sys.exit(main())

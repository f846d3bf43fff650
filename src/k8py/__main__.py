"""``python -m k8py`` runs the command line."""

import gc
import sys

gc.disable()  # no collections while the CLI imports (they find nothing; see k8py.cli.zygote)
from k8py.cli.main import main  # noqa: E402

gc.enable()
sys.exit(main())

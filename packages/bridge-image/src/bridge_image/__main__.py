"""``python -m bridge_image``: the same as the ``bridge-image`` command."""

import sys

from bridge_image.cli import main

sys.exit(main())

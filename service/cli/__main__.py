"""`python -m dra_mirror.service.cli`: the same as the `dra-mirror` command."""

import sys

from dra_mirror.service.cli.main import main

sys.exit(main())

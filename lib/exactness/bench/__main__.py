"""`python -m exactness.bench`: the same as `make bench`."""

import sys

from exactness.bench.run import main

sys.exit(main())

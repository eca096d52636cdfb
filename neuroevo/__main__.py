import sys

from neuroevo.cli import main

sys.exit(main())

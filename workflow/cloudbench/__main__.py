import sys

from cloudbench.cli import main

sys.exit(main())

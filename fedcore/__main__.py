import sys

from fedcore.cli import main

sys.exit(main())

import sys

from dlmeval.cli.main import main

sys.exit(main())

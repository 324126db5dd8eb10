import sys

from fairness.cli._main import main

sys.exit(main())

from fairness._util.process import exit_process
from fairness.cli._main import main

exit_process(main())

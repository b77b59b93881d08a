import sys

from program.cli import main

sys.exit(main())

import sys

from program.app.cli import main

sys.exit(main())

import sys

from accelml.cli import main

sys.exit(main())

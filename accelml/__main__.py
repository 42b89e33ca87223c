import sys

from accelml.cli import command_line

sys.exit(command_line())

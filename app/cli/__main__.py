"""``python -m app.cli ...``: the command line without the desktop app."""
import sys

from app.cli import main

sys.exit(main())

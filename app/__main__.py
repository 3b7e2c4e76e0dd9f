"""``python -m app ...``: the same as the `encoderscope` command."""
import sys

from app.main import main

sys.exit(main())

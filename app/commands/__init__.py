"""Subcommands of `encoderscope`, one module each: `register(subparsers)` adds its parser."""

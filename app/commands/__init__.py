"""CLI subcommands that live in the app layer (composition root): one module each, with register(sub)."""

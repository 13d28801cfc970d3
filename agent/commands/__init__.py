"""CLI subcommands as plain functions, one module per area; ``agent/cli.py`` lists them."""

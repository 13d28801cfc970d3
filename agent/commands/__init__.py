"""CLI subcommands as plain functions, one module per area; ``agent/commands/main.py`` lists them."""

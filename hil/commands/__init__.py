"""The sub-commands of `hil`, one module per family; hil/cli.py only parses and calls them."""

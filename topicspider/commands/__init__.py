"""Project commands (``COMMANDS_MODULE``)."""

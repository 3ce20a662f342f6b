"""Thin adapters between turnlog and the libraries people write bots with (optional extras).

Each module imports its library when it is imported, never before: `import turnlog` imports none
of them. Like the CLI and the web viewer, they reach the engine only through the public API
(turnlog's top-level names, Turnlog's methods and turnlog.aio).

- `turnlog.integrations.telegram`: python-telegram-bot 21+ (`pip install turnlog[telegram]`)
- `turnlog.integrations.discord`: discord.py (`pip install turnlog[discord]`)
- `turnlog.integrations.slack`: slack-bolt (`pip install turnlog[slack]`)
"""

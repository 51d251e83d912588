"""The plugin's parts, each a pytest plugin module of its own (see ``plugin.py``)."""

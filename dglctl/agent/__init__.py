"""The host agent: the program dglctl runs on every host (``python -m dglctl.agent CMD``).

It runs elsewhere than the launcher, so it stands apart: it imports the standard library,
its own modules, and a few leaves of the other packages (``__main__.py`` lists them; a layer
rule checks it), and the launcher side reaches it only through ``protocol.py``.
"""

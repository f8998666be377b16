"""The services of a Public Display Network.

``server.platform`` is what they share; ``server.display``, ``server.scheduler``,
``server.content`` and ``server.sensor`` are the four segments, ``server.ctl`` the controller
and ``server.cli`` the ``pdn`` command that starts any of them. docs/code.md draws the house.
"""

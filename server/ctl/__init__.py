"""The controller, ``pdn ctl``: a command-line client of the displays' and the scheduler's
HTTP APIs (pairing, scheduling, health, the fleet). It talks to them over HTTP only and
imports no segment.
"""

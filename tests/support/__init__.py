"""The one support package of the tests and benchmarks: what several of them need, written once.

- ``ports``: free TCP ports; ``waiting``: ``wait_until`` and its kin, the one wait loop;
- ``pages``: a loopback page server that records what it is sent (and ``HookReceiver``);
- ``process``: a ``pdn`` command as a process; ``display`` (``pdn display``) and ``scheduler``
  (``pdn scheduler``, and the scheduler in this process) build on it;
- ``inprocess_display``: the Display Segment in this process (fixtures, a pytest plugin);
- ``peer`` and ``notify``: the ``peer`` and systemd notification fixtures (pytest plugins);
- ``xvfb``, ``compositor``: X and Wayland servers of a test's own; ``pgserver``: PostgreSQL;
- ``pixels``, ``videoscreen``, ``videofiles``: reading the screen back, and test videos;
  ``tickerscreen``: a ticker's motion in every frame, recorded from the X screen;
  ``screenpoints``: points of another process's X screen in every frame;
  ``livestream``: a live HLS stream made by ffmpeg, served on loopback, cut and restored;
- ``sensor``, ``content``, ``segments``: the sensor and the content server in this process,
  and every segment by name on a server of its own;
- ``fleet``: the scheduler's fleet of in-process displays and its API calls; ``lan``: a
  scheduler beyond loopback with its operator token; ``ctl``: ``pdn ctl`` as a process;
- ``floods``: connections from chosen addresses, dripped headers; ``openapi``: the segments'
  documents against their servers; ``png``: one-colour PNGs; ``factories``: fixtures that
  start things on demand and stop them all;
- ``release``, ``signed``, ``webhook_receiver``, ``apifuzz``, ``pgworker``, ``tools``,
  ``paths``: previous releases, signed webhooks, an asyncio receiver, Schemathesis, an outbox
  worker process (and ``PgWorker``, which starts one), system programs, and where the
  checkout is.
"""

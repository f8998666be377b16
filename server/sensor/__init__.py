"""The Environment Segment: one sensor, its reading and its subscribers (``pdn sensor``)."""

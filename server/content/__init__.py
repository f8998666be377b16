"""The Content Segment: hosts applications, forwards their requests (``pdn content``)."""

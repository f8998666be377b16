"""The Scheduling and Management Segment: display registry and CDS schedules (``pdn scheduler``)."""

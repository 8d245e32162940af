"""The runs queue and its leases: a run's states and every write to it (runs.py), its
heartbeat, its stage times, the worker processes' own heartbeats, the reaper that hands on
what a lost worker held, the schedules and the retention prune."""

"""Crash-test harness: a child gateway loop killed with SIGKILL, a fake platform adapter, and an
invariant checker that reads nothing but the event log and the adapter's send file.

- `log`: every event of the log, in commit order (the truth the checker judges).
- `procs`: run a Python snippet as a child gateway process and SIGKILL it at a chosen point.
- `adapter`: the fake platform adapter (each send is one fsynced JSON line).
- `script`: deterministic traffic from a seed.
- `child`: the gateway loop the kill -9 harness runs in each child process.
- `checker`: the invariants.
- `runner`: the parent loop: rounds, random kills, the final clean run, the check.
"""


def never_called(*args):
    """A responder or sender a test expects not to be used."""
    raise AssertionError(f"must not be called: {args!r}")

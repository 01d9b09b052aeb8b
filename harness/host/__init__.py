"""The machine: its identity, the one subprocess helper, the unprivileged account, the work dir and its lock."""

"""Replay: a cell's request stream recorded from a real guest, served natively by the side's own qemu-io.

- :mod:`harness.sample.replay.stream`: the stream file (versioned, hashed, checked as untrusted input);
- :mod:`harness.sample.replay.capture`: a blklogwrites log and QEMU's trace joined into a stream;
- :mod:`harness.sample.replay.record`: the recording sample of a real guest, and the stream cache;
- :mod:`harness.sample.replay.script`: the guest's drive options as qemu-io's, the script, qemu-io's output;
- :mod:`harness.sample.replay.replay`: one replay sample with its checks and figures.
"""

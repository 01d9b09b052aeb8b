"""The bundle for a bare machine, and the KVM check it runs.

* :mod:`harness.bundle.natives`: programs carried with every library they load and the loader
  that runs them (so a machine's own libraries and glibc never count);
* :mod:`harness.bundle.entry`: the self-extracting entry script and the environment scripts;
* :mod:`harness.bundle.build`: ``diskbench bundle``: QEMU, the built guest and the harness in
  one file;
* :mod:`harness.bundle.check`: ``scripts/kvm-check.sh``: what a machine has, whether KVM works,
  and a gate on it, in one JSON and one text file.
"""

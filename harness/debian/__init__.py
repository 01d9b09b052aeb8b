"""Debian packages fetched with apt: the configuration asked (:mod:`harness.debian.apt`: the
system's, or a private one with its own sources and indexes) and the packages fetched at exact
versions into a checked, pruned cache (:mod:`harness.debian.debs`). The guest build and the QEMU
builds both fetch through here."""
